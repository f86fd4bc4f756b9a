"""The record contract: what one perf test writes into JUnit, and how values are written.

One JUnit ``<testcase>`` per record. Its identity is a :class:`Case` (kind, mode, variant of one
profile); its numbers and verdict travel as ``<property>`` elements, written by the runner, the public
API and the micro tier through :func:`fmt`, and read back by ``perfgate.report.junit_read``, which
takes :data:`TEXT_PROPERTIES` from here. docs/records.md lists every property.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from perfgate.categories import RecordKind

__all__ = ["Metric", "METRICS", "RECORD_METRICS", "MICRO_METRICS", "metric_spec", "unit_of",
           "METRIC", "DIRECTION", "LIMIT", "TOLERANCE", "cv_name", "LEGACY_TOK_S_CV",
           "CALIB_GEMM_TFLOPS", "CALIB_HBM_GBPS", "CALIB_SOURCE", "Case", "MACHINE_ECC", "MACHINE_GPU_SERIAL",
           "MACHINE_GPU_UUID", "MACHINE_HOST_ID", "MACHINE_ID", "MACHINE_MEM_CLOCK_MAX_MHZ", "MACHINE_PCIE",
           "MACHINE_CPU_MODEL", "MACHINE_CPU_GOVERNOR", "MACHINE_CPU_IDLE",
           "MACHINE_POWER_LIMIT_W", "MACHINE_PROPERTIES", "MACHINE_PREFIXES", "MACHINE_SM_CLOCK_MAX_MHZ",
           "TEXT_PROPERTIES", "case_of", "config_scope", "fmt", "rounded", "N_STARTS", "START_VALUES", "START_CV",
           "START_CI_LOW", "START_CI_HIGH", "PAIR_RATIO", "PAIR_CI_LOW", "PAIR_CI_HIGH", "PAIR_N", "PAIR_DECISION",
           "PAIR_ORDER", "PAIR_DISTURBED", "PAIR_SHARED_LOAD", "WHY_UNDECIDED", "PAIR_LOOKS", "pair_of",
           "CANDIDATE", "CANDIDATE_PREFIX", "TTFT_PROBES", "TTFT_PROBE_MS", "TTFT_PROBE_FAILURES", "TTFT_MODES",
           "TTFT_MULTIMODAL", "ITL_MODES", "ITL_MULTIMODAL", "TTFT_PART_PREFIX", "TTFT_SPREAD_IN", "PREFILL_TRACES",
           "PREFILL_TRACE_NOTE", "PLACEMENT", "SCHEDULER_SHARED"]


@dataclass(frozen=True)
class Case:
    """One record to produce: a kind of check, in a mode, optionally with a variant."""

    profile: str
    kind: str
    mode: str
    variant: str | None = None
    #: the stack arm of a stack-pair record's dependency: None (the current stack) or "candidate"
    #: (``--perfgate-candidate``); a record's own case is always on the current arm
    arm: str | None = None

    @property
    def id(self) -> str:
        return f"{self.profile.split('/')[-1]}:{self.mode}" + (f"+{self.variant}" if self.variant else "")

    @property
    def expectation_key(self) -> str:
        return self.variant or self.kind

    def baseline(self, base_mode: str) -> Case:
        return Case(self.profile, RecordKind.FLOOR, base_mode, None)

    def on_candidate(self) -> Case:
        """This record's config on the candidate arm (``--perfgate-candidate``), measured beside it."""
        return Case(self.profile, RecordKind.FLOOR, self.mode, self.variant, arm="candidate")


def case_of(item: Any) -> Case | None:
    """The Case a collected test produces (its ``perf_case`` or ``perf_server`` parameter), if any."""
    cs = getattr(item, "callspec", None)
    if cs is None:
        return None
    c = cs.params.get("perf_case", cs.params.get("perf_server"))
    return c if isinstance(c, Case) else None


def config_scope(nodeid: str) -> tuple[str, str | None] | None:
    """(mode, variant) of a perf test from its node id (``...[<Case.id>]``), the inverse of :attr:`Case.id`;
    None for any other test."""
    if nodeid.endswith("]") and "[" in nodeid:
        param = nodeid[nodeid.rindex("[") + 1:-1]
        if ":" in param:
            mode, _, variant = param.split(":", 1)[1].partition("+")
            return mode, variant or None
    return None


def fmt(v: object) -> str:
    """A property value as written: booleans ``true``/``false``, floats to 6 significant digits."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.6g}"
    return "" if v is None else str(v)


def rounded(x: float | None, nd: int = 2) -> float | None:
    """A figure inside a property's JSON (``load_levels``, ``crossover_levels``): ``nd`` decimals, None kept."""
    return round(x, nd) if x is not None else None


# ------------------------------------------------------------------ repeated server starts (--perfgate-starts)
#: how many server starts the record's measurement pooled (written only when more than one)
N_STARTS = "n_starts"
#: the per-start medians of the record's metric (decode tok/s), comma-separated, in start order
START_VALUES = "start_values"
#: the between-start coefficient of variation of those medians
START_CV = "start_cv"
#: the t-interval (the workload's confidence) of the mean across starts
START_CI_LOW = "start_ci_low"
START_CI_HIGH = "start_ci_high"
#: co-resident arms (--perfgate-co-resident): how many of the measurement's starts ran side by side with the
#: other arm's (written only where some did)
CO_RESIDENT_STARTS = "co_resident_starts"
#: where each start's processes ran (perfgate.host.placement): per process the CPU its busiest thread ran on, the
#: busiest first, and the processes that shared a physical core (``scheduler@4 tokenizer@1 client@0;
#: scheduler+client on one core``), `` | `` between starts in start order; Linux, watched starts only
PLACEMENT = "server.placement"
#: per start (as ``start_values.server.scheduler_shared``): 1 where SGLang's scheduler shared a physical core with
#: another of the session's processes, 0 where it ran alone; a TTFT level read against it
SCHEDULER_SHARED = "server.scheduler_shared"

# ------------------------------------------------------------------ paired comparisons (measuring.judge.paired)
#: candidate/current (or variant/baseline) ratio over interleaved start pairs, its CI, the pairs, the decision
PAIR_RATIO = "pair_ratio"
PAIR_CI_LOW = "pair_ci_low"
PAIR_CI_HIGH = "pair_ci_high"
PAIR_N = "pair_n"
PAIR_DECISION = "pair_decision"


def pair_of(metric: str, field: str) -> str:
    """A stack pair's judgement of one metric (perfgate.measuring.stackpair): ``pair.<metric>.<field>``, ``field``
    one of ``ratio``, ``ci_low``, ``ci_high``, ``decision``, ``noise_source``, ``min_effect`` (the practical floor it
    was decided against)."""
    return f"pair.{metric}.{field}"


#: the order of each pair's starts, comma-separated in pair order: ``AB`` the current (baseline) arm first, ``BA``
#: the candidate (variant) first; alternated, AB, BA, AB ... (perfgate.measuring.order)
PAIR_ORDER = "pair_order"
#: the start pairs left out of a paired judgement because one start was measured on a busy host or a throttled GPU
#: and the other quiet (perfgate.measuring.starts.trusted_pairs), 1-based, comma-separated
PAIR_DISTURBED = "pair_disturbed"
#: the start pairs kept although both starts were measured on a busy host: a load both arms shared, which cancels in
#: their ratio (perfgate.host.conditions.pair_kind), 1-based, comma-separated
PAIR_SHARED_LOAD = "pair_shared_load"
#: why the record is undecided or inconclusive, one word of perfgate.categories.Why (``host-busy``, ``one-sided-pair``,
#: ``prior-bound``, ``budget-spent``, ``min-effect-edge``, ``no-history``); absent when it decided
WHY_UNDECIDED = "why_undecided"
#: each look at which the paired judgement asked for one more start pair, ``;``-separated: ``1: undecided ×0.9561
#: [0.8727, 1.0476]`` (perfgate.plugin.compare.until_decided); written into the JUnit file as it is taken, so a run
#: killed during the next pair keeps what its pairs so far said
PAIR_LOOKS = "pair_looks"
#: a stack-pair record's --perfgate-candidate SPEC; the candidate arm's stack where it differs is
#: ``candidate.stack.<key>`` (the current arm's is the record's own ``stack.<key>``)
CANDIDATE = "candidate"
CANDIDATE_PREFIX = "candidate."

# ------------------------------------------------------------------ TTFT probes and modes (perfgate.measuring.probes)
#: the TTFT probes the record's measurement sent and measured (every start's together)
TTFT_PROBES = "ttft_probes"
#: the start's TTFT from its probes (perfgate.measuring.modes.start_estimate; over starts, the median of the starts')
TTFT_PROBE_MS = "ttft_probe_ms"
#: probes that failed (written only when some did; the probes stop at the first)
TTFT_PROBE_FAILURES = "ttft_probe_failures"
#: the modes of the probes' TTFTs, ``28.2 ms 55% | 45.7 ms 45%`` (perfgate.measuring.modes.find_modes), and whether
#: there are more than one; written when there were enough probes to judge (perfgate.measuring.modes.MIN_SAMPLES)
TTFT_MODES = "ttft_modes"
TTFT_MULTIMODAL = "ttft_multimodal"
#: the same of the trials' inter-token latencies, pooled over the start (what its ITL p99 is the tail of)
ITL_MODES = "itl_modes"
ITL_MULTIMODAL = "itl_multimodal"
#: the probes' TTFT in parts at the server's timestamps (SGLang's --enable-metrics; perfgate.measuring.ttft_parts):
#: ``ttft_part.<part>_ms`` (median over the probes) and ``ttft_part.<part>_spread_ms`` (p90 - p10) per part, and
#: ``ttft_spread_in``, the part whose spread is widest (where the levels live)
TTFT_PART_PREFIX = "ttft_part."
TTFT_SPREAD_IN = "ttft_spread_in"
#: the prefills each start traced with SGLang's profiler (every start's together), whose GPU time splits the prefill
#: leg into ``ttft_part.prefill_gpu_ms`` and ``ttft_part.prefill_host_ms`` (perfgate.measuring.prefill_gpu)
PREFILL_TRACES = "prefill_traces"
#: why a start's prefills were not traced (the server refused /start_profile, no trace came in time, ...)
PREFILL_TRACE_NOTE = "prefill_trace_note"

#: properties that are text even when they look like numbers (``config`` is a hash)
TEXT_PROPERTIES: frozenset[str] = frozenset({
    "engine", "profile", "mode", "variant", "config", "log", "kind", "outcome", "category", "expected",
    "reason", "backend", "metric", "direction", "exercised", "nccl_warning", START_VALUES, PAIR_DECISION, PAIR_ORDER,
    PAIR_LOOKS, PAIR_SHARED_LOAD, WHY_UNDECIDED, CANDIDATE, TTFT_MODES, ITL_MODES, TTFT_SPREAD_IN, PREFILL_TRACE_NOTE,
    "host.server_cpus", PLACEMENT,
})


# The machine a record was measured on (perfgate.stack.machine) and its calibration at session start
# (perfgate.stack.calibration): on every testcase next to the stack.* properties and on the suite. Values are
# text ("unknown" where a probe found nothing); the report side reads them into Record.machine / Report.machine.
MACHINE_ID = "machine.id"  # short hash of host_id and the GPU UUIDs: same id, same machine
MACHINE_HOST_ID = "machine.host_id"  # short sha256 of /etc/machine-id (else of the hostname), never the name
MACHINE_GPU_UUID = "machine.gpu_uuid"  # the GPUs in use, comma-joined, in CUDA order
MACHINE_GPU_SERIAL = "machine.gpu_serial"
MACHINE_POWER_LIMIT_W = "machine.power_limit_w"  # per GPU, comma-joined unless all equal
MACHINE_SM_CLOCK_MAX_MHZ = "machine.sm_clock_max_mhz"
MACHINE_MEM_CLOCK_MAX_MHZ = "machine.mem_clock_max_mhz"
MACHINE_ECC = "machine.ecc"  # on / off / unknown
MACHINE_PCIE = "machine.pcie"  # "gen5 x16", with the current link where it differs
# the host's CPU, where a server's host-side work runs: TTFT's prefill host time (perfgate.measuring.prefill_gpu) read
# 10-14 ms on one H100 box and 20-30 ms on another (evidence/h100-x1/), whose CPUs no record said
MACHINE_CPU_MODEL = "machine.cpu_model"  # /proc/cpuinfo's model name ("AMD EPYC 9654 96-Core Processor")
MACHINE_CPU_GOVERNOR = "machine.cpu_governor"  # cpu0's cpufreq scaling governor (performance, powersave, ...)
MACHINE_CPU_IDLE = "machine.cpu_idle"  # the cpuidle driver (intel_idle, acpi_idle, haltpoll, ...)
CALIB_HBM_GBPS = "calib.hbm_gbps"  # device-to-device copy, bytes read + written per second
CALIB_GEMM_TFLOPS = "calib.gemm_tflops"  # bf16 8192^3 matmul
CALIB_SOURCE = "calib.source"  # torch (measured), sim (the simulator's model), none

#: every machine fingerprint property, in display order
MACHINE_PROPERTIES: tuple[str, ...] = (
    MACHINE_ID, MACHINE_HOST_ID, MACHINE_GPU_UUID, MACHINE_GPU_SERIAL, MACHINE_POWER_LIMIT_W,
    MACHINE_SM_CLOCK_MAX_MHZ, MACHINE_MEM_CLOCK_MAX_MHZ, MACHINE_ECC, MACHINE_PCIE,
    MACHINE_CPU_MODEL, MACHINE_CPU_GOVERNOR, MACHINE_CPU_IDLE,
    CALIB_HBM_GBPS, CALIB_GEMM_TFLOPS, CALIB_SOURCE,
)
#: the prefixes of those properties (the report side reads them as text, like stack.*)
MACHINE_PREFIXES: tuple[str, ...] = ("machine.", "calib.")


# ------------------------------------------------------- a limit's record (built-in floors and perf_check alike)
#: the metric a record is judged on (``tok_s`` unless it names another) and its direction (``higher``/``lower``)
METRIC = "metric"
DIRECTION = "direction"
#: the stored limit the record was judged against and its tolerance
LIMIT = "limit"
TOLERANCE = "tolerance"


def cv_name(metric: str) -> str:
    """The property holding a metric's CV over trials: ``<metric>_cv`` for every metric (``tok_s_cv`` too), as
    its interval is ``<metric>_ci_low``/``_ci_high``. Reports written before 2026-12-01 wrote ``cv`` for tok_s
    (:data:`LEGACY_TOK_S_CV`); readers take either (``perfgate.report.records.Record.cv``)."""
    return f"{metric}_cv"


#: tok_s's CV in reports written before 2026-12-01 (read, never written)
LEGACY_TOK_S_CV = "cv"


# ------------------------------------------------------------------ the metrics a record can be judged on

@dataclass(frozen=True)
class Metric:
    """A number a record can be judged on, and which way is better."""

    name: str
    higher_is_better: bool
    unit: str
    what: str

    @property
    def direction(self) -> str:
        return "higher" if self.higher_is_better else "lower"


#: every metric a Measurement carries statistics for (median over trials, CI, CV), by name
METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("tok_s", True, "tok/s", "decode tokens per second per request (after the first chunk)"),
    Metric("output_tok_s", True, "tok/s", "completion tokens of a batch over its wall time"),
    Metric("ttft_ms", False, "ms", "time to first token, median request of a trial"),
    Metric("ttft_ms_p99", False, "ms", "time to first token, 99th percentile of a trial"),
    Metric("itl_ms", False, "ms", "inter-token latency, median of a trial"),
    Metric("itl_ms_p99", False, "ms", "inter-token latency, 99th percentile of a trial"),
)}

#: numbers a record judges that carry no statistics over trials of their own: a Measurement's acceptance length
#: (summed over its trials), and what a record of its own kind computes from many measurements
#: (perfgate.plugin.loadcheck); judged against ``[floors.<mode>]`` in their direction like METRICS
RECORD_METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("accept_len", True, "tokens/verify", "completion tokens per verify pass of a speculative mode"),
    Metric("goodput_rps", True, "req/s", "requests per second meeting every SLO, at the highest rate that meets them"),
    Metric("crossover", True, "streams", "the load up to which the speculative mode beats the baseline"),
)}

#: the micro tier's judged number (perfgate.plugin.microcheck): its ceilings live in ``[micro.floors]``, not in a
#: mode's ``[floors]``, but they are judged by the same limit judge (perfgate.measuring.verdict.judge_limit)
MICRO_METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("latency_us", False, "µs", "an all-reduce's median latency over its iterations"),
)}


def metric_spec(name: str) -> Metric:
    """The :class:`Metric` of a judged number: a measurement's (:data:`METRICS`), a record's
    (:data:`RECORD_METRICS`) or the micro tier's (:data:`MICRO_METRICS`)."""
    spec = METRICS.get(name) or RECORD_METRICS.get(name) or MICRO_METRICS.get(name)
    if spec is None:
        known = sorted({**METRICS, **RECORD_METRICS, **MICRO_METRICS})
        raise KeyError(f"no metric {name!r}: the judged numbers are {known}")
    return spec

#: units of the numbers records carry beyond METRICS and RECORD_METRICS, by the ending of their name (a sweep's
#: ``c4_ttft_ms_p99``, the micro tier's ``latency_us`` and ``busbw_gbps``)
_UNIT_ENDINGS = (("_tok_s", "tok/s"), ("_ms", "ms"), ("_us", "µs"), ("_rps", "req/s"), ("_gbps", "GB/s"))


def unit_of(metric: str) -> str:
    """The unit of a record's metric (``tok/s``, ``ms``, ``req/s``, ...); '' when it has none perfgate knows."""
    m = METRICS.get(metric) or RECORD_METRICS.get(metric)
    if m is not None:
        return m.unit
    base = metric.rsplit("_p", 1)[0] if re.search(r"_p\d+(_\d+)?$", metric) else metric
    return next((u for end, u in _UNIT_ENDINGS if base.endswith(end) or base == end[1:]), "")

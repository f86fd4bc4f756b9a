"""SGLang's own benchmark against a live server, and its figures compared with perfgate's (no pytest here).

``python -m sglang.benchmark.one_batch_server --model None --base-url URL --batch-size 1 --input-len I
--output-len O --dataset-name random-ids`` runs against the live server, and its JSONL result is read
back (never parsed from stdout). The two tools count differently: SGLang's ``output_throughput`` is
``output_len / (latency - ttft)`` (every token, including the first, over the time after the first),
perfgate's ``tok_s`` is ``(completion_tokens - first_chunk_tokens) / (latency - ttft)``; so SGLang's
figure is expected higher by a factor ``O / (O - 1)`` (0.4 % at 256 tokens). The comparison is made
after that correction.

Speculative modes need one more: with a fractional acceptance (``SGLANG_SIMULATE_ACC_LEN=3.5``, or any
real draft model) each request realises its own acceptance (3.48 to 3.58 in SGLang's requests, 3.49
over perfgate's trials in the run of docs/results-h200.md), and tokens per second follow it. What both clocks measure is
the decode cycle (one draft + verify pass), so where both sides report an acceptance length the
verdict compares decode cycles per second, ``tok/s / acceptance`` per request (see :func:`agreement`),
and the raw tok/s ratio is recorded beside it. SGLang's benchmark runs once per perfgate trial
(``--batch-size 1 1 1 1 1``), so the verdict can tell a disagreement from too few samples.

SGLang's benchmark needs a tokenizer; dummy-weight runs ship only ``config.json``, so a word-level
tokenizer with the model's vocabulary size (``t0`` … ``tN``) is written to a temporary folder.

The pytest adapter (``perf_crosscheck``, :class:`perfgate.plugin.crosscheck.Crosscheck`) measures, calls
:func:`run_bench` and :func:`agreement`, records :func:`bench_properties` and :func:`agreement_properties` and
concludes on :meth:`Agreement.verdict`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from perfgate.categories import Category, Outcome
from perfgate.measuring.judge import Decision, decide
from perfgate.measuring.metrics import bootstrap_ratio_ci
from perfgate.measuring.outcomes import Claim, outcome_of
from perfgate.measuring.verdict import Verdict

__all__ = ["Agreement", "BenchResult", "BenchRow", "agreement", "agreement_properties", "bench_properties",
           "make_tokenizer", "run_bench", "sglang_bench_module"]

# the record's own properties (docs/records.md), after its identity, stack and perfgate's measurement
SGLANG_BENCH_MODULE = "sglang_bench_module"  # the module that ran (sglang.benchmark.one_batch_server since 0.5.17)
SGLANG_BENCH_N = "sglang_bench_n"  # its requests: one per perfgate trial
SGLANG_BENCH_TOK_S = "sglang_bench_tok_s"  # median output_throughput, as SGLang counts
SGLANG_BENCH_TOK_S_COMPARABLE = "sglang_bench_tok_s_comparable"  # the same as perfgate counts (x (O - 1) / O)
SGLANG_BENCH_ACCEPT_LEN = "sglang_bench_accept_len"  # median acceptance of its requests, where it reports one
SGLANG_BENCH_LOG = "sglang_bench_log"
VS_SGLANG_BENCH = "vs_sglang_bench"  # perfgate tok/s / SGLang's comparable tok/s
CYCLES_S = "cycles_s"  # decode cycles per second (tok/s / acceptance), perfgate's and SGLang's
SGLANG_BENCH_CYCLES_S = "sglang_bench_cycles_s"
VS_SGLANG_BENCH_PER_CYCLE = "vs_sglang_bench_per_cycle"  # the judged ratio where both report an acceptance
VS_SGLANG_BENCH_CI_LOW = "vs_sglang_bench_judged_ci_low"  # bootstrap CI of the judged ratio
VS_SGLANG_BENCH_CI_HIGH = "vs_sglang_bench_judged_ci_high"

MAKE_TOKENIZER = r"""
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
out, vocab = sys.argv[1], int(sys.argv[2])
tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t0"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0").save_pretrained(out)
print(out)
"""


@dataclass(frozen=True, kw_only=True)
class BenchRow:
    """One request of SGLang's bench_one_batch_server (one line of its JSONL result)."""

    output_throughput: float
    latency_s: float
    last_ttft_s: float
    acc_length: float | None  # /server_info avg_spec_accept_length, reset by the /flush_cache before the request
    output_len: int
    raw: dict[str, object]

    @property
    def comparable_tok_s(self) -> float:
        """SGLang's figure on perfgate's definition (tokens after the first)."""
        return self.output_throughput * (self.output_len - 1) / self.output_len

    @property
    def cycles_s(self) -> float | None:
        """Decode cycles per second, on perfgate's count; None without an acceptance length."""
        return self.comparable_tok_s / self.acc_length if self.acc_length else None


@dataclass(frozen=True, kw_only=True)
class BenchResult:
    """SGLang's benchmark repeated (``--batch-size 1 1 1 ...``): medians over its requests."""

    rows: tuple[BenchRow, ...]

    def _median(self, xs: Sequence[float | None]) -> float | None:
        vals = [x for x in xs if x is not None]
        return statistics.median(vals) if vals and len(vals) == len(xs) else None

    @property
    def n(self) -> int:
        return len(self.rows)

    @property
    def output_len(self) -> int:
        return self.rows[0].output_len

    @property
    def output_throughput(self) -> float:
        return statistics.median(r.output_throughput for r in self.rows)

    @property
    def comparable_tok_s(self) -> float:
        return statistics.median(r.comparable_tok_s for r in self.rows)

    @property
    def acc_length(self) -> float | None:
        return self._median([r.acc_length for r in self.rows])

    @property
    def cycles_s(self) -> float | None:
        return self._median([r.cycles_s for r in self.rows])


@dataclass(frozen=True, kw_only=True)
class Agreement:
    """perfgate's figure against SGLang's, raw and (where both report acceptance) per decode cycle.

    The verdict is made on :attr:`judged` with its bootstrap CI (perfgate's trials against SGLang's
    requests) by the one rule of every comparison (:func:`perfgate.measuring.judge.decide`, ``min_effect`` the
    tolerance): ``pass`` when the two agree (``same``: the CI inside the tolerance band), ``fail`` when they
    differ (the CI off 1 and the ratio beyond the band, either way), else ``inconclusive`` (too few samples to
    tell: raise [workload] trials).
    """

    perfgate_tok_s: float
    perfgate_accept_len: float | None
    bench: BenchResult
    ratio: float  # perfgate tok/s / SGLang's tok/s as perfgate counts
    samples: tuple[tuple[float, ...], tuple[float, ...]]  # (perfgate, SGLang) of the judged quantity
    per_cycle: bool = False  # judged on decode cycles per second rather than tok/s
    tolerance: float = 0.01

    @property
    def perfgate_cycles_s(self) -> float | None:
        return statistics.median(self.samples[0]) if self.per_cycle else None

    @property
    def bench_cycles_s(self) -> float | None:
        return statistics.median(self.samples[1]) if self.per_cycle else None

    @property
    def cycle_ratio(self) -> float | None:
        return self.judged if self.per_cycle else None

    @property
    def judged(self) -> float:
        """The ratio the verdict is made on: per cycle where both sides know their acceptance."""
        return statistics.median(self.samples[0]) / statistics.median(self.samples[1])

    @cached_property
    def ci(self) -> tuple[float, float]:
        """Bootstrap CI of :attr:`judged` (2000 resamples: computed once, read by outcome, message, properties)."""
        return bootstrap_ratio_ci(self.samples[0], self.samples[1])

    @property
    def decision(self) -> Decision:
        """``same`` (the tools agree), ``regressed``/``improved`` (perfgate reads lower/higher), or ``undecided``."""
        return decide(self.judged, self.ci, higher_is_better=True, min_effect=self.tolerance)

    @property
    def agrees(self) -> bool:
        return self.decision is Decision.SAME

    @property
    def outcome(self) -> Outcome:
        """:func:`perfgate.measuring.outcomes.outcome_of` the decision, the claim being that the tools agree."""
        return outcome_of(self.decision, Claim.AGREES)

    def message(self) -> str:
        b = self.bench
        acc = (f" at acceptance {self.perfgate_accept_len:.2f}" if self.perfgate_accept_len else "")
        bacc = f" at acceptance {b.acc_length:.2f}" if b.acc_length else ""
        reqs = f", median of {b.n} requests" if b.n > 1 else ""
        msg = (f"perfgate {self.perfgate_tok_s:.2f} tok/s{acc} vs SGLang bench_one_batch_server "
               f"{b.output_throughput:.2f}{bacc}{reqs} ({b.comparable_tok_s:.2f} counted as perfgate counts): "
               f"ratio {self.ratio:.4f}")
        if self.per_cycle:
            msg += (f"; at equal acceptance, decode cycles/s {self.perfgate_cycles_s:.2f} vs "
                    f"{self.bench_cycles_s:.2f}: ratio {self.judged:.4f}")
        lo, hi = self.ci
        msg += f" [{lo:.4f}, {hi:.4f}]"
        if self.outcome == "fail":
            msg += f" differs by more than {self.tolerance:.0%}"
        elif self.outcome == "inconclusive":
            msg += (f" is not shown within {self.tolerance:.0%} nor beyond it: too few samples to tell "
                    f"(raise [workload] trials)")
        return msg

    def verdict(self, log_path: Path | str) -> Verdict:
        """The record's verdict: :attr:`outcome`, a failure ``measurement-mismatch`` pointing at SGLang's log."""
        if self.outcome == "fail":
            return Verdict(outcome=Outcome.FAIL, category=Category.MEASUREMENT_MISMATCH,
                           message=f"{self.message()}; see {log_path}")
        return Verdict(outcome=self.outcome, message=self.message())


def agreement(trials: Sequence[tuple[float, float | None]], bench: BenchResult, *, tok_s: float,
              accept_len: float | None, tolerance: float = 0.01) -> Agreement:
    """Compare perfgate's measurement with SGLang's requests.

    ``trials`` are perfgate's (tok/s, acceptance) per trial; ``tok_s`` and ``accept_len`` its summary
    (median tok/s, acceptance over every request). Both tok/s are on perfgate's count (tokens after the
    first over the time after the first); dividing each trial's (each SGLang request's) tok/s by its own
    acceptance gives decode cycles per second, the same for any acceptance the draft happened to reach;
    the medians of those are compared.
    """
    ratio = tok_s / bench.comparable_tok_s
    common: dict[str, Any] = {"perfgate_tok_s": tok_s, "perfgate_accept_len": accept_len, "bench": bench,
                              "ratio": ratio, "tolerance": tolerance}
    per_trial = tuple(t / a for t, a in trials if a)
    bench_cycles = tuple(c for c in (r.cycles_s for r in bench.rows) if c is not None)
    if per_trial and len(bench_cycles) == len(bench.rows):
        return Agreement(samples=(per_trial, bench_cycles), per_cycle=True, **common)
    ours = tuple(t for t, _ in trials) or (tok_s,)
    return Agreement(samples=(ours, tuple(r.comparable_tok_s for r in bench.rows)), **common)


BENCH_MODULES = ("sglang.benchmark.one_batch_server", "sglang.bench_one_batch_server")
"""Where the benchmark lives: since 0.5.17 in sglang.benchmark (the old name is a shim that warns)."""

_FIND_MODULE = r"""
import importlib, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and name.startswith(e.name):  # this release has no such module: try the next name
            continue
        raise
    print(name)
    break
else:
    sys.exit("ModuleNotFoundError: none of " + ", ".join(sys.argv[1:]))
"""


def sglang_bench_module(python: str) -> tuple[str | None, str | None]:
    """(module, None) for SGLang's one-batch benchmark as importable in ``python``, else (None, why)."""
    try:
        r = subprocess.run([python, "-c", _FIND_MODULE, *BENCH_MODULES], capture_output=True, text=True,
                           timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"{type(e).__name__}: {e}"
    if r.returncode == 0 and r.stdout.strip():
        return r.stdout.strip().splitlines()[-1], None
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    return None, lines[-1] if lines else f"exit code {r.returncode}"


def make_tokenizer(python: str, model_path: str, workdir: Path) -> Path:
    """The model's own tokenizer if it has one, else a word-level stand-in of its vocabulary size.

    SGLang's random-ids dataset draws token ids below the tokenizer's vocabulary size, so the stand-in
    only needs the right size; without a local config.json it has 32000 entries.
    """
    mp = Path(model_path)
    if any((mp / f).exists() for f in ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")):
        return mp
    cfg = mp / "config.json"  # a hub id (the simulated profiles) has none: ids below 32000 fit any modern LM
    vocab = int(json.loads(cfg.read_text()).get("vocab_size", 32000)) if cfg.is_file() else 32000
    out = workdir / f"tokenizer-{vocab}"
    if not (out / "tokenizer.json").exists():
        subprocess.run([python, "-c", MAKE_TOKENIZER, str(out), str(vocab)], check=True, capture_output=True,
                       timeout=300)
    return out


def run_bench(*, python: str, url: str, tokenizer: Path, input_len: int, output_len: int, log_path: Path,
              repeats: int = 1, module: str = BENCH_MODULES[0], timeout_s: float = 600) -> BenchResult:
    """Run SGLang's one-batch benchmark (batch 1, ``repeats`` times in one process) against ``url``.

    ``--batch-size 1 1 1`` makes SGLang run the case once per entry (itertools.product over its
    lists), each after its own ``/flush_cache``; every run is one line of the JSONL result.
    """
    with tempfile.TemporaryDirectory(prefix="perfgate-bench-") as tmp:
        result = Path(tmp) / "result.jsonl"
        argv = [python, "-m", module, "--model", "None", "--base-url", url,
                "--batch-size", *(["1"] * max(1, repeats)), "--input-len", str(input_len),
                "--output-len", str(output_len),
                "--dataset-name", "random-ids", "--local-tokenizer-path", str(tokenizer),
                "--result-filename", str(result)]  # (0.5.17 has no --skip-token-capacity-check)
        with open(log_path, "ab") as log:
            log.write(f"# perfgate crosscheck: {' '.join(argv)}\n".encode())
            log.flush()
            proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s,
                                  env={**os.environ, "PYTHONUNBUFFERED": "1"})
        if proc.returncode != 0 or not result.exists():
            raise RuntimeError(f"{module} exited {proc.returncode}; see {log_path}")
        rows = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
    if not rows:
        raise RuntimeError(f"{module} wrote no result; see {log_path}")
    return BenchResult(rows=tuple(_row(r, output_len, _sim_speedup(url)) for r in rows))


def _sim_speedup(url: str) -> float:
    """perfgate's simulated server run with --sim-speedup s (its /server_info says so): SGLang's client saw every
    duration about s times short, so its figures are scaled back by s (approximately: its own delays get scaled too;
    perfgate's client reads the simulator's clock lead instead, and --perfgate-crosscheck on runs the simulator at
    real time unless PERFGATE_SIM_SPEEDUP says otherwise)."""
    from perfgate.client import get_json

    info = get_json(url.rstrip("/"), "/server_info") or {}
    try:
        s = float(info.get("perfgate_sim_speedup") or 1.0)
    except (TypeError, ValueError):
        return 1.0
    return s if s > 0 else 1.0


def _row(row: dict[str, Any], output_len: int, speedup: float = 1.0) -> BenchRow:
    acc = row.get("acc_length")
    return BenchRow(
        output_throughput=float(row["output_throughput"]) / speedup,
        latency_s=float(row["latency"]) * speedup,
        last_ttft_s=float(row["last_ttft"]) * speedup,
        acc_length=float(acc) if acc is not None and float(acc) > 0 else None,
        output_len=int(row.get("output_len", output_len)),
        raw=row,
    )


def bench_properties(module: str, bench: BenchResult, log_path: Path | str) -> dict[str, object]:
    """The record's properties of SGLang's run (docs/records.md), in the order they are recorded."""
    props: dict[str, object] = {SGLANG_BENCH_MODULE: module, SGLANG_BENCH_N: bench.n,
                                SGLANG_BENCH_TOK_S: bench.output_throughput,
                                SGLANG_BENCH_TOK_S_COMPARABLE: bench.comparable_tok_s}
    if bench.acc_length is not None:
        props[SGLANG_BENCH_ACCEPT_LEN] = bench.acc_length
    props[SGLANG_BENCH_LOG] = str(log_path)
    return props


def agreement_properties(ag: Agreement) -> dict[str, object]:
    """The record's properties of the comparison (docs/records.md), in the order they are recorded."""
    props: dict[str, object] = {VS_SGLANG_BENCH: ag.ratio}
    if ag.per_cycle:
        props[CYCLES_S] = ag.perfgate_cycles_s
        props[SGLANG_BENCH_CYCLES_S] = ag.bench_cycles_s
        props[VS_SGLANG_BENCH_PER_CYCLE] = ag.judged
    props[VS_SGLANG_BENCH_CI_LOW] = ag.ci[0]
    props[VS_SGLANG_BENCH_CI_HIGH] = ag.ci[1]
    return props


if __name__ == "__main__":  # pragma: no cover - manual use
    print(sglang_bench_module(sys.executable))

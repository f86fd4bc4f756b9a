"""The prefill's GPU time apart from its host time (issue 53 item 2): the trace reader on traces of known content, the
split of the prefill leg, the simulator's prefill-stage traces (its GPU part and host part, and the two planted
slowdowns landing each in its own part), and a start's prefills traced over real sockets against the simulated
server (perfgate.procedure.prefill)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.client import GenRequest
from perfgate.client.profiler import start_body
from perfgate.measuring.prefill_gpu import SPLIT, prefill_busy_ms, split_medians
from perfgate.measuring.trace import TraceError
from perfgate.measuring.ttft_parts import LEG_METRICS, part_properties, said, start_medians
from perfgate.procedure.prefill import trace_prefills
from perfgate.serving.simprocess import SEED_BOX, SimProcess
from perfgate.sim.behavior import simulate_launch
from perfgate.sim.trace import PREFILL_HOST_SHARE, SPIN, TraceRecorder


def _write(path: Path, events: list[dict[str, object]]) -> Path:
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    return path


def _span(name: str, ts: float, dur: float) -> dict[str, object]:
    return {"ph": "X", "cat": "gpu_user_annotation", "name": name, "ts": ts, "dur": dur}


def _kernel(ts: float, dur: float, name: str = "nvjet_sm90_tst") -> dict[str, object]:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur}


def test_busy_time_counts_the_kernels_inside_each_prefill_once(tmp_path):
    """Two prefills: the kernels starting inside each span, overlapping ones counted once, gaps not at all; a kernel
    outside every span (sampling after the forward) and the decode step's are nobody's prefill."""
    p = _write(tmp_path / "x-TP-0-EXTEND.trace.json.gz", [
        _span("step[EXTEND bs=1 toks=128]", 1000, 500),
        _kernel(1000, 100), _kernel(1050, 100),  # overlap: 1000-1150 busy = 150
        _kernel(1300, 50),  # after a host gap: +50
        _kernel(1600, 30),  # sampling, outside the span
        _span("step[EXTEND bs=1 toks=128]", 5000, 400), _kernel(5000, 400),
        _span("step[DECODE bs=1]", 9000, 100), _kernel(9000, 100),
    ])
    assert prefill_busy_ms(p) == pytest.approx([0.2, 0.4])


def test_a_decode_trace_is_no_prefill_trace(tmp_path):
    p = _write(tmp_path / "y-TP-0-DECODE.trace.json.gz", [_span("step[DECODE bs=1]", 0, 10), _kernel(0, 10)])
    with pytest.raises(TraceError, match=r"no step\[EXTEND"):
        prefill_busy_ms(p)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1, 60), min_size=1, max_size=6), st.lists(st.lists(st.floats(0.1, 20), min_size=1,
                                                                             max_size=9), min_size=1, max_size=6))
def test_the_split_adds_up_to_the_prefill_leg(prefill, gpu):
    """Per start: GPU + host = the start's prefill leg; GPU is the median of its traced prefills; a start without a
    trace leaves every start unsplit."""
    n = min(len(prefill), len(gpu))
    out = split_medians(prefill[:n], gpu[:n])
    assert set(out) == set(SPLIT)
    for i in range(n):
        assert out["prefill_gpu"][i] + out["prefill_host"][i] == pytest.approx(prefill[i])
        assert min(gpu[i]) <= out["prefill_gpu"][i] <= max(gpu[i])
    assert split_medians(prefill[:n], [*gpu[:n - 1], []]) == {}
    assert split_medians(prefill[:n], gpu[:n - 1]) == ({} if n > 1 else {})


def test_parts_and_record_names():
    legs = [{"dispatch": 0.5, "to_forward": 1.0, "prefill": 20.0, "rest": 3.0}] * 5
    props = part_properties(legs, (6.0, 6.2, 5.9))
    assert props["ttft_part.prefill_gpu_ms"] == 6.0 and props["ttft_part.prefill_host_ms"] == 14.0
    assert props["prefill_traces"] == 3 and float(props["ttft_part.prefill_gpu_spread_ms"]) > 0  # type: ignore[arg-type]
    assert props["ttft_spread_in"] in ("dispatch", "to_forward", "prefill", "rest")  # a probe leg, never the split
    assert "ttft_part.prefill_gpu_ms" not in part_properties(legs)
    per = start_medians([legs, legs], [(6.0,), (7.0,)])
    assert per["prefill_gpu"] == [6.0, 7.0] and per["prefill_host"] == [14.0, 13.0]
    assert LEG_METRICS[-2:] == ("ttft_part.prefill_gpu_ms", "ttft_part.prefill_host_ms")
    assert said("ttft_part.prefill_gpu_ms") == "TTFT's prefill GPU time"
    assert said("ttft_part.to_forward_ms") == "TTFT's to_forward leg"


# ----------------------------------------------------------------------------- the simulator's prefill traces


def _prefill_trace(tmp_path: Path, *, step_us: float, spin_us: float = 0.0, n: int = 3) -> Path:
    plan = simulate_launch(SEED_BOX, {"tp-size": 8, "cuda-graph-max-bs-decode": 128}, {})
    clock = iter(range(0, 10**9, 10**5))
    rec = TraceRecorder(plan, lambda line: None, lambda: float(next(clock)))
    assert rec.start(start_body(tmp_path, "q", n)) is None
    for _ in range(n):
        rec.on_step("prefill", 1, 128, step_us=step_us, spin_us=spin_us)
    return tmp_path / "q-TP-0-EXTEND.trace.json.gz"


def test_sim_prefill_trace_holds_its_gpu_part_and_a_planted_spin(tmp_path):
    plan = simulate_launch(SEED_BOX, {"tp-size": 8, "cuda-graph-max-bs-decode": 128}, {})
    fwd = plan.prefill_ms(128) * 1000
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    plain = prefill_busy_ms(_prefill_trace(tmp_path / "a", step_us=fwd))
    assert plain == pytest.approx([fwd * (1 - PREFILL_HOST_SHARE) / 1000] * 3, rel=1e-6)
    spun = _prefill_trace(tmp_path / "b", step_us=fwd + 3000, spin_us=3000)
    assert prefill_busy_ms(spun) == pytest.approx([p + 3.0 for p in plain], rel=1e-6)
    with gzip.open(spun, "rt") as f:
        names = [e["name"] for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"]
    assert names.count(SPIN) == 3


@pytest.fixture(scope="module")
def sim_server(tmp_path_factory):
    log = tmp_path_factory.mktemp("sim") / "server.log"
    with SimProcess.start(["--tp-size", "8", "--sim-speedup", "20", "--enable-metrics"], log_path=log,
                          env={"PERFGATE_SIM_PREFILL_GPU_MS": "3"}) as server:
        server.wait_ready()
        yield server


def test_a_start_traces_its_prefills_over_real_sockets(sim_server, tmp_path):
    """perfgate.procedure.prefill against the simulated server: n prefills traced, each with the planted 3 ms of GPU
    time in its GPU part, the profile ended (a second trace starts at once)."""
    reqs = [GenRequest(input_ids=tuple(range(10 + i, 138 + i)), max_new_tokens=1) for i in range(4)]
    got = trace_prefills(sim_server.url, reqs, tmp_path / "t", profile_id="one")
    assert got.note == "" and len(got.gpu_ms) == 4, got
    assert all(g > 3.0 for g in got.gpu_ms)
    again = trace_prefills(sim_server.url, reqs[:2], tmp_path / "t", profile_id="two")
    assert again.note == "" and len(again.gpu_ms) == 2


def test_a_server_that_refuses_the_profile_gives_the_reason(tmp_path):
    got = trace_prefills("http://127.0.0.1:9", [GenRequest(input_ids=(1, 2, 3), max_new_tokens=1)], tmp_path,
                         profile_id="x")
    assert got.gpu_ms == () and "start_profile failed" in got.note


# ----------------------------------------------------------------------------- real traces (H100, SGLang 0.5.17)

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "h100-x1"


def test_real_prefills_gpu_time_and_a_planted_spin():
    """Two server processes of one H100 (GPU-466713a9, 2026-12-07, Llama-3.1-8B dummy, Triton attention, prefill
    without CUDA graphs), three 128-token prefills each, traced by SGLang 0.5.17's own profiler: the GPU was busy
    7.03-7.04 ms per prefill in the current arm's process, and 3.04 ms more in the candidate's, whose every prefill
    forward began with a 3000 us spin (ci/device/inject PERFGATE_INJECT_EXTEND_GPU_US=3000); the spans around them
    (first kernel to last, the host's launch gaps in) were 34-48 ms. The overlap scheduler's decode step between two
    prefills is nobody's prefill."""
    cur = prefill_busy_ms(REAL / "prefill-current-TP-0.trace.json.gz")
    spun = prefill_busy_ms(REAL / "prefill-spin3000-TP-0.trace.json.gz")
    assert len(cur) == len(spun) == 3
    assert all(7.0 < x < 7.1 for x in cur) and max(cur) - min(cur) < 0.01
    assert all(3.0 < s - c < 3.1 for s, c in zip(spun, cur))
    with gzip.open(REAL / "prefill-spin3000-TP-0.trace.json.gz", "rt") as f:
        kernels = [e["name"] for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"]
    assert sum("spin" in k for k in kernels) == 3, {k for k in kernels if "sleep" in k or "spin" in k}

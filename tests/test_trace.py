"""Step profiles: the trace parser on real H200 traces and on the simulator's, the simulator's
/start_profile over real sockets, and the profile record's verdicts (fallback, not-exercised)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfgate.client import GenRequest
from perfgate.measuring.trace import TraceError, analyze, kernel_group, read_trace
from perfgate.plugin.profiling import profile_verdict
from perfgate.serving.capture import CaptureError, capture, start_body
from perfgate.serving.simprocess import H100_BOX, SEED_BOX, SimProcess
from perfgate.sim.behavior import simulate_launch
from perfgate.sim.trace import TraceRecorder, step_kernels

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "h200-x1"
SEED_TP8 = {"tp-size": 8, "cuda-graph-max-bs-decode": 128}
EAGLE3 = {**SEED_TP8, "speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "/models/d",
          "speculative-num-steps": 3, "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 4}


# ----------------------------------------------------------------------------- real traces (H200, tp 1)

def test_real_decode_trace_of_plain_decoding():
    """SGLang 0.5.17 on one H200 (Llama-3.1-8B dummy, Triton attention, CUDA graphs): 12 decode steps."""
    p = analyze([REAL / "baseline-TP-0-DECODE.trace.json.gz"])
    assert p.steps == 12 and not p.speculative and p.gpu == "NVIDIA H200"
    assert p.allreduce_count == 0 and p.allreduce_backend == "none"  # tp 1: no all-reduce
    # 32 layers x 4 GEMMs (cuBLAS nvjet kernels) + the LM head: GEMMs are ~88 % of the step
    assert 4400 < p.busy_us < 4700 and 4500 < p.step_us < 5200
    assert 0.85 < p.group_us("gemm") / p.busy_us < 0.90
    top = p.properties()["top_kernels"]
    assert str(top).startswith("nvjet_sm90_tst_128x8_64x12_2x1_v_bz_TNT x32 ")
    # busy + idle inside the steps; a cycle (step start to step start) includes the host's turn
    assert p.cycle_us is not None and p.cycle_us > p.step_us
    assert p.projected_speedup(0.5) == pytest.approx(1.0)


def test_real_verify_trace_of_eagle3():
    """EAGLE-3 (3 steps, topk 1, 4 draft tokens): the spans are step[TARGET_VERIFY], the draft falls between."""
    t = read_trace(REAL / "eagle3-acc2-TP-0-DECODE.trace.json.gz")
    assert {s.name for s in t.steps} == {"step[TARGET_VERIFY bs=1]"} and len(t.steps) == 12
    p = analyze([t.path])
    assert p.speculative
    # verify: the 32 target layers' GEMMs; the cycle adds the drafter's forwards outside the span
    assert 4900 < p.busy_us < 5400
    cyc = p.ranks[0].cycle_busy_us
    assert cyc is not None and cyc > p.busy_us + 1000
    assert 0.10 < p.group_us("attention") / p.busy_us < 0.20  # extend attention (_fwd_kernel) for 4 tokens


@pytest.mark.parametrize("name, group, family", [
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allreduce", "nccl"),
    ("ncclKernel_AllReduce_RING_LL_Sum_half(ncclWorkElem)", "allreduce", "nccl"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allgather", "nccl"),
    ("void sglang::cross_device_reduce_1stage<__nv_bfloat16, 2>(sglang::RankData*, int)", "allreduce", "custom_ar"),
    ("void vllm::cross_device_reduce_2stage<__nv_bfloat16, 8>(vllm::RankData*)", "allreduce", "custom_ar"),
    ("void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<__nv_bfloat16, 2, true>()",
     "allreduce", "flashinfer_ar_fusion"),
    ("void c10d::symmetric_memory::two_shot_all_reduce_kernel<c10::BFloat16, 8>()", "allreduce", "torch_symm_mem"),
    ("void c10d::symmetric_memory::multimem_all_reduce_kernel<c10::BFloat16, 8>()", "allreduce", "torch_symm_mem"),
    ("void mscclpp_allreduce_kernel<__nv_bfloat16>(int)", "allreduce", "mscclpp"),
    ("nvjet_sm90_tst_128x8_64x12_2x1_v_bz_TNT", "gemm", ""),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float>()", "gemm", ""),
    ("_fwd_grouped_kernel_stage1", "attention", ""),
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<128>()", "attention", ""),
    ("void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>()", "other", ""),  # a norm, not attention
    ("void at::native::reduce_kernel<512, 1>()", "other", ""),
])
def test_kernel_groups(name, group, family):
    assert kernel_group(name) == (group, family)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_kernel_group_never_fails(name):
    g, f = kernel_group(name)
    assert g in ("gemm", "attention", "allreduce", "allgather", "other")
    assert (f != "") == (g in ("allreduce", "allgather"))


def test_unreadable_and_stepless_traces_say_which_file(tmp_path):
    half = tmp_path / "x-TP-0-DECODE.trace.json.gz"
    half.write_bytes(gzip.compress(b'{"traceEvents": [')[:-6])
    with pytest.raises(TraceError, match="x-TP-0-DECODE.trace.json.gz: not a readable Chrome trace"):
        read_trace(half)
    empty = tmp_path / "y.json"
    empty.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}]}))
    with pytest.raises(TraceError, match=r"y.json: no step\[DECODE"):
        read_trace(empty)


# ----------------------------------------------------------------------------- the simulator's traces

@pytest.mark.parametrize("flags, env", [(SEED_TP8, {}), (EAGLE3, {}), ({**SEED_TP8, "speculative-algorithm": "NGRAM"}, {}),
                                        (EAGLE3, {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"})])
def test_sim_kernels_add_up_to_the_cost_model(flags, env):
    plan = simulate_launch(SEED_BOX, flags, env)
    for batch in (1, 3, 16):
        spans = step_kernels(plan, "decode", batch)
        total = sum(us for _, ks in spans for _, us in ks)
        assert total == pytest.approx(plan.cycle_ms(batch) * 1000, rel=1e-9)
        verify = [ks for name, ks in spans if name.startswith("step[")]
        assert len(verify) == 1
        assert sum(us for _, us in verify[0]) == pytest.approx(plan.verify_ms(batch) * 1000, rel=1e-9)


def _record(plan, tmp_path, steps=6, batch=1, profile_id="p"):
    clock = iter(range(0, 10**9, 10**5))
    rec = TraceRecorder(plan, lambda line: None, lambda: float(next(clock)))
    assert rec.start(start_body(tmp_path, profile_id, steps)) is None
    rec.on_step("prefill", batch, 128)
    for _ in range(steps + 3):
        rec.on_step("decode", batch)
    return sorted(tmp_path.glob(f"{profile_id}-TP-*-DECODE.trace.json.gz"))


def test_seed_box_eagle3_verify_has_122_allreduces_of_25_ms(tmp_path):
    """The seed's diagnosis, from the simulator's trace: 122 small all-reduces per verify, ~25 of ~30 ms."""
    plan = simulate_launch(SEED_BOX, EAGLE3, {})
    files = _record(plan, tmp_path)
    assert len(files) == 8 and len(list(tmp_path.glob("p-TP-*-EXTEND.trace.json.gz"))) == 8
    p = analyze(files)
    assert p.speculative and p.steps == 6 and len(p.ranks) == 8
    assert p.allreduce_count == 122  # 61 layers x 2
    assert p.allreduce_backend == "nccl"
    assert p.allreduce_us == pytest.approx(24_908, rel=0.01)
    assert p.step_us == pytest.approx(plan.verify_ms(1) * 1000, rel=1e-6)
    assert 0.78 < p.allreduce_share < 0.85
    # rank 0 arrives first and waits 20 us in each of the 122 all-reduces; the transfer is the last rank's
    assert p.skew_us == pytest.approx(122 * 20.0, rel=1e-6)
    assert max(r.allreduce_us for r in p.ranks) - min(r.allreduce_us for r in p.ranks) == pytest.approx(p.skew_us)
    # the drafter's all-reduces (3 forwards + an extend, 2 each) are in the cycle, not the verify pass
    assert p.ranks[-1].cycle_allreduce_count == pytest.approx(122 + 4 * 2)
    assert p.projected_speedup(0.5) > 1.4


def test_the_trace_names_the_backend_that_ran(tmp_path):
    """The 8 NVLink GPUs of the H100 box: FlashInfer's fused all-reduce (on by default for its DeepSeek-style
    model on SM90), SGLang's custom all-reduce with the fusion off, NCCL with both off, PCIe IPC one-shot."""
    off = {"tp-size": 8, "enforce-disable-flashinfer-allreduce-fusion": True}
    cases = [({"tp-size": 8}, {}, "flashinfer_ar_fusion"), (off, {}, "custom_ar"),
             ({**off, "disable-custom-all-reduce": True}, {}, "nccl"),
             ({**off, "disable-custom-all-reduce": True}, {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "1"}, "pcie_ipc")]
    for i, (flags, env, family) in enumerate(cases):
        plan = simulate_launch(H100_BOX, flags, env)
        assert plan.ok, plan.failure
        p = analyze(_record(plan, tmp_path / str(i)))
        assert p.allreduce_backend == family, (flags, env)


def test_profile_verdicts():
    plan = simulate_launch(SEED_BOX, SEED_TP8, {})
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = analyze(_record(plan, Path(d)))
    ok = profile_verdict(p, tp=8)
    assert ok.outcome == "pass" and "122 all-reduce(s) per decode step" in ok.message and "backend nccl" in ok.message
    assert profile_verdict(p, tp=8, backend="nccl", variant="custom-ar-off").outcome == "pass"
    fb = profile_verdict(p, tp=8, backend="torch_symm_mem", variant="torch-symm-mem")
    assert (fb.outcome, fb.category) == ("fail", "fallback")
    assert "asks for torch_symm_mem, but its trace shows nccl" in fb.message
    assert profile_verdict(p, tp=8, backend="deepep", variant="deepep").outcome == "pass"  # not an all-reduce family
    tp1 = analyze([REAL / "baseline-TP-0-DECODE.trace.json.gz"])
    ne = profile_verdict(tp1, tp=1, backend="nccl", variant="custom-ar-off")
    assert (ne.outcome, ne.category) == ("inconclusive", "not-exercised")


# ----------------------------------------------------------------------------- /start_profile over sockets

def test_capture_from_the_simulated_server(tmp_path):
    with SimProcess.start(["--tp-size", "8", "--sim-speedup", "20"], log_path=tmp_path / "sim.log") as sim:
        sim.wait_ready()
        url = f"http://127.0.0.1:{sim.port}"
        cap = capture(url, tmp_path / "traces", GenRequest(input_ids=tuple(range(1, 65)), max_new_tokens=40),
                      profile_id="t", num_steps=8, tp=8)
        assert [f.name for f in cap.decode] == [f"t-TP-{r}-DECODE.trace.json.gz" for r in range(8)]
        assert len(cap.extend) == 8 and cap.request.success and cap.request.completion_tokens == 40
        p = analyze(cap.decode)
        assert p.steps == 8 and p.allreduce_count == 122
        # a second profile while none runs is fine; /stop_profile with none running is SGLang's error
        import requests

        r = requests.post(f"{url}/stop_profile", timeout=10)
        assert r.status_code == 500 and "Profiling is not in progress" in r.text
        r = requests.post(f"{url}/start_profile", json={"num_steps": 0}, timeout=10)
        assert r.status_code == 500 and "num_steps must be a positive integer" in r.text
        r = requests.post(f"{url}/start_profile", json={"output_dir": str(tmp_path / "m")}, timeout=10)
        assert r.status_code == 200
        r = requests.post(f"{url}/start_profile", json={}, timeout=10)
        assert r.status_code == 500 and "already in progress" in r.text
        assert requests.post(f"{url}/stop_profile", timeout=10).status_code == 200
    assert "Profiling starts" in (tmp_path / "sim.log").read_text()


def test_capture_says_when_no_trace_comes(tmp_path):
    with SimProcess.start(["--tp-size", "8", "--sim-speedup", "20"], log_path=tmp_path / "sim.log") as sim:
        sim.wait_ready()
        url = f"http://127.0.0.1:{sim.port}"
        # the request ends before the 30 decode steps the profile waits for: no DECODE file is ever written
        with pytest.raises(CaptureError, match=r"no complete trace after 2 s: missing t-TP-0-DECODE"):
            capture(url, tmp_path / "traces", GenRequest(input_ids=(1, 2, 3), max_new_tokens=5),
                    profile_id="t", num_steps=30, tp=8, timeout_s=2)
    with pytest.raises(CaptureError, match="start_profile failed"):
        capture(url, tmp_path / "t2", GenRequest(input_ids=(1,), max_new_tokens=5), profile_id="t", timeout_s=2)

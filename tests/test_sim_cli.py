"""``python -m perfgate.sim`` as a real subprocess: arguments, start-up, failures, signals."""

from __future__ import annotations

import http.client
import signal
import socket
import subprocess
import sys
import time

import pytest

from perfgate.serving.simprocess import H100_BOX, SEED_BOX, SimProcess

TP8 = ["--tp-size", "8"]


def run_to_exit(args, tmp_path, *, name="sim.log", timeout=30.0, **kw) -> tuple[int, str]:
    sim = SimProcess.start(args, log_path=tmp_path / name, **kw)
    try:
        rc = sim.wait_exit(timeout)
    finally:
        sim.close()
    return rc, sim.log()


def test_unknown_flag_is_an_argparse_error(tmp_path):
    rc, log = run_to_exit([*TP8, "--foo"], tmp_path)
    assert rc == 2
    assert log.startswith("usage: sglang serve ")
    assert log.rstrip().endswith("sglang serve: error: unrecognized arguments: --foo")


def test_missing_hardware_file_is_an_argparse_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "perfgate.sim", "--model-path", "m"], capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 2
    assert "sglang serve: error: the following arguments are required: --sim-hardware" in proc.stderr
    rc, log = run_to_exit(TP8, tmp_path, hardware=tmp_path / "nope.toml")
    assert rc == 2 and "sglang serve: error: argument --sim-hardware:" in log


def test_cuda_graph_max_bs_rejected_by_0_5_23(tmp_path):
    rc, log = run_to_exit([*TP8, "--cuda-graph-max-bs", "128"], tmp_path)
    assert rc == 2
    assert log.rstrip().endswith("sglang serve: error: ambiguous option: --cuda-graph-max-bs could match "
                                 "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill")


def test_cuda_graph_max_bs_accepted_by_0_5_17(tmp_path):
    with SimProcess.start([*TP8, "--cuda-graph-max-bs", "128", "--sim-stack", "sglang=0.5.17"],
                          log_path=tmp_path / "sim.log") as sim:
        sim.wait_ready()
        info = sim.get("/server_info")
        assert info["version"] == "0.5.17" and info["cuda_graph_max_bs_decode"] == 128
        assert "cuda_graph_max_bs" not in info
    assert ("'--cuda-graph-max-bs' is deprecated and will be removed in a future release. "
            "Use '--cuda-graph-max-bs-decode' instead.") in sim.log()


def test_start_up_log_health_and_ready_line(tmp_path):
    with SimProcess.start(TP8, log_path=tmp_path / "sim.log", startup_s=1.0) as sim:
        deadline = time.monotonic() + 10
        status = None
        while time.monotonic() < deadline:  # the port is bound early; 503 until ready
            try:
                status, _ = sim.request("GET", "/health_generate", timeout=2)
                break
            except OSError:
                time.sleep(0.02)
        assert status == 503
        sim.wait_ready()
        assert sim.request("GET", "/health")[0] == 200
    log = sim.log()
    first = log.splitlines()[0]
    assert "perfgate SIMULATED SGLang server" in first and str(SEED_BOX) in first
    order = ["Init torch distributed begin.", "Load weight begin. avail mem=", "Load weight end.",
             "KV Cache is allocated.", "Capture target decode CUDA graph begin.", "Capture target decode CUDA graph end.",
             "max_total_num_tokens=", "Uvicorn running on http://127.0.0.1:", "The server is fired up and ready to roll!",
             '"GET /health_generate HTTP/1.1" 503 Service Unavailable', '"GET /health_generate HTTP/1.1" 200 OK']
    positions = [log.find(s) for s in order]
    assert all(p >= 0 for p in positions), list(zip(order, positions))
    assert positions[:-2] == sorted(positions[:-2])
    assert ("CustomAllreduce is disabled because it's not supported on more than two PCIe-only GPUs. "
            "To silence this warning, specify disable_custom_all_reduce=True explicitly.") in log
    for line in log.splitlines()[1:]:
        if line and not line.startswith((" ", "usage")):
            assert line.startswith("[20") and line[20] == "]", line


def test_nccl_tree_dies_in_graph_capture(tmp_path):
    rc, log = run_to_exit(TP8, tmp_path, env={"NCCL_ALGO": "Tree"})
    assert rc == -9
    assert "Scheduler hit an exception: Traceback (most recent call last):" in log
    assert "Exception: Capture cuda graph failed: NCCL error" in log
    assert "Possible solutions:" in log
    assert log.rstrip().endswith("Received sigquit from a child process. It usually means the child failed.")
    assert "The server is fired up" not in log


def test_flashinfer_fusion_dies_on_sm120_and_runs_with_flashinfer_08(tmp_path):
    rc, log = run_to_exit([*TP8, "--flashinfer-allreduce-fusion-backend", "auto"], tmp_path)
    assert rc == -9
    assert "ValueError: FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs." in log
    with SimProcess.start([*TP8, "--flashinfer-allreduce-fusion-backend", "auto"], log_path=tmp_path / "b.log",
                          env={"PERFGATE_SIM_STACK": "flashinfer=0.8.0"}) as sim:
        sim.wait_ready()
        assert sim.get("/server_info")["perfgate_sim_stack"]["flashinfer"] == "0.8.0"
    assert "FlashInfer AllReduce Fusion enabled and workspace initialized: backend=trtllm" in sim.log()


def test_torch_symm_mem_falls_back_and_serves(tmp_path):
    with SimProcess.start([*TP8, "--enable-torch-symm-mem"], log_path=tmp_path / "sim.log") as sim:
        sim.wait_ready()
        status, out = sim.post("/generate", {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 3}})
        assert status == 200 and len(out["output_ids"]) == 3
    assert ("TorchSymmMemCommunicator: Device capability 12 not supported, communicator is not available."
            in sim.log())


def test_h100_box_runs_what_the_seed_box_cannot(tmp_path):
    rc, log = run_to_exit([*TP8, "--moe-a2a-backend", "deepep"], tmp_path, name="seed.log")
    assert rc == -9 and "AssertionError: DeepEP" in log
    with SimProcess.start([*TP8, "--moe-a2a-backend", "deepep"], log_path=tmp_path / "h100.log", hardware=H100_BOX,
                          env={"NCCL_ALGO": "Tree"}) as sim:
        sim.wait_ready()
        info = sim.get("/server_info")
        assert info["ep_size"] == 8 and info["perfgate_sim_gpu"]["sm"] == "9.0"
    assert "DeepEP MoE is enabled. The expert parallel size is adjusted from 1 to the tensor parallel size [8]." \
        in sim.log()
    assert "disabled because it's not supported" not in sim.log()


def test_validation_error_exits_1_with_a_traceback(tmp_path):
    rc, log = run_to_exit([*TP8, "--speculative-algorithm", "MEDUSA"], tmp_path)
    assert rc == 1
    assert "Traceback (most recent call last):" in log
    assert log.rstrip().endswith("ValueError: Unknown speculative algorithm name: MEDUSA")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_exits_promptly(tmp_path, sig):
    with SimProcess.start(TP8, log_path=tmp_path / "sim.log") as sim:
        sim.wait_ready()
        conn = sim.connection(timeout=10)  # a stream in flight must not hold the exit back
        conn.request("POST", "/generate", body=b'{"input_ids": [1], "sampling_params": {"max_new_tokens": 5000},'
                                                b' "stream": true}')
        resp = conn.getresponse()
        resp.read1(100)
        sim.proc.send_signal(sig)
        rc = sim.wait_exit(30)  # the stream's 5000 tokens would take the simulated box about a minute
        try:
            rest = resp.read()
        except http.client.IncompleteRead as e:  # the chunked stream cut off with the server
            rest = e.partial
        conn.close()
    assert rc == -sig
    assert rest.count(b"data:") < 4000  # exited with the stream unfinished: it did not wait for it
    assert f"{signal.Signals(sig).name} received." in sim.log()


def test_port_in_use_exits_1(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        rc, log = run_to_exit(TP8, tmp_path, port=port)
    assert rc == 1
    assert "OSError: [Errno 98] Address already in use" in log


@pytest.mark.parametrize(("args", "env"), [
    pytest.param([*TP8], {"NCCL_ALGO": "Tree"}, id="nccl-tree"),
    pytest.param([*TP8, "--enable-flashinfer-allreduce-fusion"], {}, id="fusion-sm120"),
    pytest.param([*TP8, "--moe-a2a-backend", "deepep"], {}, id="deepep-pcie"),
    pytest.param([*TP8, "--moe-a2a-backend", "deepep", "--sim-stack", "deep_ep=none"], {}, id="deepep-missing"),
    pytest.param([*TP8, "--moe-a2a-backend", "flashinfer"], {}, id="flashinfer-a2a"),
    pytest.param([*TP8, "--mem-fraction-static", "0.97"], {}, id="mem-fraction-0.97"),
    pytest.param([*TP8], {"NCCL_PROTO": "LL128"}, id="nccl-proto-ll128"),
    pytest.param(["--tp-size", "16"], {}, id="tp16"),
    pytest.param([*TP8, "--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "2"], {}, id="spec-topk-only"),
    pytest.param([*TP8, "--cuda-graph-max-bs", "16"], {}, id="removed-flag"),
])
def test_logs_classify_as_the_plan_says(tmp_path, args, env):
    """perfgate.classify reads the simulated log as the category simulate_launch predicts."""
    from perfgate.classify import classify
    from perfgate.sim.behavior import simulate_launch
    from perfgate.sim.hardware import parse_stack_overrides

    flags: dict[str, object] = {}
    stack: dict[str, str] = {}
    it = iter(args)
    for tok in it:
        if tok == "--sim-stack":
            stack = parse_stack_overrides(next(it))
        else:
            flags[tok] = True if tok == "--enable-flashinfer-allreduce-fusion" else next(it)
    plan = simulate_launch(SEED_BOX, flags, env, stack_overrides=stack)
    assert plan.failure is not None
    rc, log = run_to_exit(args, tmp_path, env=env)
    assert rc == plan.failure.exit_code
    assert classify(rc, log).category == plan.failure.category, log[-2000:]


def test_help_says_it_is_perfgate_s_simulator_while_errors_read_as_sglang_s():
    proc = subprocess.run([sys.executable, "-m", "perfgate.sim", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout.startswith("python -m perfgate.sim: perfgate's simulated SGLang server")
    assert "usage: python -m perfgate.sim" in proc.stdout and "usage: sglang serve" not in proc.stdout

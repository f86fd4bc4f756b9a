"""Injected faults (``--sim-fault`` / ``PERFGATE_SIM_FAULT``) behave as perfgate's reliability tests need."""

from __future__ import annotations

import http.client
import json
import time

import pytest

from perfgate.serving.simprocess import SimProcess
from perfgate.sim.engine_loop import expected_output

VOCAB = 163840
TP8 = ["--tp-size", "8"]
EAGLE = [*TP8, "--speculative-algorithm", "EAGLE3", "--sim-speedup", "5"]


def fault(name: str, after: int | None = None) -> list[str]:
    return ["--sim-fault", name] + (["--sim-fault-after", str(after)] if after is not None else [])


def open_stream(sim: SimProcess, max_new: int = 50, timeout: float = 2.0):
    conn = sim.connection(timeout=timeout)
    conn.request("POST", "/generate", body=json.dumps(
        {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": max_new}, "stream": True}).encode())
    return conn, conn.getresponse()


def read_events(resp, until: float) -> tuple[list[str], bool]:
    """SSE payloads read before the deadline, and whether the stream ended (EOF)."""
    buf, out = b"", []
    while time.monotonic() < until:
        try:
            piece = resp.read1(65536)
        except TimeoutError:
            return out, False
        except (http.client.HTTPException, ConnectionError):  # the server died mid-chunk
            return out, True
        if not piece:
            return out, True
        buf += piece
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            out.append(ev.decode()[6:])
    return out, False


def test_crash_at_start_exits_1_with_a_traceback(tmp_path):
    with SimProcess.start([*TP8, *fault("crash-at-start")], log_path=tmp_path / "sim.log") as sim:
        assert sim.wait_exit(30) == 1
    log = sim.log()
    assert "Load weight begin." in log and "Traceback (most recent call last):" in log
    assert "Load weight end." not in log


def test_crash_mid_stream_kills_the_process(tmp_path):
    with SimProcess.start([*TP8, *fault("crash-mid-stream", 4)], log_path=tmp_path / "sim.log") as sim:
        sim.wait_ready()
        conn, resp = open_stream(sim, timeout=10)
        try:
            events, ended = read_events(resp, time.monotonic() + 10)
        finally:
            conn.close()
        assert ended and "[DONE]" not in events
        assert sim.wait_exit(10) == -9
    assert "It usually means one child failed." in sim.log()


def test_hang_before_ready(tmp_path):
    with SimProcess.start([*TP8, *fault("hang-before-ready")], log_path=tmp_path / "sim.log") as sim:
        with pytest.raises(TimeoutError):
            sim.wait_ready(timeout=1.5)
        assert sim.proc.poll() is None
        assert sim.request("GET", "/health")[0] == 503
    log = sim.log()
    assert "Uvicorn running on" in log and "The server is fired up" not in log


def test_hang_mid_stream_keeps_the_connection_open(tmp_path):
    with SimProcess.start([*TP8, *fault("hang-mid-stream", 3)], log_path=tmp_path / "sim.log") as sim:
        sim.wait_ready()
        conn, resp = open_stream(sim, timeout=0.5)
        try:
            events, ended = read_events(resp, time.monotonic() + 1.5)
        finally:
            conn.close()
        assert not ended
        assert [len(json.loads(e)["output_ids"]) for e in events] == [1, 2, 3]
        assert sim.request("GET", "/health_generate")[0] == 200  # the server itself is alive


def test_slow_start_takes_a_hundred_times_longer(tmp_path):
    with SimProcess.start([*TP8, *fault("slow-start")], log_path=tmp_path / "sim.log", startup_s=0.2) as sim:
        with pytest.raises(TimeoutError):
            sim.wait_ready(timeout=1.5)
        assert sim.proc.poll() is None


def test_http_500_and_env_selection(tmp_path):
    with SimProcess.start(TP8, log_path=tmp_path / "sim.log", env={"PERFGATE_SIM_FAULT": "http-500"}) as sim:
        sim.wait_ready()  # health is fine
        status, out = sim.post("/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": 2}})
        assert status == 500
        assert out["error"]["code"] == 500 and out["error"]["type"] == "InternalServerError"
        assert sim.get("/server_info")["perfgate_sim_fault"] == "http-500"


def test_malformed_sse_line(tmp_path):
    with SimProcess.start([*TP8, *fault("malformed-sse", 2)], log_path=tmp_path / "sim.log") as sim:
        sim.wait_ready()
        events = list(sim.stream({"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 6}}))
    bad = []
    for e in events[:-1]:
        try:
            json.loads(e)
        except ValueError:
            bad.append(e)
    assert len(bad) == 1 and events[-1] == "[DONE]"


def test_health_ok_but_generate_never_produces(tmp_path):
    with SimProcess.start([*TP8, *fault("health-no-generate")], log_path=tmp_path / "sim.log") as sim:
        sim.wait_ready()
        assert sim.request("GET", "/health")[0] == 200
        conn, resp = open_stream(sim, timeout=0.5)
        try:
            assert resp.status == 200
            events, ended = read_events(resp, time.monotonic() + 1.0)
        finally:
            conn.close()
        assert events == [] and not ended


def test_wrong_output_only_for_speculative_configs(tmp_path):
    prompt = {"input_ids": [8, 6, 7], "sampling_params": {"max_new_tokens": 24}}
    truth = expected_output(prompt["input_ids"], 24, VOCAB)
    with SimProcess.start([*EAGLE, *fault("wrong-output")], log_path=tmp_path / "spec.log") as sim:
        sim.wait_ready()
        _, out = sim.post("/generate", prompt)
    assert out["output_ids"][:10] == truth[:10] and out["output_ids"][10:] != truth[10:]
    with SimProcess.start([*TP8, "--sim-speedup", "5", *fault("wrong-output")], log_path=tmp_path / "b.log") as sim:
        sim.wait_ready()
        _, out = sim.post("/generate", prompt)
    assert out["output_ids"] == truth


def test_unknown_fault_is_rejected(tmp_path):
    with SimProcess.start(TP8, log_path=tmp_path / "sim.log", env={"PERFGATE_SIM_FAULT": "meteor-strike"}) as sim:
        assert sim.wait_exit(30) == 2
    assert "sglang serve: error: PERFGATE_SIM_FAULT: invalid choice: 'meteor-strike'" in sim.log()

"""The simulated server's HTTP API over real sockets on 127.0.0.1 (SGLang 0.5.23 shapes)."""

from __future__ import annotations

import json
import statistics
import threading
import time
from typing import Any

import pytest

from perfgate.serving.simprocess import SEED_BOX, SimProcess
from perfgate.sim.behavior import simulate_launch
from perfgate.sim.engine_loop import expected_output

VOCAB = 163840
BASE_FLAGS = ["--tp-size", "8", "--cuda-graph-max-bs-decode", "128", "--random-seed", "7", "--enable-metrics"]
EAGLE_FLAGS = ["--tp-size", "8", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/d",
               "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
               "--random-seed", "11", "--skip-tokenizer-init", "--sim-speedup", "10"]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    sim = SimProcess.start(BASE_FLAGS, log_path=tmp_path_factory.mktemp("base") / "sim.log")
    try:
        sim.wait_ready()
        yield sim
    finally:
        sim.close()


@pytest.fixture(scope="module")
def eagle(tmp_path_factory):
    sim = SimProcess.start(EAGLE_FLAGS, log_path=tmp_path_factory.mktemp("eagle") / "sim.log",
                           env={"SGLANG_SIMULATE_ACC_LEN": "3.0"})
    try:
        sim.wait_ready()
        yield sim
    finally:
        sim.close()


def collect(sim, body, path="/generate"):
    return list(sim.stream(body, path))


def test_stream_is_chunked_sse_and_cumulative(base):
    conn = base.connection()
    try:
        conn.request("POST", "/generate", body=json.dumps(
            {"input_ids": [10, 11, 12, 13], "sampling_params": {"max_new_tokens": 12}, "stream": True}).encode())
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.getheader("Content-Type") == "text/event-stream"
        assert resp.getheader("Transfer-Encoding") == "chunked"
        raw = resp.read().decode()
    finally:
        conn.close()
    events = [e for e in raw.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert len(chunks) == 12  # one per decode step (+ the prefill token)
    ids = [c["output_ids"] for c in chunks]
    for prev, cur in zip(ids, ids[1:]):
        assert cur[: len(prev)] == prev and len(cur) == len(prev) + 1
    assert ids[-1] == expected_output([10, 11, 12, 13], 12, VOCAB)
    for c in chunks:
        m = c["meta_info"]
        assert m["completion_tokens"] == len(c["output_ids"])
        assert m["prompt_tokens"] == 4 and m["id"] == chunks[0]["meta_info"]["id"]
        assert {"weight_version", "num_retractions", "reasoning_tokens", "cached_tokens"} <= m.keys()
        assert c["text"] == " ".join(f"t{i}" for i in c["output_ids"])
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    final = chunks[-1]["meta_info"]
    assert final["finish_reason"] == {"type": "length", "length": 12}
    assert final["e2e_latency"] > 0 and "e2e_latency" not in chunks[0]["meta_info"]
    assert not any(k.startswith("spec_") for k in final)


def test_non_streaming_matches_streaming_and_accepts_text(base):
    status, out = base.post("/generate", {"input_ids": [10, 11, 12, 13], "sampling_params": {"max_new_tokens": 12}})
    assert status == 200
    assert out["output_ids"] == expected_output([10, 11, 12, 13], 12, VOCAB)
    assert out["meta_info"]["finish_reason"] == {"type": "length", "length": 12}
    assert out["text"].split() == [f"t{i}" for i in out["output_ids"]]
    status, out = base.post("/generate", {"text": "The capital of France is", "sampling_params": {}})
    assert status == 200 and len(out["output_ids"]) == 128  # SGLang's default max_new_tokens
    assert out["meta_info"]["prompt_tokens"] == 5


@pytest.mark.timing
def test_decode_timing_follows_the_cost_model(base):
    plan = simulate_launch(SEED_BOX, {"tp-size": 8, "cuda-graph-max-bs-decode": 128}, {})
    arrivals = []
    for _ in base.stream({"input_ids": [99, 98], "sampling_params": {"max_new_tokens": 40}}):
        arrivals.append(time.monotonic())
    gaps = [b - a for a, b in zip(arrivals[1:-1], arrivals[2:-1])]
    # lower bounds only (the engine sleeps to a deadline schedule, it is never early); chunks are
    # paced one decode step apart, not dumped at once
    assert statistics.median(gaps) >= 0.5 * plan.step_s(1)
    status, out = base.post("/generate", {"input_ids": [97, 96], "sampling_params": {"max_new_tokens": 40}})
    assert out["meta_info"]["e2e_latency"] >= 39 * plan.step_s(1) - 0.06


def test_speculative_stream_carries_several_tokens_per_chunk_and_spec_fields(eagle):
    chunks = [json.loads(d) for d in collect(eagle, {"input_ids": [3, 1, 4, 1, 5],
                                                     "sampling_params": {"max_new_tokens": 60}})[:-1]]
    sizes = [len(c["output_ids"]) for c in chunks]
    assert sizes == sorted(sizes) and sizes[-1] == 60
    assert max(b - a for a, b in zip(sizes, sizes[1:])) > 1
    assert all("text" not in c for c in chunks)  # --skip-tokenizer-init
    final = chunks[-1]["meta_info"]
    assert final["spec_verify_ct"] > 0
    assert final["spec_accept_length"] == pytest.approx(60 / final["spec_verify_ct"])
    assert final["spec_num_proposed_drafts"] == 3 * final["spec_verify_ct"]
    rate = final["spec_num_correct_drafts"] / final["spec_num_proposed_drafts"]
    assert final["spec_accept_rate"] == pytest.approx(rate)
    assert not any(k.startswith("spec_") for c in chunks[:-1] for k in c["meta_info"])


def test_outputs_identical_between_baseline_and_eagle3(base, eagle):
    prompt: dict[str, Any] = {"input_ids": [271, 828, 1828, 6], "sampling_params": {"max_new_tokens": 48}}
    _, a = base.post("/generate", prompt)
    _, b = eagle.post("/generate", prompt)
    assert a["output_ids"] == b["output_ids"] == expected_output(prompt["input_ids"], 48, VOCAB)


def test_acceptance_length_follows_simulate_acc_len(eagle):
    results: list[dict[str, Any]] = []

    def one(i: int) -> None:
        results.append(eagle.post("/generate", {"input_ids": [i, i, 2], "sampling_params": {"max_new_tokens": 300}})[1])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    tokens = sum(r["meta_info"]["completion_tokens"] for r in results)
    verify = sum(r["meta_info"]["spec_verify_ct"] for r in results)
    assert len(results) == 4
    assert 2.6 <= tokens / verify <= 3.4
    info = eagle.get("/server_info")
    assert info["speculative_algorithm"] == "EAGLE3" and info["max_running_requests"] == 48
    acc = info["internal_states"][0]["avg_spec_accept_length"]
    assert acc is None or 2.5 <= acc <= 3.5  # only committed every --decode-log-interval steps


def test_server_info_and_model_info(base):
    info = base.get("/server_info")
    for key, value in {"tp_size": 8, "cuda_graph_max_bs_decode": 128, "speculative_algorithm": None,
                       "disable_custom_all_reduce": False, "model_path": "/models/sim", "random_seed": 7,
                       "version": "0.5.23", "perfgate_simulated": True, "perfgate_sim_hardware": str(SEED_BOX)}.items():
        assert info[key] == value, key
    assert 0 < info["mem_fraction_static"] < 1
    assert "--cuda-graph-max-bs-decode 128" in info["launch_command"]
    assert info["startup_time"] > 0
    state = info["internal_states"][0]
    assert state["decode_cuda_graph_bs"][-1] == 128
    assert {"weight", "kvcache", "token_capacity", "graph"} <= state["memory_usage"].keys()
    assert "last_gen_throughput" in state and "avg_spec_accept_length" not in state
    model = base.get("/model_info")
    assert model["is_generation"] is True and model["model_path"] == "/models/sim"
    assert model["architectures"] == ["KimiK25ForConditionalGeneration"]
    assert base.get("/v1/models")["data"][0]["id"] == "/models/sim"
    status, metrics = base.request("GET", "/metrics")
    assert status == 200 and b"sglang:num_requests_total" in metrics


def test_flush_cache_only_when_idle(base):
    status, body = base.request("POST", "/flush_cache")
    assert status == 200 and body.startswith(b"Cache flushed")
    conn = base.connection()
    try:
        conn.request("POST", "/generate", body=json.dumps(
            {"input_ids": [1], "sampling_params": {"max_new_tokens": 200}, "stream": True}).encode())
        resp = conn.getresponse()
        resp.read1(10)
        status, body = base.request("GET", "/flush_cache")
        assert status == 400 and body.startswith(b"Cache not flushed")
    finally:
        conn.close()


def test_openai_completions(base):
    status, out = base.post("/v1/completions", {"model": "x", "prompt": [5, 6, 7], "max_tokens": 5})
    assert status == 200
    assert out["object"] == "text_completion" and out["choices"][0]["finish_reason"] == "length"
    assert out["usage"] == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8,
                            "prompt_tokens_details": None, "reasoning_tokens": 0}
    events = collect(base, {"prompt": "hello world", "max_tokens": 4, "stream_options": {"include_usage": True}},
                     "/v1/completions")
    assert events[-1] == "[DONE]"
    parsed = [json.loads(e) for e in events[:-1]]
    assert parsed[-1]["usage"]["completion_tokens"] == 4 and parsed[-1]["choices"] == []
    text = "".join(p["choices"][0]["text"] for p in parsed[:-1])
    assert len(text.split()) == 4


def test_64_concurrent_streams(base):
    results: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            last = None
            for data in base.stream({"input_ids": [1000 + i, 7], "sampling_params": {"max_new_tokens": 16}}):
                if data != "[DONE]":
                    last = json.loads(data)
            assert last is not None
            results[i] = last["output_ids"]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert len(results) == 64
    for i, ids in results.items():
        assert ids == expected_output([1000 + i, 7], 16, VOCAB)


@pytest.mark.parametrize(("path", "body", "status", "needle"), [
    ("/generate", b"{not json", 400, "Invalid JSON"),
    ("/generate", {"sampling_params": {}}, 400, "Either text or input_ids"),
    ("/generate", {"input_ids": [[1], [2]]}, 400, "Batched requests"),
    ("/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": 10**9}}, 400, "maximum context length"),
    ("/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": -1}}, 400, "max_new_tokens"),
])
def test_errors_are_sglang_shaped(base, path, body, status, needle):
    got, out = base.post(path, body)
    assert got == status
    assert set(out["error"]) == {"message", "type", "code"} and out["error"]["code"] == status
    assert needle in out["error"]["message"]


def test_unknown_routes_and_text_without_tokenizer(base, eagle):
    status, body = base.request("GET", "/nope")
    assert status == 404 and json.loads(body) == {"detail": "Not Found"}
    assert base.request("GET", "/generate")[0] == 405
    status, out = eagle.post("/generate", {"text": "hi"})
    assert status == 400 and "skip_tokenizer_init=True" in out["error"]["message"]


@pytest.mark.parametrize("interval", [1, 4])
def test_incremental_streaming_and_stream_interval_as_sglang_does(tmp_path, interval):
    """--incremental-streaming-output: each chunk carries only its new ids (completion_tokens cumulative);
    --stream-interval k: a chunk when the output length is 1 mod k, and at the end (SGLang 0.5.17's streamer).
    perfgate's client reads both into the same tokens, ids and decode rate as the default stream."""
    from perfgate.client import GenRequest, run_batch

    flags = [*BASE_FLAGS, "--incremental-streaming-output", "--stream-interval", str(interval)]
    with SimProcess.start(flags, log_path=tmp_path / "sim.log") as sim:
        sim.wait_ready()
        chunks = [json.loads(d) for d in sim.stream({"input_ids": [99, 98], "sampling_params": {"max_new_tokens": 13}})
                  if d != "[DONE]"]
        counts = [c["meta_info"]["completion_tokens"] for c in chunks]
        assert counts == ([1, 5, 9, 13] if interval == 4 else list(range(1, 14)))
        assert sum(len(c["output_ids"]) for c in chunks) == 13  # deltas, not cumulative lists
        req = GenRequest(input_ids=(99, 98), max_new_tokens=13)
        (out,), _ = run_batch(f"http://127.0.0.1:{sim.port}", [req])
        assert out.success, out.error
        assert out.completion_tokens == 13
        assert out.output_ids == tuple(expected_output([99, 98], 13, VOCAB))

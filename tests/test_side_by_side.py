"""Co-resident arms, the procedure (perfgate.procedure.run_side_by_side): two servers' trials interleaved, checked on
a stand-in client that records what each server was sent and when (no server, no socket: unit tier)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from perfgate.client.stream import RequestOutput
from perfgate.procedure import Arm, run_side_by_side, run_trials
from perfgate.profiles import Workload
from tests.simproject import PROMPTS

W = Workload(prompts=PROMPTS, max_new_tokens=8, concurrency=1, requests_per_trial=2, warmup=1, trials=3, ttft_probes=8)


class FakeClient:
    """What each URL was sent, in order: ("flush", url) or (url, kind, n); a URL in ``fail_on`` fails its trials
    (not its warm-up) from trial ``fail_from`` on."""

    def __init__(self, fail_on: str = "", fail_from: int = 0) -> None:
        self.log: list[tuple[object, ...]] = []
        self.fail_on, self.fail_from = fail_on, fail_from
        self.trials: dict[str, int] = {}

    def flush(self, url: str) -> None:
        self.log.append(("flush", url))

    def run_batch(self, url, reqs, *, concurrency, timeout_s):  # noqa: ANN001, ANN201
        probe = all(r.max_new_tokens == 1 for r in reqs)
        warm = not probe and not any(e[0] == url and e[1] == "warmup" for e in self.log)
        kind = "probe" if probe else "warmup" if warm else "trial"
        self.log.append((url, kind, len(reqs)))
        ok = True
        if kind == "trial":
            n = self.trials[url] = self.trials.get(url, -1) + 1
            ok = not (url == self.fail_on and n >= self.fail_from)
        outs = [RequestOutput(success=ok, error="" if ok else "boom", ttft_s=0.03, latency_s=0.1, last_token_s=0.1,
                              itl_s=(0.01,) * 7, completion_tokens=r.max_new_tokens, first_chunk_tokens=1,
                              prompt_tokens=len(r.input_ids), output_ids=(1,) * r.max_new_tokens) for r in reqs]
        return outs, 0.1


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    import perfgate.client

    c = FakeClient()
    monkeypatch.setattr(perfgate.client, "flush_cache", c.flush)
    monkeypatch.setattr(perfgate.client, "run_batch", c.run_batch)
    return c


A, B = Arm(url="http://a", config_key="ka", config_name="a"), Arm(url="http://b", config_key="kb", config_name="b")


def test_the_arms_take_turns_probe_by_probe_and_trial_by_trial(client: FakeClient) -> None:
    ra, rb = run_side_by_side([A, B], W)
    steps = [e for e in client.log if e[0] != "flush"]
    assert steps[:2] == [("http://a", "warmup", 1), ("http://b", "warmup", 1)]
    probes = [e[0] for e in steps if e[1] == "probe"]
    # 8 probes an arm over 4 blocks (2 a block): in each block a, b then b, a
    assert probes == ["http://a", "http://b", "http://b", "http://a"] * 4
    assert all(e[2] == 1 for e in steps if e[1] == "probe")  # one request at a time
    assert [e[0] for e in steps if e[1] == "trial"] == ["http://a", "http://b", "http://b", "http://a",
                                                         "http://a", "http://b"]
    # a trial's flush comes right before it, on its own server
    for i, e in enumerate(client.log):
        if e[1:2] == ("trial",):
            assert client.log[i - 1] == ("flush", e[0])
    for r, key in ((ra, "ka"), (rb, "kb")):
        m = r.measurement
        assert m.config_key == key and len(m.trials) == 3 and not r.warmup_failed
        assert m.probes is not None and m.probes.n == 8 and m.probes.blocks == 4 and m.probes.failures == 0


def test_each_arm_measures_what_it_would_alone(client: FakeClient) -> None:
    """Side by side, an arm gets the trials, prompts and probes run_trials gives it alone."""
    ra, _ = run_side_by_side([A, B], W)
    together = [e for e in client.log if e[0] == "http://a"]
    client.log.clear()
    alone = run_trials(A.url, W, config_key="ka", config_name="a")
    mine = [e for e in client.log if e[0] == "http://a"]
    assert [e for e in mine if e[1] != "probe"] == [e for e in together if e[1] != "probe"]
    assert sum(int(str(e[2])) for e in mine if e[1] == "probe") == 8
    assert sum(int(str(e[2])) for e in together if e[1] == "probe") == 8
    assert alone.measurement.probes == ra.measurement.probes
    assert alone.measurement.trials == ra.measurement.trials


def test_an_arm_that_fails_stops_and_the_other_goes_on(client: FakeClient) -> None:
    client.fail_on, client.fail_from = "http://b", 1
    ra, rb = run_side_by_side([A, B], replace(W, trials=4))
    assert len(ra.measurement.trials) == 4 and ra.measurement.failures == 0
    assert len(rb.measurement.trials) == 2 and rb.measurement.failures == 2  # its second trial failed: the last
    b_after = [e for e in client.log if e[0] == "http://b"]
    assert b_after[-1] == ("http://b", "trial", 2)  # nothing sent to b after its failed trial
    assert ra.measurement.probes is not None and ra.measurement.probes.n == 8


def test_side_by_side_pairs_are_judged_at_their_own_level(client: FakeClient) -> None:
    """Pairs whose every start ran beside the other arm's are judged at the side-by-side level, with its prior (the
    starts level's where none was measured apart: every class but first-token; on an H200 the side-by-side TTFT
    moved more than the starts', so its real prior is wider)."""
    from perfgate.measuring.judge import Level, paired
    from perfgate.measuring.starts import combine, pairs_level
    from perfgate.profiles.noise import PRIORS, prior_cv

    ra, rb = (r.measurement for r in run_side_by_side([A, B], W))
    a1, b1 = replace(ra, beside="kb"), replace(rb, beside="ka")
    assert pairs_level(a1, b1) is Level.SIDE_BY_SIDE
    assert pairs_level(combine([a1, a1]), combine([b1, b1])) is Level.SIDE_BY_SIDE
    assert pairs_level(combine([a1, ra]), combine([b1, rb])) is Level.STARTS  # one pair measured apart
    assert pairs_level(ra, rb) is Level.STARTS
    # the simulator's: side by side 0.03-0.1 % measured, apart 0.1 % quiet and 0.8 % loaded (2026-12-07): 1 % both
    assert prior_cv("ttft_ms", "side-by-side", simulated=True) == 0.01 == prior_cv("ttft_ms", "starts", simulated=True)
    assert prior_cv("ttft_ms", "side-by-side") == 0.20 > prior_cv("ttft_ms", "starts")
    for cls, table in PRIORS.items():
        for engine in ("real", "sim"):
            if ("side-by-side", engine) not in table:
                metric = {"throughput": "tok_s", "output": "output_tok_s", "step": "itl_ms", "first-token": "ttft_ms",
                          "tail": "itl_ms_p99", "goodput": "goodput_rps", "acceptance": "accept_len",
                          "ttft-leg": "ttft_part.to_forward_ms", "prefill-gpu": "ttft_part.prefill_gpu_ms"}[cls.value]
                gpu = "NVIDIA H200"  # the kind the real column was measured on (an H100 takes its own starts)
                assert prior_cv(metric, "side-by-side", simulated=engine == "sim", gpu=gpu) == table[("starts", engine)]
    j = paired([1.10, 1.101, 1.099], higher_is_better=False, min_effect=0.05, prior_cv=0.01, level=Level.SIDE_BY_SIDE,
               metric="ttft_ms")
    assert j.level is Level.SIDE_BY_SIDE and "between side-by-side start pairs on one machine" in j.detail

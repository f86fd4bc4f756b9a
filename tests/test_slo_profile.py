"""``[slo]`` in a profile: bounds, settings, per-mode overrides; bad input names the file, the key and the fix."""

from __future__ import annotations

import pytest

from perfgate.errors import ProfileSchemaError
from perfgate.profiles.load import load_profile
from tests.test_profiles import GOOD, write


@pytest.fixture
def project(tmp_path):
    (tmp_path / "baselines" / "hw").mkdir(parents=True)
    (tmp_path / "fixtures" / "prompts").mkdir(parents=True)
    (tmp_path / "fixtures" / "prompts" / "p.jsonl").write_text('{"input_ids": [1, 2, 3]}\n')
    return tmp_path


SLO = """
[slo]
ttft_ms_p99 = 500
itl_ms_p99 = 50
attainment = 0.95
rate_start = 2
max_new_tokens = 32
trials = 3
warmup_requests = 8
confidence = 0.9
max_requests = 600
[slo.eagle3]
itl_ms_p99 = 80
e2e_ms_p99_9 = 9000
max_requests = 3000
"""


def test_slo_per_mode_with_overrides(project):
    p = load_profile(write(project, GOOD + SLO))
    base, spec = p.slo["baseline"], p.slo["eagle3"]
    assert {b.key: b.limit_ms for b in base.bounds} == {"ttft_ms_p99": 500, "itl_ms_p99": 50}
    assert {b.key: b.limit_ms for b in spec.bounds} == {"ttft_ms_p99": 500, "itl_ms_p99": 80, "e2e_ms_p99_9": 9000}
    assert [b.percentile for b in spec.bounds if b.metric == "e2e_ms"] == [99.9]
    assert base.attainment == spec.attainment == 0.95 and base.rate_start == 2.0 and base.arrival == "poisson"
    assert base.crossover_levels == (1, 2, 4, 8, 16, 32, 64) and base.max_new_tokens == 32 and base.trials == 3
    assert base.warmup_requests == 8 and base.confidence == 0.9 and base.max_requests == base.budget == 600
    # the sizing rule: a p99 at 90 % one-sided needs 230 requests (1 - 0.99^230 >= 0.9); eagle3's p99.9, 2302
    assert base.min_requests == 230 and spec.min_requests == 2302 and spec.budget == 3000


def test_the_defaults_of_a_level(project):
    p = load_profile(write(project, GOOD + "[slo]\nttft_ms_p99 = 500\n"))
    slo = p.slo["baseline"]
    assert (slo.warmup_requests, slo.confidence, slo.max_requests) == (32, 0.95, None)
    assert slo.min_requests == 299 and slo.budget == 897  # three times the level minimum


def test_no_slo_table_means_no_slos(project):
    assert load_profile(write(project, GOOD)).slo == {}


def test_a_floor_on_goodput_and_crossover_is_read(project):
    p = load_profile(write(project, GOOD + SLO + "[floors.eagle3]\ngoodput_rps = 3.5\ncrossover = 16\n"))
    assert p.floors["eagle3"].limit("goodput_rps") == 3.5 and p.floors["eagle3"].limit("crossover") == 16


@pytest.mark.parametrize("text, key, match", [
    ("[slo]\nttft_ms_p99 = -1\n", "slo.ttft_ms_p99", "a limit in ms > 0"),
    ("[slo]\nttfb_ms_p99 = 5\n", "slo.ttfb_ms_p99", "did you mean 'ttft_ms_p99'"),
    ("[slo]\nttft_ms_p0 = 5\n", "slo.ttft_ms_p0", "percentile in"),
    ("[slo]\nattainment = 0.99\n", "slo.(table)", "add `ttft_ms_p99"),
    ("[slo]\nttft_ms_p99 = 5\nattainment = 1.5\n", "slo.attainment", "a fraction"),
    ("[slo]\nttft_ms_p99 = 5\narrival = \"bursty\"\n", "slo.arrival", "constant, poisson"),
    ("[slo]\nttft_ms_p99 = 5\nrequests = 2.0\n", "slo.requests", "write requests = 2"),
    ("[slo]\nttft_ms_p99 = 5\ntrials = 0\n", "slo.trials", "an integer >= 1"),
    ("[slo]\nttft_ms_p99 = 5\ncrossover_levels = [4, 2]\n", "slo.crossover_levels", "increasing"),
    ("[slo]\nttft_ms_p99 = 5\nrate_start = 8\nrate_max = 4\n", "slo.rate_max", "rate_start"),
    ("[slo]\nttft_ms_p99 = 5\n[slo.eagle]\nitl_ms_p99 = 5\n", "slo.eagle", "did you mean 'eagle3'"),
    ("[slo]\nttft_ms_p99 = 5\nmax_requests = 200\n", "slo.max_requests", "write max_requests = 299 or more"),
    ("[slo]\nttft_ms_p99 = 5\nconfidence = 1.0\n", "slo.confidence", "a fraction in"),
    ("[slo]\nttft_ms_p99 = 5\nwarmup_requests = -1\n", "slo.warmup_requests", "an integer >= 0"),
    ("[slo]\nttft_ms_p99 = 5\n[slo.eagle3]\nitl_ms_p99 = \"fast\"\n", "slo.eagle3.itl_ms_p99", "a limit in ms"),
])
def test_bad_slo_tables_name_file_key_and_fix(project, text, key, match):
    path = write(project, GOOD + text)
    with pytest.raises(ProfileSchemaError, match=match) as e:
        load_profile(path)
    assert str(path) in str(e.value) and f"'{key}'" in str(e.value)

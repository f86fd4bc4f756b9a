"""TTFT probes in a session (process tier: pytester runs of the suite against the simulated server): a start whose
host flips between two prefill levels (PERFGATE_SIM_TTFT_MODES, seeded) carries its probes, the two modes and the
lower mode's TTFT in its record, and says so on its terminal line. Structure, not time: the levels' factor is 2.5,
so no runner's load merges them, and the seed fixes which prefill steps are at which level. With
``--enable-metrics`` the server stamps its responses and the record says in which leg the spread lives (the
simulator's levels are its prefill steps')."""

from __future__ import annotations

from tests.test_measurement import make_project, records, run


def test_a_start_on_a_host_that_flips_names_its_two_ttft_modes(pytester, monkeypatch):
    monkeypatch.setenv("PERFGATE_SIM_TTFT_MODES", "1.0,2.5/6")
    monkeypatch.setenv("PERFGATE_SIM_START_SEED", "3")
    prof = make_project(pytester, workload="ttft_probes = 30")
    prof.write_text(prof.read_text().replace("random-seed = 1\n", "random-seed = 1\nenable-metrics = true\n", 1))
    r = run(pytester, prof, "-m", "baseline", "-k", "decode_floor")
    rec = records(pytester)["test_decode_floor[m:baseline]"]
    assert rec["ttft_probes"] == "30" and "ttft_probe_failures" not in rec
    assert rec["ttft_multimodal"] == "true" and rec["ttft_modes"].count(" | ") == 1, rec.get("ttft_modes")
    low, high = (float(part.split(" ms ")[0]) for part in rec["ttft_modes"].split(" | "))
    assert high / low > 1.8  # the levels' 2.5, less the client's fixed part
    assert abs(float(rec["ttft_probe_ms"]) / low - 1) < 0.001  # the start's TTFT: the lower mode (4 digits shown)
    # (ITL's modes are not asserted here: a simulated decode step of 5.6 ms read 11.2 ms in 87 % of a start's steps on
    # the 2-core runner under the full suite, 2026-12-05; the levels are the prefill's, and the runner's are time)
    assert rec["itl_multimodal"] in ("true", "false")
    assert rec["ttft_spread_in"] == "prefill", rec  # the levels are the simulator's prefill steps
    legs = {k: float(rec[f"ttft_part.{k}_ms"]) for k in ("dispatch", "to_forward", "prefill", "rest")}
    assert legs["prefill"] > 0 and min(legs.values()) >= 0, legs
    assert float(rec["ttft_part.prefill_spread_ms"]) > 0.8 * (high - low), rec  # the gap between the levels
    r.stdout.fnmatch_lines(["*baseline floor*TTFT multi-modal over 30 probes: * ms *% | * ms *%; spread in prefill*"])


def test_probes_off_leave_the_record_as_before(pytester):
    prof = make_project(pytester, workload="ttft_probes = 0")
    run(pytester, prof, "-m", "baseline", "-k", "decode_floor")
    rec = records(pytester)["test_decode_floor[m:baseline]"]
    assert "ttft_probes" not in rec and "ttft_modes" not in rec and float(rec["ttft_ms"]) > 0


def test_each_start_carries_its_ttft_in_parts(pytester, monkeypatch):
    """With two starts and a stamping server, the record has each start's median of each part (which leg moves
    between starts); the parts of a start add up to about its probes' TTFT."""
    monkeypatch.setenv("PERFGATE_SIM_START_SEED", "3")
    prof = make_project(pytester, workload="ttft_probes = 20")
    prof.write_text(prof.read_text().replace("random-seed = 1\n", "random-seed = 1\nenable-metrics = true\n", 1))
    run(pytester, prof, "-m", "baseline", "-k", "decode_floor", "--perfgate-starts", "2")
    rec = records(pytester)["test_decode_floor[m:baseline]"]
    per = {k: [float(x) for x in rec[f"start_values.ttft_part.{k}_ms"].split(",")]
           for k in ("dispatch", "to_forward", "prefill", "rest")}
    assert all(len(v) == 2 for v in per.values()), per
    probe = [float(x) for x in rec["start_values.ttft_probe_ms"].split(",")]
    for i in range(2):  # medians of parts need not add up exactly to the median TTFT: within 5 %
        assert abs(sum(v[i] for v in per.values()) / probe[i] - 1) < 0.05, (per, probe)
        assert per["prefill"][i] > per["rest"][i]  # the simulator's prefill is most of its TTFT

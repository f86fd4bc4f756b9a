"""All-reduce floors: the [micro.floors] schema, the generator script, the shipped H200 x2 record, and
perftests/test_allreduce.py checking a record against its floor (pytester, real gloo ranks)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from junitparser.xunit2 import JUnitXml

from perfgate.errors import ProfileSchemaError, ReportError
from perfgate.measuring import costmodel
from perfgate.profiles import MicroFloor
from perfgate.profiles.load import load_profile
from tests import simproject

ROOT = Path(__file__).resolve().parent.parent
JUNIT = ROOT / "evidence" / "h200-x2" / "allreduce-junit-2026-11-29.xml"
SHIPPED = ROOT / "baselines" / "h200-x2" / "allreduce.toml"
PROMPTS = ROOT / "fixtures" / "prompts" / "random-ids-128.jsonl"


def _script():
    spec = importlib.util.spec_from_file_location("micro_floors", ROOT / "scripts" / "micro_floors.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("micro_floors", mod)
    spec.loader.exec_module(mod)
    return mod


mf = _script()

BASE = f"""
schema_version = 1
[hardware]
gpu = "H200"
count = 2
sm = "9.0"
interconnect = "nvlink"
[engine]
name = "sglang"
[model]
path = "moonshotai/Kimi-K2.5"
hidden = 7168
[modes.baseline]
[workload]
prompts = "{PROMPTS}"
max_new_tokens = 16
"""


def write(tmp_path: Path, micro: str) -> Path:
    d = tmp_path / "baselines" / "hw"
    d.mkdir(parents=True, exist_ok=True)
    p = d / "m.toml"
    p.write_text(BASE + micro)
    return p


# ----------------------------------------------------------------------------- the schema


def test_floors_load_with_the_world_size_of_the_profile(tmp_path):
    p = write(tmp_path, """
[micro]
world_sizes = [2]
[micro.floors]
"nccl.graph.14336" = { latency_us = 11.07, tolerance = 0.25 }
"gloo.eager.4096" = { latency_us = 170, tolerance = 0.5, world_size = 4 }
"torch-symm-mem.eager.0114688" = { latency_us = 42.6, tolerance = 0 }
""")
    m = load_profile(p).micro
    f = m.floors["nccl.graph.14336"]
    assert f == MicroFloor(backend="nccl", timing="graph", bytes=14336, world_size=2, latency_us=11.07, tolerance=0.25,
                           key='micro.floors."nccl.graph.14336"')
    assert f.ceiling_us == pytest.approx(13.8375)
    assert m.floor("nccl", "graph", 14336, 2) is f
    assert m.floor("nccl", "graph", 14336, 8) is None  # measured at 2 ranks: no floor at 8
    assert m.floor("nccl", "eager", 14336, 2) is None  # no floor for this timing: a measurement only
    assert m.floor("gloo", "eager", 4096, 4) is not None  # its own world size
    assert m.floors["torch-symm-mem.eager.114688"].bytes == 114688  # the key is canonical


def test_no_floors_is_the_default(tmp_path):
    assert load_profile(write(tmp_path, "[micro]\ntokens = [1]\n")).micro.floors == {}
    assert load_profile(write(tmp_path, "")).micro.floor("nccl", "graph", 14336, 2) is None


GOOD_ENTRY = '{ latency_us = 11.07, tolerance = 0.25 }'


@pytest.mark.parametrize(
    "micro, key, expected",
    [
        (f'world_sizes = [2]\n[micro.floors]\n"ncl.graph.14336" = {GOOD_ENTRY}', 'micro.floors."ncl.graph.14336"',
         r"expected an all-reduce backend \(nccl, .*found 'ncl'; fix: did you mean 'nccl'\?"),
        (f'world_sizes = [2]\n[micro.floors]\n"nccl.replay.14336" = {GOOD_ENTRY}', 'micro.floors."nccl.replay.14336"',
         r"expected \"eager\" or \"graph\" after the backend, found 'replay'"),
        (f'world_sizes = [2]\n[micro.floors]\n"gloo.graph.4096" = {GOOD_ENTRY}', 'micro.floors."gloo.graph.4096"',
         r"gloo runs on the CPU: it has no CUDA-graph timing.*fix: write \"gloo.eager.4096\""),
        (f'world_sizes = [2]\n[micro.floors]\n"nccl.graph.14k" = {GOOD_ENTRY}', 'micro.floors."nccl.graph.14k"',
         r"a message size in bytes .*found '14k'"),
        (f'world_sizes = [2]\n[micro.floors]\n"nccl14336" = {GOOD_ENTRY}', 'micro.floors."nccl14336"',
         r'a key "<backend>.<eager\|graph>.<bytes>", found \'nccl14336\'; fix: write "nccl.graph.14336"'),
        ('world_sizes = [2]\n[micro.floors]\n"nccl.graph.14336" = 11.07', 'micro.floors."nccl.graph.14336"',
         r"expected \{ latency_us = X, tolerance = T \}, found 11.07"),
        ('world_sizes = [2]\n[micro.floors]\n"nccl.graph.14336" = { latency_us = 11.07 }',
         'micro.floors."nccl.graph.14336".tolerance', r"expected a fraction >= 0.*fix: add `tolerance = \.\.\.`"),
        ('world_sizes = [2]\n[micro.floors]\n"nccl.graph.14336" = { latency_us = 0, tolerance = 0.25 }',
         'micro.floors."nccl.graph.14336".latency_us', r"median latency in µs \(> 0\), found 0"),
        ('world_sizes = [2]\n[micro.floors]\n"nccl.graph.14336" = { latency_us = "11", tolerance = 0.25 }',
         'micro.floors."nccl.graph.14336".latency_us', r"found '11'"),
        ('world_sizes = [2]\n[micro.floors]\n"nccl.graph.14336" = { latency_us = 11.0, tolerance = -0.1 }',
         'micro.floors."nccl.graph.14336".tolerance', r"found -0.1"),
        ('world_sizes = [2]\n[micro.floors]\n"nccl.graph.14336" = { latncy_us = 11.0, tolerance = 0.25 }',
         'micro.floors."nccl.graph.14336".latncy_us', r"did you mean 'latency_us'\?"),
        (f'world_sizes = [2, 4]\n[micro.floors]\n"nccl.graph.14336" = {GOOD_ENTRY}',
         'micro.floors."nccl.graph.14336".world_size', r"fix: add world_size = N .*\[2, 4\]"),
        ('[micro.floors]\n"nccl.graph.14336" = { latency_us = 11.0, tolerance = 0.25, world_size = 1 }',
         'micro.floors."nccl.graph.14336".world_size', r"an integer >= 2 \(at world size 1 there is no communication"),
        ('world_sizes = [2]\nfloors = 3', "micro.floors", r"expected a table, found 3"),
    ],
)
def test_a_bad_floors_table_is_rejected_with_file_key_and_fix(tmp_path, micro, key, expected):
    p = write(tmp_path, "[micro]\n" + micro + "\n")
    with pytest.raises(ProfileSchemaError, match=expected) as ei:
        load_profile(p)
    assert ei.value.key == key
    assert str(ei.value).startswith(f"{p}: key '{key}': expected ")


# ----------------------------------------------------------------------------- the shipped record


def test_the_shipped_profile_is_what_the_script_makes_of_the_report():
    points, facts = mf.read_points(JUNIT)
    assert len(points) == 88  # 104 records: 16 sglang-custom-ar xfails get no floor
    text = SHIPPED.read_text()
    assert mf.splice(text, mf.fragment(points, facts)) == text, \
        "baselines/h200-x2/allreduce.toml is stale: run scripts/micro_floors.py JUNIT --update PROFILE"
    prof = load_profile(SHIPPED)
    assert prof.hardware.interconnect == "nvlink" and prof.hardware.count == 2 and prof.micro.world_sizes == (2,)
    floors = prof.micro.floors
    assert len(floors) == 88 and not any(k.startswith("sglang-custom-ar.") for k in floors)
    assert {f.tolerance for f in floors.values() if f.timing == "graph"} == {0.25}
    assert {f.tolerance for f in floors.values() if f.timing == "eager"} == {0.5}
    assert {f.world_size for f in floors.values()} == {2}
    assert not any(f.backend == "gloo" and f.timing == "graph" for f in floors.values())
    assert floors["nccl.graph.14336"].latency_us == 11.07
    assert floors["torch-symm-mem.graph.14336"].latency_us == 9.26
    # the decode and verify sizes of Kimi-K2.5 and the sweep, for every backend that ran
    sizes = {t * 7168 * 2 for t in prof.micro.tokens} | set(prof.micro.sweep_bytes)
    assert {f.bytes for f in floors.values()} == sizes


def test_the_cost_model_reads_the_nccl_graph_medians():
    prof = load_profile(SHIPPED)
    pts = dict(prof.model.allreduce_latency_us)
    assert pts[14336] == 11.07 and pts[57344] == 10.53 and len(pts) == 8
    shape = costmodel.ModelShape.from_profile(prof)
    lat = costmodel.latency_interpolator(prof.model.allreduce_latency_us)
    # 122 all-reduces of a 4-token verify: ~1.3 ms on this box (the seed's PCIe box: ~25 ms)
    ms = shape.allreduces * lat(costmodel.allreduce_bytes(4, shape.hidden)) / 1000
    assert shape.allreduces == 122 and ms == pytest.approx(1.285, abs=0.001)
    # docs/allreduce.md's projection: the seed's 5 ms of verify compute + these all-reduces, accept 2.0
    verify = 30.0 - 25.0 + ms
    assert costmodel.projected_tok_s(2.0, verify) == pytest.approx(318.2, abs=0.1)
    draft = costmodel.cycle_ms_from_tok_s(54.1, 2.0) - 30.0
    assert costmodel.projected_tok_s(2.0, verify, draft) == pytest.approx(150.9, abs=0.1)
    per_ar = (costmodel.breakeven_verify_ms(89.5, 2.0, draft) - 5.0) / shape.allreduces * 1000
    assert per_ar == pytest.approx(85.1, abs=0.1)


# ----------------------------------------------------------------------------- the script


def test_update_replaces_only_the_marked_fragment_and_refuses_a_broken_result(tmp_path, capsys):
    prof = tmp_path / "baselines" / "hw" / "p.toml"
    prof.parent.mkdir(parents=True)
    head = BASE + "\n# my comment\n[micro]\nworld_sizes = [2]\n"
    prof.write_text(head)
    assert mf.main([str(JUNIT), "--update", str(prof)]) == 0
    first = prof.read_text()
    assert first.startswith(head) and first.count(mf.BEGIN) == 1 and first.rstrip().endswith(mf.END)
    assert len(load_profile(prof).micro.floors) == 88
    assert mf.main([str(JUNIT), "--update", str(prof), "--graph-tolerance", "0.3"]) == 0
    second = prof.read_text()
    assert second.startswith(head) and second.count(mf.BEGIN) == 1
    assert load_profile(prof).micro.floors["nccl.graph.14336"].tolerance == 0.3
    # a profile that already defines [micro.floors] by hand: the result would not load, nothing is written
    broken = head + '[micro.floors]\n"nccl.graph.4096" = { latency_us = 1.0, tolerance = 0.1 }\n'
    prof.write_text(broken)
    assert mf.main([str(JUNIT), "--update", str(prof)]) == 1
    assert prof.read_text() == broken
    # the refusal of perfgate's one profile writer (perfgate.profiles.writer.write_profile), as for the floors
    assert f"updating {prof} would break it" in capsys.readouterr().err
    assert not list(prof.parent.glob(".*tmp"))


def test_a_report_without_allreduce_records_or_with_two_world_sizes_is_refused(tmp_path, capsys):
    other = ROOT / "evidence" / "h200-x1" / "junit-2026-11-29.xml"
    assert mf.main([str(other)]) == 1
    assert "no passing all-reduce record" in capsys.readouterr().err
    # the same backend, timing and size once more, at world size 4 (a report of a run over two world sizes)
    text = JUNIT.read_text()
    start = text.index("<testcase ")
    case = text[start:text.index("</testcase>", start) + len("</testcase>")]
    assert "eager:nccl-ws2]" in case and '<property name="world_size" value="2" />' in case
    again = case.replace("-ws2]", "-ws4]").replace('name="world_size" value="2"', 'name="world_size" value="4"')
    two = tmp_path / "two.xml"
    two.write_text(text[:start] + again + text[start:])
    with pytest.raises(ReportError, match=r"nccl.eager.14336 was measured at world sizes 4 and 2; .*--world-size N"):
        mf.read_points(two)
    assert len(mf.read_points(two, world_size=2)[0]) == 88
    assert [p.key for p in mf.read_points(two, world_size=4)[0]] == ["nccl.eager.14336"]


POINT = st.builds(
    lambda b, t, n, lat, ws: mf.Point(backend=b, timing="eager" if b == "gloo" else t, bytes=n, world_size=ws,
                                      latency_us=lat, p99_us=None, busbw_gbps=None),
    st.sampled_from(["nccl", "nccl-tree", "gloo", "torch-symm-mem", "sglang-custom-ar"]),
    st.sampled_from(["eager", "graph"]),
    st.integers(1, 1 << 30),
    st.floats(0.005, 1e7, allow_nan=False),
    st.just(2),
)


@settings(max_examples=40)
@given(points=st.lists(POINT, min_size=1, max_size=12, unique_by=lambda p: p.key),
       gt=st.floats(0, 10), et=st.floats(0, 10))
def test_fragment_round_trips_through_the_loader(tmp_path_factory, points, gt, et):
    d = tmp_path_factory.mktemp("rt") / "baselines" / "hw"
    d.mkdir(parents=True)
    p = d / "m.toml"
    p.write_text(mf.splice(BASE + "[micro]\nworld_sizes = [2]\n", mf.fragment(points, {}, graph_tolerance=gt,
                                                                              eager_tolerance=et)))
    floors = load_profile(p).micro.floors
    assert set(floors) == {x.key for x in points}
    for x in points:
        f = floors[x.key]
        assert f.latency_us == round(x.latency_us, 2) and f.world_size == 2
        assert f.tolerance == (gt if x.timing == "graph" else et)


# ----------------------------------------------------------------------------- the perf test (pytester)

#: the simulated test profile (tests.simproject), its baseline mode alone (the micro tier reads only its [model] and
#: [micro]; no server starts), with a micro tier of three shapes and two floors
MICRO_PROFILE = simproject.sim_profile(eagle3=False) + """[micro]
tokens = [1, 2]
sweep_bytes = [4096]
world_sizes = [2]
iters = 5
warmup = 1
[micro.floors]
"gloo.eager.14336" = { latency_us = 1000000.0, tolerance = 0.5 }
"gloo.eager.28672" = { latency_us = 1.0, tolerance = 0.5 }
"""


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the gloo ranks need torch")
def test_a_record_is_checked_against_its_floor(pytester, monkeypatch):
    monkeypatch.delenv("PERFGATE_MICRO_WORLD_SIZES", raising=False)
    monkeypatch.delenv("PERFGATE_MICRO_ITERS", raising=False)
    prof = simproject.make_project(pytester.path, MICRO_PROFILE)
    r = pytester.runpytest_subprocess("perftests/test_allreduce.py", "-m", "micro", "-k", "gloo",
                                      f"--perfgate-profile={prof}", "--junitxml=r.xml", "-p", "no:cacheprovider")
    # 14336 B under its (generous) floor; 28672 B over its 1 µs floor; 4096 B has none: a measurement
    r.assert_outcomes(passed=2, failed=1)
    r.stdout.fnmatch_lines([  # "[[]" is a literal "[" to fnmatch
        # through the one judge of a limit (perfgate.measuring.verdict.judge_limit), as every record's
        "*all-reduce latency * µs (gloo, eager, 28672 B bfloat16, world size 2, p99 * µs) > ceiling 1 × (1 + 0.5) "
        f'= 1.5 µs [[]{prof}, micro.floors."gloo.eager.28672"[]]; if intended, run `pytest perftests/ -m micro *'
        f"scripts/micro_floors.py run.xml --update {prof}` (a new stack or box)*",
    ])
    assert "Traceback" not in r.stdout.str()
    cases = {c.name: {p.name: p.value for p in c.properties()} for s in JUnitXml.fromfile(str(pytester.path / "r.xml"))  # type: ignore[attr-defined]  # junitparser types xunit2 cases as its core TestCase
             for c in s}
    ok = cases["test_allreduce[decode-1x7168-eager:gloo-ws2]"]
    assert ok["outcome"] == "pass" and ok["floor_latency_us"] == "1e+06" and ok["tolerance"] == "0.5"
    bad = cases["test_allreduce[verify-2x7168-eager:gloo-ws2]"]
    assert bad["outcome"] == "fail" and bad["category"] == "slower-than-baseline"
    assert bad["floor_latency_us"] == "1" and bad["tolerance"] == "0.5" and float(bad["latency_us"]) > 1.5
    assert "> ceiling 1 × (1 + 0.5) = 1.5 µs" in bad["reason"]
    free = cases["test_allreduce[sweep-4096B-eager:gloo-ws2]"]
    assert free["outcome"] == "pass" and "floor_latency_us" not in free and float(free["latency_us"]) > 0


# ----------------------------------------------------------------------------- expectations on micro records

EXPECTING = MICRO_PROFILE + """
[expectations."allreduce:gloo"]
eager = { expect = "xfail", category = "slower-than-baseline", reason = "gloo is slow on this box" }
[expectations."allreduce:nccl"]
"*" = { expect = "xfail", category = "missing-dependency", reason = "no GPU on this box" }
[expectations."allreduce:torch-symm-mem"]
"*" = { expect = "xfail", category = "unsupported-arch", reason = "two-shot needs SM 9.0" }
"""


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the gloo ranks need torch")
def test_the_profiles_expectations_decide_micro_records(pytester, monkeypatch):
    """[expectations."allreduce:<backend>"] is strict: gloo expected slower than its floors is an xfail where it is
    (28672 B, over its 1 µs floor) and XPASS(strict) UNBLOCKED where it is not; nccl's expected missing-dependency
    is an xfail with the profile's reason; torch-symm-mem expected unsupported-arch but missing its GPU is a skip."""
    monkeypatch.delenv("PERFGATE_MICRO_WORLD_SIZES", raising=False)
    monkeypatch.delenv("PERFGATE_MICRO_ITERS", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the same outcomes on a GPU box
    prof = simproject.make_project(pytester.path, EXPECTING)
    r = pytester.runpytest_subprocess("perftests/test_allreduce.py", "-m", "micro", "-k",
                                      "gloo or :nccl-ws2 or torch-symm-mem", f"--perfgate-profile={prof}",
                                      "--junitxml=r.xml", "-p", "no:cacheprovider", "-rA")
    r.assert_outcomes(failed=2, xfailed=1 + 3, skipped=3)
    out = r.stdout.str()
    assert "Traceback" not in out and "server start" not in out  # no server for the micro tier
    r.stdout.fnmatch_lines(["*[[]XPASS(strict)[]] UNBLOCKED: expected to fail with slower-than-baseline (gloo is slow "
                            "on this box) but it passed: gloo, eager, 14336 B bfloat16, world size 2: median * µs*", f'*Update the expectation at {prof}:* '
                            '(expectations.allreduce:gloo.eager) to expect = "pass".*'])
    cases = {c.name: {p.name: p.value for p in c.properties()} for s in JUnitXml.fromfile(str(pytester.path / "r.xml"))  # type: ignore[attr-defined]  # junitparser types xunit2 cases as its core TestCase
             for c in s}
    xpass = cases["test_allreduce[decode-1x7168-eager:gloo-ws2]"]
    assert (xpass["outcome"], xpass["expected"], xpass["kind"], xpass["mode"], xpass["variant"]) == \
        ("xpass", "xfail:slower-than-baseline", "allreduce", "eager", "gloo")
    assert xpass["backend"] == "gloo" and xpass["world_size"] == "2" and float(xpass["latency_us"]) > 0
    assert xpass["engine"] == "sim" and "stack.gpu" in xpass and len(xpass["config"]) == 10  # the record's identity
    slow = cases["test_allreduce[verify-2x7168-eager:gloo-ws2]"]
    assert (slow["outcome"], slow["category"], slow["expected"]) == \
        ("xfail", "slower-than-baseline", "xfail:slower-than-baseline")
    assert "gloo is slow on this box — observed: all-reduce latency" in slow["reason"]
    for label in ("decode-1x7168", "verify-2x7168", "sweep-4096B"):
        nccl = cases[f"test_allreduce[{label}-eager:nccl-ws2]"]
        assert (nccl["outcome"], nccl["category"], nccl["expected"]) == \
            ("xfail", "missing-dependency", "xfail:missing-dependency")
        assert nccl["reason"].startswith("[missing-dependency] no GPU on this box — observed: nccl: no CUDA GPU")
        symm = cases[f"test_allreduce[{label}-eager:torch-symm-mem-ws2]"]
        assert (symm["outcome"], symm["category"], symm["expected"]) == \
            ("skip", "missing-dependency", "xfail:unsupported-arch")


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="the gloo ranks need torch")
def test_without_an_expectation_a_backend_that_cannot_run_is_a_default_xfail(pytester, monkeypatch):
    """perfgate.plugin.microcheck.CANNOT_RUN, the built-in default: not strict (gloo runs: a pass)."""
    monkeypatch.setenv("PERFGATE_MICRO_ITERS", "3")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    prof = simproject.make_project(pytester.path, MICRO_PROFILE.split("[micro.floors]")[0])
    r = pytester.runpytest_subprocess("perftests/test_allreduce.py", "-m", "micro", "-k", "decode and (gloo or nccl)",
                                      f"--perfgate-profile={prof}", "--junitxml=r.xml", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=1, xfailed=4)  # gloo; nccl and its three tuned variants
    cases = {c.name: {p.name: p.value for p in c.properties()} for s in JUnitXml.fromfile(str(pytester.path / "r.xml"))  # type: ignore[attr-defined]  # junitparser types xunit2 cases as its core TestCase
             for c in s}
    nccl = cases["test_allreduce[decode-1x7168-eager:nccl-ws2]"]
    assert (nccl["outcome"], nccl["category"], nccl["expected"]) == ("xfail", "missing-dependency",
                                                                     "xfail:missing-dependency")
    assert nccl["reason"] == "[missing-dependency] cannot run here — observed: nccl: no CUDA GPU visible here"
    gloo = cases["test_allreduce[decode-1x7168-eager:gloo-ws2]"]
    assert (gloo["outcome"], gloo["expected"], gloo["iters"]) == ("pass", "pass", "3")


@pytest.mark.parametrize("table, key, expected", [
    ('[expectations."allreduce:glo"]\n"*" = { expect = "pass" }', 'expectations."allreduce:glo"',
     r"\"allreduce:<backend>\" with an all-reduce backend .*found 'glo'; fix: did you mean 'allreduce:gloo'\?"),
    ('[expectations."allreduce:gloo"]\nbaseline = { expect = "pass" }', "expectations.allreduce:gloo.baseline",
     r"a mode of this profile or \"\*\" \(eager, graph\), found 'baseline'"),
])
def test_a_bad_micro_expectation_is_rejected_with_file_key_and_fix(tmp_path, table, key, expected):
    p = write(tmp_path, table + "\n")
    with pytest.raises(ProfileSchemaError, match=expected) as ei:
        load_profile(p)
    assert ei.value.key == key


def test_micro_expectations_load_for_the_timings(tmp_path):
    p = write(tmp_path, '[expectations."allreduce:torch-symm-mem"]\n'
                        'graph = { expect = "xfail", category = "unsupported-arch", reason = "SM 9.0 only", '
                        'when = "sm < 9.0" }\n')
    exp = load_profile(p).expectation("allreduce:torch-symm-mem", "graph")
    assert exp is None  # a `when` with no stack never holds
    e = load_profile(p).expectations["allreduce:torch-symm-mem"]["graph"][0]
    assert (e.expect, e.category, e.when) == ("xfail", "unsupported-arch", "sm < 9.0")


def test_the_micro_tier_runs_in_cell_1_of_a_shard(pytester, monkeypatch):
    monkeypatch.delenv("PERFGATE_MICRO_WORLD_SIZES", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    prof = simproject.make_project(pytester.path, MICRO_PROFILE)
    base = ("perftests", "-m", "micro", f"--perfgate-profile={prof}", "--collect-only", "-q",
            "-p", "no:cacheprovider")
    ids = [[ln for ln in pytester.runpytest_subprocess(*base, *more).stdout.lines if ln.startswith("perftests/")]
           for more in ((), ("--perfgate-shard=1/2",), ("--perfgate-shard=2/2",))]
    assert len(ids[0]) == 7 * 3 and ids[1] == ids[0] and ids[2] == []  # 7 backends x 3 sizes, eager only
    assert "perftests/test_allreduce.py::test_allreduce[decode-1x7168-eager:gloo-ws2]" in ids[0]
    # the micro tier alone (no server test collected at all) is sharded the same way
    only = ("perftests/test_allreduce.py", *base[1:])
    alone = [[ln for ln in pytester.runpytest_subprocess(*only, *more).stdout.lines if ln.startswith("perftests/")]
             for more in (("--perfgate-shard=1/2",), ("--perfgate-shard=2/2",))]
    assert alone[0] == ids[0] and alone[1] == []

"""Under pytest-xdist (-n 2) every record of one server config goes to one worker, whatever the test's other
parameters: one server start per config, for tests parametrized over metrics and for plain ones."""

from __future__ import annotations

import pytest
from junitparser.xunit2 import JUnitXml

from tests.simproject import make_project
from tests.test_public_api import PROFILE

USER_TESTS = '''
import pytest

pytestmark = pytest.mark.perfgate(kind="latency")


@pytest.mark.parametrize("metric", ["ttft_ms", "output_tok_s", "itl_ms"])
def test_metric_after(perf_server, measure, perf_check, metric):
    perf_check(measure(perf_server, concurrency=2), metric, limit=1e9 if metric != "output_tok_s" else 1e-9)


@pytest.mark.parametrize("metric", ["ttft_ms", "itl_ms"])
@pytest.mark.perfgate(kind="first")
def test_metric_first(metric, perf_server, measure, perf_check):
    perf_check(measure(perf_server, concurrency=2), metric, limit=1e9)


def test_plain(perf_server, measure, perf_check):
    perf_check(measure(perf_server, concurrency=2), "ttft_ms", limit=1e9)
'''


def _records(path):
    return [{p.name: p.value for p in c.properties()} | {"name": c.name}  # type: ignore[attr-defined]  # junitparser types xunit2 cases as its core TestCase
            for s in JUnitXml.fromfile(str(path)) for c in s]


@pytest.mark.parametrize("dist", ["load", "loadgroup", "loadscope"])
def test_under_two_workers_each_config_starts_once(pytester: pytest.Pytester, dist: str) -> None:
    pytest.importorskip("xdist")
    prof = make_project(pytester.path, PROFILE.replace("TTFT", "1.0"))
    (pytester.path / "mytests").mkdir()
    (pytester.path / "mytests" / "test_mine.py").write_text(USER_TESTS)
    r = pytester.runpytest_subprocess("mytests", f"--perfgate-profile={prof}", "--junitxml=r.xml", "-n", "2",
                                      "--dist", dist, "-p", "no:cacheprovider", "-p", "no:hypothesispytest")
    r.assert_outcomes(passed=12)  # 6 records per mode, two modes
    recs = _records(pytester.path / "r.xml")
    logs: dict[str, set[str]] = {}
    for rec in recs:
        logs.setdefault(rec["mode"], set()).add(rec["log"])
    # one server log per config: every record of a mode was measured on the one server its worker started
    assert {m: len(ls) for m, ls in logs.items()} == {"baseline": 1, "eagle3": 1}, logs
    # a worker's start-up progress reaches the terminal live (its inherited stderr), named by the worker
    for mode in ("baseline", "eagle3"):
        r.stderr.fnmatch_lines([f"[[]gw[01][]] perfgate: [[]*{mode}*[]] launching (0 s)  log: *",
                                f"[[]gw[01][]] perfgate: [[]*{mode}*[]] ready (* s)*"])


class _State:
    class profile:  # noqa: N801  (a stand-in: the names scope_of reads)
        name = "h200-x1/llama-3.1-8b"
        modes = {"baseline": None, "eagle3": None, "eagle3-topk4": None}

    class variants:  # noqa: N801
        variants = {"nccl-tree": None, "nccl": None}


@pytest.mark.parametrize(("nodeid", "want"), [
    ("t.py::test_a[llama-3.1-8b:baseline]", ("baseline", None)),
    ("t.py::test_a[llama-3.1-8b:baseline-ttft_ms]", ("baseline", None)),
    ("t.py::test_a[ttft_ms-llama-3.1-8b:eagle3]", ("eagle3", None)),
    ("t.py::test_a[ttft_ms-llama-3.1-8b:eagle3-topk4-itl_ms]", ("eagle3-topk4", None)),
    ("t.py::test_a[llama-3.1-8b:eagle3+nccl-tree-itl_ms]", ("eagle3", "nccl-tree")),
    ("t.py::test_a[llama-3.1-8b:baseline+nccl]", ("baseline", "nccl")),
    ("t.py::test_a[x-llama-3.1-8b:baseline+nccl-2]", ("baseline", "nccl")),
    ("t.py::test_a[3]", None),
    ("t.py::test_a", None),
])
def test_a_records_config_is_read_from_its_node_id_among_other_parameters(nodeid, want):
    from perfgate.plugin.workers import scope_of

    assert scope_of(_State(), nodeid) == want  # type: ignore[arg-type]

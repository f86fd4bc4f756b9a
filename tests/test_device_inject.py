"""ci/device/inject: the known slowdowns a paired run's candidate carries on a GPU box, checked without one.

The TTFT-only slowdown (``PERFGATE_INJECT_PREFILL_MS``) patches SGLang's ``Scheduler.handle_generate_request`` when
the scheduler module is imported; here a stand-in ``sglang.srt.managers.scheduler`` (the same module path and
method name as SGLang 0.5.16, 0.5.17 and 0.5.23: ``test_real_scheduler_has_the_method``) is imported in a
subprocess with the inject folder first on PYTHONPATH, and the sleep is seen through a recording ``time.sleep``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INJECT = ROOT / "ci" / "device" / "inject"

_PROBE = """
import json, time
slept = []
time.sleep = slept.append
from sglang.srt.managers import scheduler
s = scheduler.Scheduler()
out = s.handle_generate_request("req-1")
h = scheduler.Scheduler.handle_generate_request
print(json.dumps({"out": out, "slept": slept, "ms": getattr(h, "perfgate_inject_ms", None),
                  "wrapped": hasattr(h, "__wrapped__")}))
"""


def _fake_sglang(root: Path, method: str = "handle_generate_request") -> Path:
    pkg = root / "sglang" / "srt" / "managers"
    pkg.mkdir(parents=True)
    for d in (root / "sglang", root / "sglang" / "srt", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "scheduler.py").write_text(
        f"class Scheduler:\n    def {method}(self, recv_req):\n        return 'queued ' + recv_req\n")
    return root


def _run(site: Path, **env: str) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("PERFGATE_INJECT")}
    e.update(env, PYTHONPATH=f"{INJECT}{os.pathsep}{site}")
    return subprocess.run([sys.executable, "-c", _PROBE], env=e, capture_output=True, text=True, timeout=60)


def test_prefill_delay_sleeps_before_each_request(tmp_path: Path) -> None:
    r = _run(_fake_sglang(tmp_path), PERFGATE_INJECT_PREFILL_MS="2.8")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got == {"out": "queued req-1", "slept": [0.0028], "ms": 2.8, "wrapped": True}


def test_nothing_happens_unset(tmp_path: Path) -> None:
    r = _run(_fake_sglang(tmp_path))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"out": "queued req-1", "slept": [], "ms": None, "wrapped": False}


def test_a_scheduler_without_the_method_says_so(tmp_path: Path) -> None:
    site = _fake_sglang(tmp_path, method="other")
    probe = "from sglang.srt.managers import scheduler; print(hasattr(scheduler.Scheduler, 'other'))"
    e = {**os.environ, "PYTHONPATH": f"{INJECT}{os.pathsep}{site}", "PERFGATE_INJECT_PREFILL_MS": "2.8"}
    r = subprocess.run([sys.executable, "-c", probe], env=e, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "True"
    assert "handle_generate_request not found; PERFGATE_INJECT_PREFILL_MS has no effect" in r.stderr


@pytest.mark.parametrize("version", ["0.5.16", "0.5.17", "0.5.23"])
def test_real_scheduler_has_the_method(version: str) -> None:
    parsers = os.environ.get("PERFGATE_SGLANG_PARSERS", "")
    src = Path(parsers) / f"sglang-{version}" / "sglang" / "srt" / "managers" / "scheduler.py"
    if not parsers or not src.is_file():
        pytest.skip(f"SGLang {version}'s source is not installed (PERFGATE_SGLANG_PARSERS; ci/install-sglang-parsers.sh)")
    text = src.read_text(encoding="utf-8")
    assert "\nclass Scheduler(" in text and "    def handle_generate_request(\n" in text

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


_EXTEND_PROBE = """
import json, time
slept, spun = [], []
time.sleep = slept.append
import torch
torch.cuda._sleep = spun.append
from sglang.srt.model_executor import model_runner
class Mode:
    def __init__(self, name): self.name = name
class Batch:
    def __init__(self, name): self.forward_mode = Mode(name)
r = model_runner.ModelRunner()
outs = [r._forward_raw(Batch(name), None) for name in ("EXTEND", "DECODE", "TARGET_VERIFY", "EXTEND")]
print(json.dumps({"outs": outs, "slept": slept, "spun": spun,
                  "inject": getattr(model_runner.ModelRunner._forward_raw, "perfgate_inject", None)}))
"""


def _fake_runner(root: Path) -> Path:
    pkg = root / "sglang" / "srt" / "model_executor"
    pkg.mkdir(parents=True)
    for d in (root / "sglang", root / "sglang" / "srt", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "model_runner.py").write_text(
        "class ModelRunner:\n    def _forward_raw(self, forward_batch, pp_proxy_tensors):\n"
        "        return 'ran ' + forward_batch.forward_mode.name\n")
    (root / "torch").mkdir()
    (root / "torch" / "__init__.py").write_text("class cuda:\n    @staticmethod\n    def _sleep(cycles):\n        pass\n")
    return root


def _run_extend(site: Path, **env: str) -> dict[str, object]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("PERFGATE_INJECT")}
    e.update(env, PYTHONPATH=f"{INJECT}{os.pathsep}{site}")
    r = subprocess.run([sys.executable, "-c", _EXTEND_PROBE], env=e, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got: dict[str, object] = json.loads(r.stdout)
    return got


def test_extend_gpu_spin_runs_before_each_prefill_forward_only(tmp_path: Path) -> None:
    """(a) of issue 53: a spin of N us (N x 1980 cycles) before every EXTEND forward, none before a decode step or a
    verify pass, and no host sleep."""
    got = _run_extend(_fake_runner(tmp_path), PERFGATE_INJECT_EXTEND_GPU_US="3000")
    assert got["outs"] == ["ran EXTEND", "ran DECODE", "ran TARGET_VERIFY", "ran EXTEND"]
    assert got["spun"] == [3000 * 1980, 3000 * 1980] and got["slept"] == []
    assert got["inject"] == [3000.0, 0.0]


def test_extend_host_sleep_runs_before_each_prefill_forward_only(tmp_path: Path) -> None:
    """(b) of issue 53: a host sleep before every EXTEND forward, no kernel."""
    got = _run_extend(_fake_runner(tmp_path), PERFGATE_INJECT_EXTEND_HOST_MS="3.5")
    assert got["slept"] == [0.0035, 0.0035] and got["spun"] == []


def test_extend_untouched_unset(tmp_path: Path) -> None:
    got = _run_extend(_fake_runner(tmp_path))
    assert got["slept"] == [] and got["spun"] == [] and got["inject"] is None


@pytest.mark.parametrize("version", ["0.5.16", "0.5.17"])
def test_real_model_runner_has_forward_raw(version: str) -> None:
    """The patched method exists where the inject expects it, taking the ForwardBatch first."""
    parsers = os.environ.get("PERFGATE_SGLANG_PARSERS", "")
    src = Path(parsers) / f"sglang-{version}" / "sglang" / "srt" / "model_executor" / "model_runner.py"
    if not parsers or not src.is_file():
        pytest.skip(f"SGLang {version}'s source is not installed (PERFGATE_SGLANG_PARSERS; ci/install-sglang-parsers.sh)")
    text = src.read_text(encoding="utf-8")
    assert "    def _forward_raw(\n        self,\n        forward_batch: ForwardBatch," in text

"""perfgate.classify: failure categories and backend fallbacks from real SGLang logs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfgate.classify import Classification, classify
from perfgate.classify.fallbacks import backend_matches, fallbacks_for, find_fallbacks
from perfgate.classify.phases import phase_of
from perfgate.classify.rules import FALLBACK_RULES, LOG_CATEGORIES, RULES

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
HEADER = re.compile(r"^# source: (?P<source>.+?); expected: (?P<expected>[a-z-]+)(?P<rest>(?:; \w+: \S+)*)\s*$")


def read_fixture(path: Path) -> tuple[dict[str, str], str]:
    text = path.read_text(encoding="utf-8")
    first = text.splitlines()[0]
    m = HEADER.match(first)
    assert m, f"{path.name}: first line must be '# source: ...; expected: <category>[; key: value]', got {first!r}"
    meta = {"source": m["source"], "expected": m["expected"]}
    for item in filter(None, m["rest"].split("; ")):
        key, _, value = item.partition(": ")
        meta[key] = value
    return meta, text


def returncode_of(meta: dict[str, str]) -> int | None:
    raw = meta.get("returncode", "-9")
    return None if raw == "none" else int(raw)


FIXTURES = sorted(LOGS.glob("*.log"))


def test_there_are_fixtures_for_every_category_a_log_can_show() -> None:
    expected = {read_fixture(p)[0]["expected"] for p in FIXTURES}
    assert {"none", "bad-flag", "config-error", "unsupported-arch", "cuda-graph-capture", "oom", "nccl-error",
            "assertion", "missing-dependency", "startup-timeout", "crash"} <= expected
    fallbacks = {read_fixture(p)[0].get("fallback") for p in FIXTURES} - {None}
    assert {"torch_symm_mem", "custom_ar", "mscclpp"} <= fallbacks


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_captured_log(path: Path) -> None:
    meta, text = read_fixture(path)
    expected = None if meta["expected"] == "none" else meta["expected"]
    if "fallback" in meta:
        found = fallbacks_for(text, [meta["fallback"]])
        assert found, f"{path.name}: no {meta['fallback']} fallback found"
        assert {fb.category for fb in found} == {expected}
        assert all(fb.backend == meta["fallback"] for fb in found)
        return
    result = classify(returncode_of(meta), text)
    assert result.category == expected, f"{path.name}: {result}"
    if expected is not None:
        assert result.evidence and "# source:" not in result.evidence


def test_source_header_is_never_evidence() -> None:
    # the header names categories and flags; without it the verdict must be the same
    for path in FIXTURES:
        meta, text = read_fixture(path)
        body = "\n".join(text.splitlines()[1:])
        assert classify(returncode_of(meta), text) == classify(returncode_of(meta), body), path.name


def test_real_start_logs_walk_through_the_phases_in_order() -> None:
    for name in ("sglang-0.5.17-h200-baseline-start.log", "sglang-0.5.17-h200-eagle3-start.log"):
        phases = [p for p in map(phase_of, (LOGS / name).read_text().splitlines()) if p]
        firsts = list(dict.fromkeys(phases))
        assert firsts == ["weights", "kv-cache", "cuda-graph", "warmup", "ready"], (name, firsts)
        result = classify(None, (LOGS / name).read_text())
        assert result.ready and result.phase == "ready" and result.fallbacks == ()


def test_healthy_log_noise_is_not_a_failure() -> None:
    text = (LOGS / "sglang-0.5.17-h200-baseline-start.log").read_text()
    # ready, then perfgate's SIGTERM: the "SIGQUIT ... one child failed" and exit -15 lines are teardown
    assert classify(-9, text).category is None
    assert classify(0, text).category is None
    # the optional-module chatter ("No module named 'helion'", "... 'openai_harmony'") is no missing dependency
    before_ready = text.split("The server is fired up")[0]
    assert "No module named 'openai_harmony'" in before_ready
    assert classify(None, before_ready).category == "startup-timeout"


@pytest.mark.parametrize(
    ("log", "category", "cause"),
    [
        # the seed's NCCL_ALGO=Tree failure: the capture is the category, NCCL the cause
        (("Exception: Capture cuda graph failed: NCCL error in: c10d/NCCLUtils.cpp:77, unhandled cuda error\n"
          "ncclUnhandledCudaError: Call to CUDA function failed."), "cuda-graph-capture", "nccl-error"),
        # out of memory while capturing is oom (decision documented in perfgate.classify)
        ("Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB.",
         "oom", "cuda-graph-capture"),
        # an architecture fact outranks the phase it shows up in
        ("Exception: Capture cuda graph failed: No supported CUDA architectures found for major versions [9, 10].",
         "unsupported-arch", "cuda-graph-capture"),
        (("Scheduler hit an exception: Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n"
          "AssertionError: DeepEP buffer"), "assertion", None),
        ("[rank3]: AssertionError: No NVLink connection between GPU 0 and GPU 3", "assertion", None),
        ("ValueError: FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.", "unsupported-arch", None),
        ("ValueError: Unknown speculative algorithm name: FOO", "config-error", None),
        ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: 0.3",
         "oom", None),
        ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3356, invalid usage",
         "nccl-error", None),
        ("ModuleNotFoundError: No module named 'deep_ep'", "missing-dependency", None),
        ("sglang serve: error: argument --attention-backend: invalid choice: 'flashinfr'", "bad-flag", None),
    ],
)
def test_most_specific_signature_wins(log: str, category: str, cause: str | None) -> None:
    result = classify(-9, log)
    assert (result.category, result.cause) == (category, cause)


def test_unknown_death_is_a_crash_with_the_final_exception_as_evidence() -> None:
    log = ("[2026-11-29 12:00:00] Scheduler hit an exception: Traceback (most recent call last):\n"
           '  File "scheduler.py", line 1205, in event_loop_overlap\n'
           "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
           "[2026-11-29 12:00:00] Received sigquit from a child process. It usually means the child failed.")
    result = classify(-9, log)
    assert result.category == "crash"
    assert result.evidence == "torch.AcceleratorError: CUDA error: an illegal memory access was encountered"
    assert classify(-11, "").evidence == "killed by signal SIGSEGV (returncode -11)"


def test_returncode_rules() -> None:
    assert classify(None, "Load weight begin. avail mem=139.09 GB") == Classification(
        category="startup-timeout", evidence="still running at the deadline; last phase reached: weights",
        phase="weights")
    assert classify(None, "The server is fired up and ready to roll!").category is None
    assert classify(2, "").category == "bad-flag"
    assert classify(0, "").category is None
    # weak signatures count only when the process died
    assert classify(None, "NCCL WARN NET/Plugin: could not find libnccl-net.so").category == "startup-timeout"
    assert classify(-9, "NCCL WARN Cuda failure 'invalid argument'").category == "nccl-error"


def test_fallback_is_not_a_failure_and_names_its_backend() -> None:
    log = ("TorchSymmMemCommunicator: Device capability 12 not supported, communicator is not available.\n"
           "Failed to initialize FlashInfer workspace (backend=mnnvl): CUDA out of memory. Disabling flashinfer "
           "allreduce fusion permanently.\n"
           "The server is fired up and ready to roll!\n")
    result = classify(None, log)
    assert result.category is None and result.fallback
    assert [(f.backend, f.category) for f in result.fallbacks] == [
        ("torch_symm_mem", "unsupported-arch"), ("flashinfer_ar_fusion", "oom")]
    assert result.fallbacks[0].describe() == "torch_symm_mem fell back to NCCL: unsupported-arch"
    # a later unrelated death is classified by its own line, not by the fallback warning
    assert classify(-9, log.replace("The server", "RuntimeError: NCCL error: unhandled system error\nThe server"))\
        .category == "nccl-error"


@pytest.mark.parametrize("keyword", ["torch_symm_mem", "torch-symm-mem", "--enable-torch-symm-mem", "enable_torch_symm_mem"])
def test_fallbacks_for_matches_loosely(keyword: str) -> None:
    log = "TorchSymmMemCommunicator: World size 8 not supported, communicator is not available."
    assert [f.backend for f in fallbacks_for(log, [keyword])] == ["torch_symm_mem"]
    assert fallbacks_for(log, ["custom_ar", "mscclpp", "nccl"]) == ()


def test_per_rank_duplicates_collapse() -> None:
    line = "PyMscclpp is unavailable because its dependencies failed to import: No module named 'mscclpp'"
    log = "\n".join(f"[2026-11-29 12:00:0{r} TP{r}] {line}" for r in range(8))
    assert len(find_fallbacks(log)) == 1


def test_every_fallback_backend_is_matchable_by_its_own_name() -> None:
    for rule in FALLBACK_RULES:
        assert backend_matches(rule.backend, rule.backend)
        assert backend_matches(rule.backend, rule.backend.replace("_", "-"))


def test_rule_categories_are_known() -> None:
    assert {r.category for r in RULES} <= set(LOG_CATEGORIES)
    assert {r.category for r in FALLBACK_RULES if r.category} <= set(LOG_CATEGORIES)


def test_agrees_with_the_simulated_server() -> None:
    """The simulated server fails the seed's way; classify reads its logs as the sim means them."""
    behavior = pytest.importorskip("perfgate.sim.behavior")
    hw = Path(__file__).resolve().parent.parent / "fixtures" / "sim" / "rtxpro6000-x8-pcie.toml"
    cases: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
        "nccl-tree": ({}, {"NCCL_ALGO": "Tree"}),
        "flashinfer-ar-fusion": ({"flashinfer-allreduce-fusion-backend": "auto"}, {}),
        "deepep": ({"moe-a2a-backend": "deepep"}, {}),
        "flashinfer-a2a": ({"moe-a2a-backend": "flashinfer"}, {}),
        "mem-too-high": ({"mem-fraction-static": 0.99}, {}),
        "old-flag": ({"cuda-graph-max-bs": 128}, {}),
        "topk-only": ({"speculative-algorithm": "EAGLE3", "speculative-eagle-topk": 4}, {}),
        "torch-symm-mem": ({"enable-torch-symm-mem": True}, {}),
        "mscclpp": ({"enable-mscclpp": True}, {}),
    }
    for name, (flags, env) in cases.items():
        plan = behavior.simulate_launch(hw, {"tp-size": 8, **flags}, env)
        lines = [ln.text for ln in plan.log]
        failure = plan.failure
        if failure is None:
            result = classify(None, "\n".join([*lines, "The server is fired up and ready to roll!"]))
            assert result.category is None, name
            continue
        tb = list(failure.traceback) or [failure.message]
        if failure.in_scheduler:
            tb[0] = "Scheduler hit an exception: " + tb[0]
        assert classify(failure.exit_code, "\n".join([*lines, *tb])).category == failure.category, name


@given(returncode=st.one_of(st.none(), st.integers(-64, 255)), text=st.text(max_size=2000))
def test_classify_never_raises(returncode: int | None, text: str) -> None:
    result = classify(returncode, text)
    assert result.category is None or result.category in LOG_CATEGORIES
    assert isinstance(result.evidence, str) and len(result.evidence) <= 500
    for line in text.splitlines():
        phase_of(line)


_SNIPPETS = [
    "Capture cuda graph failed: ", "CUDA out of memory", "NCCL error", "AssertionError: x", "ValueError: y",
    "ModuleNotFoundError: No module named 'z'", "SIGTERM received. signum=None", "Scheduler hit an exception",
    "The server is fired up and ready to roll!", "# source: x; expected: oom", "usage: sglang serve",
    "sglang serve: error: ambiguous option: --a could match --ab, --ac",
    "TorchSymmMemCommunicator: World size 3 not supported", "\r", "\x1b[1;33m", "Traceback (most recent call last):",
]


@given(parts=st.lists(st.one_of(st.sampled_from(_SNIPPETS), st.text(max_size=40)), max_size=30),
       returncode=st.one_of(st.none(), st.sampled_from([0, 1, 2, -9, -11, 137])))
def test_classify_never_raises_on_log_like_text(parts: list[str], returncode: int | None) -> None:
    result = classify(returncode, "\n".join(parts))
    assert result.category is None or result.category in LOG_CATEGORIES
    if returncode is None and result.category is None:
        assert result.ready or any("SIGTERM received" in p for p in parts)

"""The all-reduce harness: real rank processes with gloo on CPU, cleanup, and the arithmetic."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

import perfgate
from perfgate import allreduce as ar
from perfgate.allreduce.harness import run_allreduce_bench
from perfgate.allreduce.results import aggregate, busbw_gbps
from perfgate.errors import BackendUnavailable, ConfigError, MicrobenchTimeout, RankFailed
from perfgate.host.gpu import visible_count

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


def _leftovers(marker: Path) -> list[str]:
    """Processes whose command line mentions ``marker`` (the run's log folder)."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if str(marker) in cmd and p.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(f"{p.info['pid']}: {cmd}")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


# ----------------------------------------------------------------------------- real ranks


@needs_torch
def test_gloo_world_size_2_tiny(tmp_path: Path) -> None:
    res = run_allreduce_bench(world_size=2, sizes_bytes=[64, 7168 * 2], backend="gloo", warmup=2, iters=20,
                                 timeout_s=240, log_dir=tmp_path)
    assert [(r.bytes, r.graph) for r in res] == [(64, False), (14336, False)]
    for r in res:
        # the ranks checked the sum (1 + 2 on every element) before timing; a wrong sum is a category
        assert r.ok, (r.category, r.reason)
        assert r.category is None
        assert r.backend == "gloo" and r.world_size == 2 and r.device == "cpu" and r.iters == 20
        assert r.dtype == "bfloat16"  # gloo takes bf16 on torch 2.13
        assert r.numel * 2 == r.bytes
        assert r.latency_us is not None and r.latency_p99_us is not None
        assert 0 < r.latency_us <= r.latency_p99_us
        assert r.algbw_gbps == pytest.approx(r.bytes / (r.latency_us * 1e-6) / 1e9)
        assert r.busbw_gbps == pytest.approx(r.algbw_gbps * 2 * (2 - 1) / 2)
        props = r.as_properties()
        assert {"backend", "world_size", "bytes", "latency_us", "latency_p99_us", "busbw_gbps"} <= set(props)
    assert not _leftovers(tmp_path)
    assert not list(tmp_path.glob("*.tmp"))


@needs_torch
def test_a_failing_rank_is_reported_and_the_others_are_killed(tmp_path: Path) -> None:
    # rank 1 raises at once; rank 0 is still importing torch or waiting for its peer
    with pytest.raises(RankFailed, match=r"gloo: rank 1 failed \(crash\): RuntimeError: injected failure") as ei:
        run_allreduce_bench(world_size=2, sizes_bytes=[64], backend="gloo", iters=5, timeout_s=240,
                               env={ar.FAIL_ENV: "1:start"}, log_dir=tmp_path)
    e = ei.value
    assert e.rank == 1 and e.returncode == 1 and e.category == "crash" and e.backend == "gloo"
    assert e.log_path == str(tmp_path / "rank1.log")
    assert "injected failure" in e.log_tail  # the rank's traceback, in the message too
    assert not _leftovers(tmp_path)


@needs_torch
@pytest.mark.slow
def test_a_rank_failing_inside_the_group_does_not_leave_its_peer_blocked(tmp_path: Path) -> None:
    # rank 1 raises after the process group is up; rank 0 sits in a collective until it is killed
    with pytest.raises(RankFailed, match="rank 1 failed") as ei:
        run_allreduce_bench(world_size=2, sizes_bytes=[64], backend="gloo", iters=5, timeout_s=240,
                               env={ar.FAIL_ENV: "1:init"}, log_dir=tmp_path)
    assert ei.value.rank == 1
    assert (tmp_path / "ready.0").exists() and (tmp_path / "ready.1").exists()
    assert not _leftovers(tmp_path)


@needs_torch
def test_timeout_kills_every_rank(tmp_path: Path) -> None:
    with pytest.raises(MicrobenchTimeout, match=r"did not finish in 0.5 s \(before every rank joined") as ei:
        run_allreduce_bench(world_size=2, sizes_bytes=[64], backend="gloo", iters=5, timeout_s=0.5,
                               log_dir=tmp_path)
    assert ei.value.category == "startup-timeout"
    assert not _leftovers(tmp_path)


# ----------------------------------------------------------------------------- no launch


@pytest.mark.skipif(visible_count() > 0, reason="a GPU is visible here")
@pytest.mark.parametrize("backend", ["nccl", "nccl-tree", "sglang-custom-ar", "torch-symm-mem"])
def test_gpu_backends_are_unavailable_without_a_gpu(backend: str) -> None:
    with pytest.raises(BackendUnavailable, match=f"{backend}: no CUDA GPU visible") as ei:
        run_allreduce_bench(world_size=2, sizes_bytes=[64], backend=backend)
    assert ei.value.category == "missing-dependency"


def test_bad_requests_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown all-reduce backend 'mpi'; known: nccl, nccl-tree"):
        run_allreduce_bench(world_size=2, sizes_bytes=[64], backend="mpi")
    with pytest.raises(ConfigError, match="CUDA-graph timing needs a GPU backend"):
        run_allreduce_bench(world_size=2, sizes_bytes=[64], backend="gloo", graph=True)
    with pytest.raises(ConfigError, match="world_size must be ≥ 1"):
        run_allreduce_bench(world_size=0, sizes_bytes=[64], backend="gloo")
    assert run_allreduce_bench(world_size=2, sizes_bytes=[], backend="gloo") == []


def test_rank_environment_keeps_multicast_off() -> None:
    env = ar.rank_environment("nccl-tree", {"NCCL_NVLS_ENABLE": "1", "NCCL_DEBUG": "INFO"},
                              base={"PATH": "/bin", "NCCL_ALGO": "Ring"})
    assert env["NCCL_ALGO"] == "Tree"  # the backend's setting over the caller's environment
    assert env["NCCL_DEBUG"] == "INFO"
    for k, v in ar.MULTICAST_OFF.items():
        assert env[k] == v  # nothing overrides these
    assert env["PYTHONPATH"].split(":")[0] == str(Path(perfgate.__file__).resolve().parent.parent)
    assert ar.rank_environment("nccl-small-buffer", base={})["NCCL_BUFFSIZE"] == "1048576"
    fewer = ar.rank_environment("nccl-fewer-channels", base={})
    assert (fewer["NCCL_MIN_NCHANNELS"], fewer["NCCL_MAX_NCHANNELS"]) == ("1", "2")
    cpu = ar.rank_environment("gloo", base={"OMP_NUM_THREADS": "4"})
    assert cpu["OMP_NUM_THREADS"] == "4" and cpu["GLOO_SOCKET_IFNAME"] == "lo"
    assert "OMP_NUM_THREADS" not in ar.rank_environment("nccl", base={})


def test_visible_count_respects_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_count() == 0


# ----------------------------------------------------------------------------- arithmetic


@given(
    nbytes=st.integers(min_value=1, max_value=1 << 34),
    lat=st.floats(min_value=0.01, max_value=1e7, allow_nan=False),
    n=st.integers(min_value=1, max_value=64),
)
def test_busbw_is_nccl_tests_formula(nbytes: int, lat: float, n: int) -> None:
    algbw, busbw = busbw_gbps(nbytes, lat, n)
    assert algbw == pytest.approx(nbytes / lat / 1e3)
    assert busbw == pytest.approx(algbw * 2 * (n - 1) / n)
    assert busbw <= 2 * algbw
    if n == 1:
        assert busbw == 0


def test_busbw_examples() -> None:
    # 1 MB in 100 µs is 10 GB/s algbw; 8 ranks move 2·7/8 of it over the bus
    assert busbw_gbps(1_000_000, 100.0, 8) == pytest.approx((10.0, 17.5))
    with pytest.raises(ValueError):
        busbw_gbps(1, 0.0, 2)


def _spec(**kw: object) -> dict[str, object]:
    spec: dict[str, object] = {"backend": "nccl", "world_size": 2, "numels": [4, 8], "dtype": "bfloat16",
                               "iters": 4, "device": "cuda", "graph": False}
    spec.update(kw)
    return spec


def test_aggregate_averages_ranks_per_iteration_then_takes_median_and_p99() -> None:
    outputs = [
        {"dtype": "bfloat16", "entries": [{"numel": 4, "graph": False, "samples_us": [10, 20, 30, 40]},
                                          {"numel": 8, "graph": False, "category": "fallback", "reason": "no"}]},
        {"dtype": "bfloat16", "entries": [{"numel": 4, "graph": False, "samples_us": [30, 20, 10, 80]},
                                          {"numel": 8, "graph": False, "samples_us": [1, 1, 1, 1]}]},
    ]
    a, b = aggregate(_spec(), outputs)  # type: ignore[arg-type]
    # per iteration: 20, 20, 20, 60 -> median 20, p99 = 20 + 0.97 * 40
    assert a.latency_us == pytest.approx(20.0)
    assert a.latency_p99_us == pytest.approx(20 + 0.97 * 40)
    assert a.bytes == 8 and a.ok
    # one rank's failure is the size's failure
    assert not b.ok and b.category == "fallback" and b.reason == "no"
    assert "latency_us" not in b.as_properties()


def test_aggregate_marks_world_size_1_as_not_comparable_and_keeps_fp32_fallback() -> None:
    outputs = [{"dtype": "float32", "note": "bf16 failed",
                "entries": [{"numel": 4, "graph": False, "samples_us": [5, 5]},
                            {"numel": 4, "graph": True, "samples_us": [1, 1], "note": "the captured CUDA graph is empty"}]}]
    r, g = aggregate(_spec(world_size=1, numels=[4], iters=2, graph=True), outputs)  # type: ignore[arg-type]
    assert r.dtype == "float32" and r.bytes == 16
    assert r.busbw_gbps == 0
    assert "world size 1" in r.note and "not comparable" in r.note and "bf16 failed" in r.note
    assert "empty" not in r.note
    assert g.graph and g.note.endswith("; the captured CUDA graph is empty")

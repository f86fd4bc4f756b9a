"""--perfgate-server-cpus: every launched server pinned to a CPU list, with the processes it starts (process tier:
a real simulated server, its process group's affinity read with psutil), the record says so (``host.server_cpus``), and a bad list
is a usage error naming the format or the CPUs that are not there. perfgate.host.affinity's parser and printer are
checked with hypothesis."""

from __future__ import annotations

import os

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfgate.host.affinity import auto_cpus, core_groups, cpus_text, launched_on, parse_cpus
from tests.test_measurement import make_project, records, run


@given(st.sets(st.integers(min_value=0, max_value=255), min_size=1, max_size=40))
def test_a_cpu_list_prints_and_parses_back(cpus):
    text = cpus_text(cpus)
    assert parse_cpus(text, available=range(256)) == frozenset(cpus)
    assert " " not in text and text.count(",") <= len(cpus) - 1


@pytest.mark.parametrize("bad", ["", "a", "3-1", "-2", "1,,2", "2-x"])
def test_a_bad_cpu_list_names_the_format(bad):
    with pytest.raises(ValueError, match=r"e\.g\. 2-5 or 0,2,4-6"):
        parse_cpus(bad, available=range(8))


def test_cpus_that_are_not_there_are_named():
    with pytest.raises(ValueError, match=r"CPUs 8-10 are not available here .*0-7"):
        parse_cpus("6-10", available=range(8))


def _sys_cpu(root, cores):
    """A /sys/devices/system/cpu of these physical cores (each a tuple of its logical CPUs)."""
    for core in cores:
        for c in core:
            d = root / f"cpu{c}" / "topology"
            d.mkdir(parents=True)
            (d / "thread_siblings_list").write_text(cpus_text(core) + "\n")
    return root


@st.composite
def _machines(draw):
    """Physical cores of 1 or 2 hyper-threads, numbered as Linux does on either layout (siblings apart or adjacent)."""
    n, smt = draw(st.integers(1, 12)), draw(st.sampled_from([1, 2]))
    if smt == 1:
        return [(c,) for c in range(n)]
    return [(c, c + n) for c in range(n)] if draw(st.booleans()) else [(2 * c, 2 * c + 1) for c in range(n)]


@given(cores=_machines(), n=st.integers(1, 6), data=st.data())
def test_auto_takes_one_cpu_of_each_of_n_physical_cores(tmp_path_factory, cores, n, data):
    """auto:N: N CPUs on N different physical cores (no two hyper-threads of one), all available, the GPU's local
    ones where they are enough, the core of CPU 0 only when it must; fewer cores than N is an error naming them."""
    root = _sys_cpu(tmp_path_factory.mktemp("cpu"), cores)
    every = [c for core in cores for c in core]
    local = set(data.draw(st.sets(st.sampled_from(every))))
    core_of = {c: core for core in cores for c in core}
    if n > len(cores):
        with pytest.raises(ValueError, match=rf"auto:{n} needs {n} physical cores .* {len(cores)} .*auto:"):
            auto_cpus(n, available=every, local=local, sys_cpu=root)
        return
    got = auto_cpus(n, available=every, local=local, sys_cpu=root)
    assert len(got) == n and len({core_of[c] for c in got}) == n and got <= set(every)
    local_cores = {core_of[c] for c in local}
    if len(local_cores) >= n:  # enough cores near the GPU: every CPU chosen is one of them
        assert got <= local, (got, local)
    pool_cores = local_cores if len(local_cores) >= n else set(cores)
    if got & set(core_of[0]):  # CPU 0's core (either thread) is taken last: only when no other core is left
        assert len(pool_cores) == n, (got, pool_cores)


def test_core_groups_read_the_siblings_and_a_cpu_linux_does_not_describe_stands_alone(tmp_path):
    root = _sys_cpu(tmp_path, [(0, 4), (1, 5)])
    assert core_groups([0, 1, 4, 5, 9], sys_cpu=root) == [(0, 4), (1, 5), (9,)]
    assert core_groups([4, 1], sys_cpu=root) == [(1,), (4,)]  # siblings outside the set are not added


def test_auto_in_the_option_and_its_errors_name_the_fix():
    assert len(parse_cpus("auto:1")) == 1
    for bad in ("auto:0", "auto:x"):
        with pytest.raises(ValueError, match=r"auto takes a number of physical cores, e\.g\. auto:4"):
            parse_cpus(bad)
    with pytest.raises(ValueError, match=r"auto:999 needs 999 physical cores"):
        parse_cpus("auto:999")


def test_a_launch_inherits_the_cpus_and_the_launcher_keeps_its_own():
    import subprocess
    import sys

    before = os.sched_getaffinity(0)
    one = frozenset({min(before)})
    with launched_on(one):
        p = subprocess.Popen([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                             stdout=subprocess.PIPE, text=True)
    out, _ = p.communicate(timeout=30)
    assert out.strip() == str(sorted(one))
    assert os.sched_getaffinity(0) == before


def test_a_server_and_every_process_it_starts_run_on_its_cpus(tmp_path):
    """A real (simulated) server launched with ``cpus``: every process of its group is pinned there, the launcher
    keeps its own CPUs, and the server's log says so."""
    from pathlib import Path

    from perfgate import load_profile
    from perfgate.engines import get_engine
    from perfgate.host.procs import group_pids
    from perfgate.serving.server import Server

    before = os.sched_getaffinity(0)
    cpu = min(before)
    root = Path(__file__).resolve().parents[1]
    cfg = load_profile(root / "baselines/sim-rtxpro6000-x8/kimi-k2.5.toml").config("baseline")
    with Server(cfg, engine=get_engine("sim"), log_dir=tmp_path, startup_timeout_s=60, cpus=frozenset({cpu})) as s:
        assert s.pgid is not None
        seen = [psutil.Process(pid).cpu_affinity() for pid in group_pids(s.pgid)]
        assert os.sched_getaffinity(0) == before
        assert s.log_path is not None and f"# cpus: {cpu}\n" in s.log_path.read_text()
    assert seen and all(a == [cpu] for a in seen), seen


def test_a_session_with_pinned_servers_says_so_in_its_records(pytester, monkeypatch):
    monkeypatch.setenv("PERFGATE_HOST_WATCH", "on")  # the suite turns the watch off; the record's host.* needs it
    cpu = min(os.sched_getaffinity(0))
    prof = make_project(pytester)
    r = run(pytester, prof, "-m", "baseline", "-k", "decode_floor", f"--perfgate-server-cpus={cpu}")
    r.assert_outcomes(passed=1)
    rec = records(pytester)["test_decode_floor[m:baseline]"]
    assert rec.get("host.server_cpus") == str(cpu), {k: v for k, v in rec.items() if k.startswith("host.")}
    logs = list(pytester.path.rglob("*baseline*.log"))
    assert logs and any(f"# cpus: {cpu}" in p.read_text() for p in logs)


def test_a_bad_cpu_list_is_a_usage_error(pytester):
    prof = make_project(pytester)
    r = run(pytester, prof, "-m", "baseline", "--perfgate-server-cpus=2-x")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--perfgate-server-cpus: '2-x' is no CPU list*e.g. 2-5 or 0,2,4-6*"])


def test_the_gpus_local_cpus_come_from_nvml_and_leave_its_init_count_as_it_was(monkeypatch):
    """perfgate.host.gpu.local_cpus: the first visible GPU's CPU-affinity mask words read as CPU numbers; NVML
    initialised and shut down once each (the cached handle other checks use stays initialised); no NVML: None."""
    import sys

    from perfgate.host import gpu
    from tests.test_stack import fake_pynvml

    calls = {"init": 0, "shutdown": 0}
    m = fake_pynvml(names=["NVIDIA H200"] * 2, nvlink=True, cap=(9, 0))
    m.nvmlInit = lambda: calls.__setitem__("init", calls["init"] + 1)
    m.nvmlShutdown = lambda: calls.__setitem__("shutdown", calls["shutdown"] + 1)
    m.nvmlDeviceGetUUID = lambda h: f"GPU-{h:04d}"
    m.nvmlDeviceGetCpuAffinity = lambda h, words: [0b1111 << (4 * h), 1][:words]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", m)
    monkeypatch.setattr("perfgate.host.gpu.os.cpu_count", lambda: 100)  # two 64-bit words of mask
    assert gpu.local_cpus() == frozenset({0, 1, 2, 3, 64}) and calls == {"init": 1, "shutdown": 1}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # the first GPU CUDA would see is device 1
    assert gpu.local_cpus() == frozenset({4, 5, 6, 7, 64})
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    assert gpu.local_cpus() is None

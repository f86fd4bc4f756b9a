"""Where a start's processes ran (perfgate.host.placement): each thread read from /proc, the busiest thread's CPU
per process, the processes sharing a physical core, and the record's per-start properties (server.placement,
start_values.server.scheduler_shared)."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfgate.host.placement import CLIENT, SCHEDULER, Placement, ThreadSample, placement, sample
from perfgate.measuring.starts import placement_properties, start_properties
from tests.test_measuring_stackpair import _arm


def _stat(pid: int, comm: str, utime: int, stime: int, cpu: int) -> str:
    # /proc/PID/task/TID/stat: pid (comm) state, then fields 4.. ; utime 14, stime 15, processor 39
    rest = ["S"] + ["0"] * 10 + [str(utime), str(stime)] + ["0"] * 23 + [str(cpu)] + ["0"] * 13
    return f"{pid} ({comm}) " + " ".join(rest) + "\n"


def _proc(root: Path, pid: int, comm: str, cmdline: str, threads: dict[int, tuple[int, int]]) -> None:
    """A fake /proc/PID: its comm, cmdline and per thread (ticks of CPU time, last CPU)."""
    d = root / str(pid)
    (d / "task").mkdir(parents=True)
    (d / "comm").write_text(comm + "\n")
    (d / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode())
    for tid, (ticks, cpu) in threads.items():
        (d / "task" / str(tid)).mkdir()
        (d / "task" / str(tid) / "stat").write_text(_stat(tid, comm, ticks, 0, cpu))


def _cpus(root: Path, siblings: dict[int, str]) -> Path:
    for c, sib in siblings.items():
        (root / f"cpu{c}" / "topology").mkdir(parents=True)
        (root / f"cpu{c}" / "topology" / "thread_siblings_list").write_text(sib + "\n")
    return root


def test_sglang_processes_are_named_and_placed_at_their_busiest_thread(tmp_path: Path) -> None:
    proc, sys_cpu = tmp_path / "proc", _cpus(tmp_path / "cpu", {0: "0,8", 8: "0,8", 3: "3,11", 11: "3,11", 5: "5"})
    tick = os.sysconf("SC_CLK_TCK")
    _proc(proc, 10, "python3", "python3 -m pytest perftests/", {10: (0, 5)})
    _proc(proc, 20, "python3", "/venv/bin/python3 -m sglang.launch_server --model-path m", {20: (0, 0), 21: (0, 0)})
    _proc(proc, 30, "sglang::schedul", "sglang::scheduler_TP0", {30: (0, 3), 31: (0, 3)})  # comm is cut at 15
    _proc(proc, 40, "sglang::detoken", "sglang::detokenizer", {40: (0, 11)})
    before = sample([10, 20, 30, 40], proc=proc, me=10)
    assert before.names == {10: CLIENT, 20: "tokenizer", 30: SCHEDULER, 40: "detokenizer"}
    # the measurement: the scheduler's second thread busy on CPU 11, the tokenizer on 8, the client on 5
    for pid, tid, ticks, cpu in ((30, 31, 3 * tick, 11), (30, 30, tick // 10, 3), (20, 21, 2 * tick, 8),
                                 (10, 10, tick, 5), (40, 40, 0, 11)):
        (proc / str(pid) / "task" / str(tid) / "stat").write_text(_stat(tid, "x", ticks, 0, cpu))
    where = placement(before, sample([10, 20, 30, 40], proc=proc, me=10), sys_cpu=sys_cpu)
    assert where is not None
    assert where.cpus == ((SCHEDULER, 11), ("tokenizer", 8), (CLIENT, 5))  # the busiest first; the idle one left out
    assert where.shared == () and where.scheduler_shared() is False
    assert where.text() == "scheduler@11 tokenizer@8 client@5"


def test_processes_on_hyper_thread_siblings_share_a_core(tmp_path: Path) -> None:
    sys_cpu = _cpus(tmp_path, {0: "0,8", 8: "0,8", 2: "2"})
    before = ThreadSample(threads={(1, 1): (0.0, 0), (2, 2): (0.0, 8), (3, 3): (0.0, 2)},
                          names={1: SCHEDULER, 2: "tokenizer", 3: CLIENT})
    after = ThreadSample(threads={(1, 1): (2.0, 0), (2, 2): (1.0, 8), (3, 3): (0.5, 2)}, names=before.names)
    where = placement(before, after, sys_cpu=sys_cpu)
    assert where is not None and where.shared == ((SCHEDULER, "tokenizer"),)
    assert where.scheduler_shared() is True
    assert where.text() == "scheduler@0 tokenizer@8 client@2; scheduler+tokenizer on one core"


def test_nothing_busy_places_nothing_and_missing_processes_are_left_out(tmp_path: Path) -> None:
    assert placement(ThreadSample(), ThreadSample()) is None
    assert sample([999_999_999], proc=tmp_path) == ThreadSample()
    two = ThreadSample(threads={(1, 1): (1.0, 0), (2, 2): (1.0, 0)}, names={1: "sim-server", 2: "sim-server"})
    where = placement(ThreadSample(), two, sys_cpu=tmp_path)
    assert where is not None and [n for n, _ in where.cpus] == ["sim-server", "sim-server.2"]
    assert where.scheduler_shared() is None  # no SGLang scheduler: nothing to say


@given(st.dictionaries(st.tuples(st.integers(1, 5), st.integers(1, 50)),
                       st.tuples(st.floats(0, 100), st.integers(0, 15)), max_size=30),
       st.floats(0, 1))
def test_each_busy_process_is_placed_once_on_a_cpu_one_of_its_threads_ran_on(
        threads: dict[tuple[int, int], tuple[float, int]], min_busy: float) -> None:
    after = ThreadSample(threads=threads, names={pid: f"p{pid}" for pid, _ in threads})
    where = placement(ThreadSample(), after, sys_cpu=Path("/nonexistent"), min_busy_s=min_busy)
    busy = {pid for pid, _ in threads if sum(s for (p, _), (s, _) in threads.items() if p == pid) >= min_busy}
    if where is None:
        assert not busy
        return
    assert sorted(n for n, _ in where.cpus) == sorted(f"p{pid}" for pid in busy)
    for name, cpu in where.cpus:
        assert cpu in {c for (p, _), (_, c) in threads.items() if f"p{p}" == name}
    for group in where.shared:  # no SMT described: a core is one CPU
        assert len({cpu for n, cpu in where.cpus if n in group}) == 1


def test_the_record_carries_each_starts_placement_in_start_order() -> None:
    arm = _arm("cur", [100.0, 100.1])
    alone = Placement(cpus=((SCHEDULER, 4), ("tokenizer", 1)))
    beside = Placement(cpus=((SCHEDULER, 15), ("tokenizer", 15)), shared=((SCHEDULER, "tokenizer"),))
    m = replace(arm, starts=(replace(arm.starts[0], placement=alone), replace(arm.starts[1], placement=beside)))
    props = start_properties(m)
    assert props["server.placement"] == ("scheduler@4 tokenizer@1 | "
                                         "scheduler@15 tokenizer@15; scheduler+tokenizer on one core")
    assert props["start_values.server.scheduler_shared"] == "0,1"
    unwatched = replace(m, starts=(m.starts[0], replace(m.starts[1], placement=None)))
    assert placement_properties(unwatched) == {"server.placement": "scheduler@4 tokenizer@1 | -"}
    assert placement_properties(arm) == {}  # nothing watched: nothing said


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_a_real_busy_child_is_placed_on_a_cpu_it_may_run_on() -> None:
    import subprocess
    import time

    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 60: pass"])
    try:
        before = sample([os.getpid(), child.pid])
        after = before
        deadline = time.monotonic() + 50
        while time.monotonic() < deadline:  # until the child has used 0.2 s of CPU, however loaded the runner is
            time.sleep(0.05)
            after = sample([os.getpid(), child.pid])
            if sum(secs for (pid, _), (secs, _) in after.threads.items() if pid == child.pid) >= 0.2:
                break
        where = placement(before, after, min_busy_s=0.1)
    finally:
        child.kill()
        child.wait()
    assert where is not None
    placed = dict(where.cpus)
    name = after.names[child.pid]
    assert name in placed and name != CLIENT, (placed, after.names)
    assert placed[name] in range(os.cpu_count() or 1)

"""perfgate under pytest-xdist: each worker owns disjoint GPUs, and all records of one server config go to
one worker (so each config starts once).

Grouping is by server config (its key), not by test id: two records can share a server although their ids
differ (a variant whose flags the mode already sets is the mode's config; a test parametrized over metrics has
one id per metric). Every perfgate test carries ``pytest.mark.xdist_group(name="perfgate:<config key>")``.
xdist's own ``--dist loadgroup`` is a silent no-op on pytest 9.2 with pytest-xdist 3.8 (pytest-xdist#1386: the
worker's ``item._nodeid`` rewrite no longer takes), so under ``--dist load`` (the default), ``loadgroup``,
``loadscope`` and ``loadfile`` perfgate installs a scheduler that computes the same group on the controller: the
node id's parameters hold the record's :attr:`perfgate.record.Case.id` among the test's other parameters
(``[m:baseline-ttft_ms]``), read back with the profile's mode and variant names (:func:`scope_of`), and the
profile gives their config key (:func:`group_of`). Other tests keep the ``--dist`` mode's own scope.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pytest

from perfgate.record import config_scope

if TYPE_CHECKING:
    from perfgate.plugin.state import PerfgateState

__all__ = ["gpu_plan", "assign_gpus", "group_of", "scope_of", "make_scheduler", "SCHEDULED_DISTS"]

#: the --dist modes under which perfgate schedules its records by config (the others: xdist's own)
SCHEDULED_DISTS = ("load", "loadgroup", "loadscope", "loadfile")


def _state(config: pytest.Config) -> PerfgateState:
    from perfgate.plugin.state import state_of

    return state_of(config)


def gpu_plan(config: pytest.Config, workers: int) -> tuple[int, list[str]] | None:
    """(GPUs per worker, visible GPU ids) for a real-engine profile; None when not applicable."""
    st = _state(config)
    p = st.profile
    if p.simulated or workers <= 1:
        return None
    from perfgate.profiles.config import gpus_needed

    tp = gpus_needed(p.server_flags)  # one server's GPUs: tp x pp (x dp), under any of the flags' spellings
    from perfgate.host.gpu import visible_entries

    ids = visible_entries()  # CUDA's rules: UUIDs, the first bad entry ends the list, a duplicate hides all
    if ids is None:  # no NVML: take CUDA_VISIBLE_DEVICES as written, or nvidia-smi's count
        vis = os.environ.get("CUDA_VISIBLE_DEVICES")
        if vis is not None:
            ids = [x.strip() for x in vis.split(",")]
            ids = ids[:ids.index("")] if "" in ids else ids
        else:
            from perfgate.stack import detect_stack

            n = detect_stack().gpu_count
            ids = [str(i) for i in range(int(n))] if str(n).isdigit() else []
    if workers * tp > len(ids):
        raise pytest.UsageError(
            f"perfgate: -n {workers} workers x tp {tp} needs {workers * tp} GPUs but {len(ids)} are visible "
            f"({','.join(ids) or 'none'}); use -n {max(1, len(ids) // tp)} or fewer: two servers never share a GPU"
        )
    return tp, ids


def assign_gpus(config: pytest.Config) -> None:
    """Under pytest-xdist, each worker owns a disjoint set of GPUs (CUDA_VISIBLE_DEVICES)."""
    if hasattr(config, "workerinput"):
        wid = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        plan = gpu_plan(config, count)
        if plan is not None:
            tp, ids = plan
            i = int(wid[2:])
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(ids[i * tp:(i + 1) * tp])
        return
    n = getattr(config.option, "numprocesses", None)
    if isinstance(n, int) and n > 1:
        gpu_plan(config, n)


def group_of(st: PerfgateState, mode: str, variant: str | None) -> str | None:
    """The xdist group of a record: ``perfgate:<config key>`` (None when the profile has no such config)."""
    from perfgate.kinds import FLOOR
    from perfgate.record import Case

    if mode not in st.profile.modes or (variant is not None and variant not in st.variants.variants):
        return None
    return "perfgate:" + st.config_for(Case(st.profile.name, FLOOR, mode, variant)).key


def scope_of(st: PerfgateState, nodeid: str) -> tuple[str, str | None] | None:
    """(mode, variant) of a perf record from its node id, wherever its Case id (``<profile>:<mode>[+<variant>]``)
    stands among the test's parameters (pytest joins them with ``-``; mode and variant names may hold ``-`` too,
    so the profile's own names decide where each ends). None for any other test."""
    end = nodeid.rfind("]")
    if end < 0 or "[" not in nodeid[:end]:
        return None
    params = nodeid[nodeid.find("[") + 1:end]
    head = st.profile.name.split("/")[-1] + ":"
    modes = sorted(st.profile.modes, key=len, reverse=True)
    variants = sorted(st.variants.variants, key=len, reverse=True)
    at = params.find(head)
    while at >= 0:
        if at == 0 or params[at - 1] == "-":
            rest = params[at + len(head):]
            for m in modes:
                after = rest[len(m):]
                if not rest.startswith(m) or (after and after[0] not in "-+"):
                    continue
                if not after.startswith("+"):
                    return m, None
                for v in variants:
                    tail = after[1 + len(v):]
                    if after[1:].startswith(v) and (not tail or tail[0] == "-"):
                        return m, v
        at = params.find(head, at + 1)
    return config_scope(nodeid)


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The scheduler that keeps a config's records on one worker (see the module docstring); the --dist mode's
    own scope for every other test."""
    from xdist.scheduler import LoadFileScheduling, LoadGroupScheduling, LoadScopeScheduling

    st = _state(config)
    dist = getattr(config.option, "dist", "load")
    base = {"loadgroup": LoadGroupScheduling, "loadfile": LoadFileScheduling}.get(dist, LoadScopeScheduling)

    class ConfigScheduling(base):  # type: ignore[misc, valid-type, unused-ignore]  # xdist: no types (Any)
        def _split_scope(self, nodeid: str) -> str:
            bare = nodeid
            if nodeid.rfind("@") > nodeid.rfind("]"):  # xdist_group's rewrite took: the group is the config's
                if nodeid.split("@")[-1].startswith("perfgate:"):
                    return nodeid.split("@")[-1]
                bare = nodeid[:nodeid.rfind("@")]
            ref = scope_of(st, bare)
            group = group_of(st, *ref) if ref else None
            if group is None and ref is not None:  # a perfgate id naming no config (e.g. the micro tier's launches)
                group = "perfgate:" + bare[bare.rindex("[") + 1:-1].split(":", 1)[1]
            return group or str(super()._split_scope(nodeid))

    return ConfigScheduling(config, log)

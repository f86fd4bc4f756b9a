"""perfgate under pytest-xdist: each worker owns disjoint GPUs, and all records of one server config go to
one worker (so each config starts once).

Grouping is by server config (its key), not by test id: two records can share a server although their ids
differ (a variant whose flags the mode already sets is the mode's config). Every perfgate test carries
``pytest.mark.xdist_group(name="perfgate:<config key>")``. xdist's own ``--dist loadgroup`` is a silent
no-op on pytest 9.2 with pytest-xdist 3.8 (pytest-xdist#1386: the worker's ``item._nodeid`` rewrite no
longer takes), so under the default ``--dist load`` perfgate installs a scheduler that computes the same
group on the controller: the node id gives the record's mode and variant
(:func:`perfgate.record.config_scope`), the profile gives their config key (:func:`group_of`).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from perfgate.record import config_scope

__all__ = ["gpu_plan", "assign_gpus", "group_of", "make_scheduler"]


def _state(config: pytest.Config) -> Any:
    from perfgate.plugin.state import state_of

    return state_of(config)


def gpu_plan(config: pytest.Config, workers: int) -> tuple[int, list[str]] | None:
    """(GPUs per worker, visible GPU ids) for a real-engine profile; None when not applicable."""
    st = _state(config)
    p = st.profile
    if p.simulated or workers <= 1:
        return None
    tp = int(p.server_flags.get("tp-size", 1) or 1) * int(p.server_flags.get("pp-size", 1) or 1)
    from perfgate.serving.gpu import visible_entries

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


def group_of(st: Any, mode: str, variant: str | None) -> str | None:
    """The xdist group of a record: ``perfgate:<config key>`` (None when the profile has no such config)."""
    from perfgate.plugin.kinds import FLOOR
    from perfgate.record import Case

    if mode not in st.profile.modes or (variant is not None and variant not in st.variants.variants):
        return None
    return "perfgate:" + st.config_for(Case(st.profile.name, FLOOR, mode, variant)).key


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The scheduler that keeps a config's records on one worker (see the module docstring)."""
    from xdist.scheduler import LoadScopeScheduling

    st = _state(config)

    class ConfigScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            ref = config_scope(nodeid)
            group = group_of(st, *ref) if ref else None
            if group is None and ref is not None:  # a perfgate id naming no config (e.g. the micro tier's launches)
                group = "perfgate:" + nodeid[nodeid.rindex("[") + 1:-1].split(":", 1)[1]
            return group or str(super()._split_scope(nodeid))

    return ConfigScheduling(config, log)

"""Every measured server start watched for a busy host or a throttled GPU (perfgate.host.conditions), and the
record told: its ``host.*`` properties are the worst of the starts it measured or compares with, and
``host.state`` says ``quiet`` or ``disturbed: <why>`` (the terminal's record line and ``perfgate gate`` read it:
a change on a disturbed record is undecided, never regressed); each start's own state is its measurement's
``host_state``, so a paired judge can leave a disturbed start pair out (perfgate.measuring.starts.quiet_pairs)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from perfgate.host.affinity import cpus_text
from perfgate.host.conditions import Conditions, combine, watch_enabled
from perfgate.host.watch import Watch

if TYPE_CHECKING:
    from perfgate.plugin.state import PerfgateState

__all__ = ["watched", "conditions_of"]

#: config key -> the conditions of each of its measured starts, in this session (this worker)
_SEEN = pytest.StashKey["dict[str, list[Conditions]]"]()


@contextmanager
def watched(st: PerfgateState, *config_keys: str) -> Iterator[Watch]:
    """Watch the measurement inside the block and keep its conditions under the configs (co-resident arms: both);
    the :class:`Watch` it yields holds them once the block ends (never started with ``PERFGATE_HOST_WATCH=off``: its
    state is "")."""
    watch = Watch()
    if not watch_enabled():
        yield watch
        return
    watch.start()
    try:
        yield watch
    finally:
        seen = watch.stop()
        if st.settings.server_cpus:  # the record says where its servers ran (perfgate.host.affinity)
            seen = replace(seen, server_cpus=cpus_text(st.settings.server_cpus))
        for key in config_keys:
            st.config.stash.setdefault(_SEEN, {}).setdefault(key, []).append(seen)


def conditions_of(st: PerfgateState, config_keys: Iterable[str]) -> Conditions | None:
    """The worst of the configs' measured starts (None: none was watched)."""
    seen = st.config.stash.get(_SEEN, {})
    return combine([c for k in dict.fromkeys(config_keys) for c in seen.get(k, [])])

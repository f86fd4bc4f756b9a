"""Every measured server start watched for a busy host or a throttled GPU (perfgate.host.conditions), and the
record told: its ``host.*`` properties are the worst of the starts it measured or compares with, and
``host.state`` says ``quiet`` or ``disturbed: <why>`` (the terminal's record line and ``perfgate gate`` read it:
a change on a disturbed record is undecided, never regressed); each start's own state is its measurement's
``host_state``, so a paired judge can leave a disturbed start pair out (perfgate.measuring.starts.quiet_pairs)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

from perfgate.host.conditions import Conditions, Watch, combine, watch_enabled

if TYPE_CHECKING:
    from perfgate.plugin.state import PerfgateState

__all__ = ["Watched", "watched", "conditions_of"]

#: config key -> the conditions of each of its measured starts, in this session (this worker)
_SEEN = pytest.StashKey["dict[str, list[Conditions]]"]()


class Watched:
    """What :func:`watched` saw: the block's conditions once it ends (None: not watched)."""

    conditions: Conditions | None = None

    @property
    def state(self) -> str:
        """``quiet``, ``disturbed: <why>``, or "" when not watched (a measurement's ``host_state``)."""
        return self.conditions.state() if self.conditions is not None else ""


@contextmanager
def watched(st: PerfgateState, config_key: str) -> Iterator[Watched]:
    """Watch the measurement inside the block and keep its conditions under the config (not with
    ``PERFGATE_HOST_WATCH=off``); the :class:`Watched` it yields holds them once the block ends."""
    seen = Watched()
    if not watch_enabled():
        yield seen
        return
    watch = Watch().start()
    try:
        yield seen
    finally:
        seen.conditions = watch.stop()
        st.config.stash.setdefault(_SEEN, {}).setdefault(config_key, []).append(seen.conditions)


def conditions_of(st: PerfgateState, config_keys: Iterable[str]) -> Conditions | None:
    """The worst of the configs' measured starts (None: none was watched)."""
    seen = st.config.stash.get(_SEEN, {})
    return combine([c for k in dict.fromkeys(config_keys) for c in seen.get(k, [])])

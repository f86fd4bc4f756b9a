"""Co-resident arms (``--perfgate-co-resident [FRACTION]``, issue 40 item 6): both arms of a paired comparison served
at once on one machine, so that both meet the host's state at the same moments.

A real H200's batch-1 TTFT switches between two levels on the host (~28 and ~45 ms, issue 40), and a level can
outlast a server start: then alternated starts see one level in one arm's start and the other in the next, and
only more pairs can tell a slowdown from the host. With co-resident arms each start pair is two servers up side
by side: the current and the candidate are started one after the other (the first in the pair's order, which
alternates: perfgate.measuring.order) and kept running together (``ServerManager(resident=2)``), and their trials
and TTFT probes are interleaved request by request (:func:`perfgate.procedure.run_side_by_side`): a probe to one,
then a probe to the other, a trial on one, then on the other. Both arms' probes sample the same moments, so a
level that lasts seconds moves both, and the pair's ratio keeps only what differs. The judge is unchanged: the
per-start-pair ratios (perfgate.measuring.judge.paired).

Conditions, checked by :func:`problem` before the first pair (the record is a usage error naming the fix):

- launched servers, not attached ones (``--perfgate-url``);
- two configs a pair: a stack pair (``--perfgate-candidate``), or a mode or variant against its baseline where
  nothing else is compared with them; a larger group of compared configs is measured start by start as without
  the option (said once);
- both fit on the GPUs at once. Each co-resident server is launched with ``--mem-fraction-static FRACTION``
  (default :data:`DEFAULT_FRACTION`) in place of the config's own (:class:`SideBySide`; the config and its key are
  unchanged). SGLang sizes its KV pool from the GPU memory free *when it starts* (``kv_cache_configurator``: free
  memory after the weights load, less ``(1 - fraction)`` of the memory free before): with 0.4 the first server
  takes ~40 % of the GPU and the second ~40 % of what is left (~24 %), so an 8B model in bf16 (16 GB of weights)
  serves both on one H200 (141 GB) with room for batch 1's KV cache. A model whose weights exceed what is left
  fails to start, as any start failure: the record names it.
- the simulator has no GPU memory to share: its co-resident servers are two processes on the runner, and its
  host levels by the clock (``PERFGATE_SIM_TTFT_MODES=F1,F2/DWELLs``) are what both share.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfgate.engines import Engine
    from perfgate.profiles.config import ServerConfig

__all__ = ["DEFAULT_FRACTION", "MEM_FLAG", "SideBySide", "problem", "with_fraction"]

#: the --mem-fraction-static of each co-resident server unless the option names another
DEFAULT_FRACTION = 0.4
#: SGLang's flag for the share of GPU memory a server may take for its weights and KV pool
MEM_FLAG = "mem-fraction-static"


def with_fraction(config: ServerConfig, fraction: float) -> ServerConfig:
    """``config`` with ``--mem-fraction-static`` set to ``fraction`` (however the profile spelled the key)."""
    flags = {k: v for k, v in config.flags if k.replace("_", "-") != MEM_FLAG}
    flags[MEM_FLAG] = fraction
    return replace(config, flags=tuple(flags.items()))


class SideBySide:
    """An engine that launches a config as a co-resident server: the inner engine's command with
    ``--mem-fraction-static`` set to ``fraction`` (the simulator's too: it accepts SGLang's flags)."""

    def __init__(self, inner: Engine, fraction: float = DEFAULT_FRACTION) -> None:
        self.inner, self.fraction = inner, fraction
        self.name: str = inner.name
        self.teardown_grace_s: float = inner.teardown_grace_s

    def command(self, config: ServerConfig, *, host: str, port: int) -> list[str]:
        return self.inner.command(with_fraction(config, self.fraction), host=host, port=port)

    def environment(self, config: ServerConfig, base: Mapping[str, str]) -> dict[str, str]:
        return self.inner.environment(config, base)


def problem(fraction: float | None, *, attached: bool) -> str:
    """Why co-resident arms cannot run in this session ("" when they can, or when not asked for)."""
    if fraction is None:
        return ""
    if attached:
        return ("--perfgate-co-resident starts both arms' servers side by side, and an attached server "
                "(--perfgate-url) is not perfgate's to start; fix: drop one of the two options")
    if not 0.05 <= fraction <= 0.5:
        return (f"--perfgate-co-resident {fraction:g}: each co-resident server's --mem-fraction-static must be "
                f"0.05-0.5 (two share one GPU); fix: e.g. --perfgate-co-resident {DEFAULT_FRACTION}")
    return ""

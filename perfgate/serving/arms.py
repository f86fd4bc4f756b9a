"""The stack each arm of a session runs on: the current stack's, or a stack-pair candidate's own (issue 31).

``--perfgate-candidate`` names another stack on this box (perfgate.profiles.settings.Candidate): another interpreter
(``python=``), another Python path (``env.PYTHONPATH=``), or simulated versions (``sim-stack=``). What that arm
runs is found from the arm itself, once per environment: its record's ``candidate.stack.*``
(perfgate.plugin.stackpair), the version its flags are spelled for (perfgate.serving.pool.Pool.engine_for) and the
release whose parser checks them (perfgate.serving.launch_checks) all come from here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Protocol

from perfgate.profiles.settings import CANDIDATE_ARM

if TYPE_CHECKING:
    from perfgate.profiles import Profile
    from perfgate.profiles.config import ServerConfig
    from perfgate.stack import Stack

__all__ = ["StackSource", "arm_stack"]


class StackSource(Protocol):
    """What an arm's stack is found from (perfgate.plugin.state.PerfgateState is one)."""

    @property
    def stack(self) -> Stack: ...

    @property
    def profile(self) -> Profile: ...

    @property
    def sim_stack(self) -> str: ...


def arm_stack(st: StackSource, config: ServerConfig) -> Stack:
    """The stack ``config``'s server runs on. The current arm: the session's (``st.stack``). The candidate arm
    (``--perfgate-candidate``): for the simulator the session's sim stack with the candidate's ``sim-stack=``
    overrides; for real SGLang the candidate's own environment, probed by its own interpreter (``python=``, else
    the profile's) with the environment its server gets (``env.PYTHONPATH=`` included):
    :func:`perfgate.stack.detect_stack_in`. The candidate's SGLang version spells and checks its flags."""
    opts = dict(config.engine_options)
    if opts.get("arm") != CANDIDATE_ARM:
        return st.stack
    from perfgate import stack as sk

    if config.engine == "sim":
        hw = st.profile.engine.sim_hardware
        assert hw is not None
        over = sk.parse_overrides(",".join(x for x in (st.sim_stack, str(opts.get("sim_stack") or "")) if x))
        return sk.simulated_stack(hw, over)
    python = str(opts.get("python") or st.profile.engine.python or "")
    return sk.detect_stack_in(python, {**os.environ, **config.env_dict}, box=st.stack)

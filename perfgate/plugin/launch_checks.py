"""The launch checks live in :mod:`perfgate.serving.launch_checks` (they need no pytest); their names stay
importable here for perfgate's own tests."""

from perfgate.serving.launch_checks import Launching, flag_problem, missing_module

__all__ = ["Launching", "flag_problem", "missing_module"]

"""perfgate: a pytest-based performance regression suite for SGLang serving.

Tests use the plugin's fixtures (``perf_server``, ``measure``, ``perf_check``, ``perf_compare``, ``step_profile``,
``perf_crosscheck``, ``micro_check``; ``pytest --fixtures`` lists them, docs/writing-tests.md explains them);
these are the names to import beside them. The plugin itself is registered by ``pip install`` (entry point
``perfgate.plugin``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perfgate._version import __version__

__all__ = [
    "__version__",
    # what the fixtures hand out (annotate a test's arguments with them: perf_server: PerfServer, measure: Measure,
    # perf_check: PerfCheck, perf_compare: PerfCompare)
    "PerfServer",
    "Measure",
    "PerfCheck",
    "PerfCompare",
    "BaselineServer",
    "CandidateServer",
    "MicroCase",
    "Measurement",
    "Stat",
    "Metric",
    "METRICS",
    # the inputs
    "Profile",
    "Workload",
    "Floor",
    "load_profile",
    "Variant",
    "VariantSet",
    "load_variants",
    # what step_profile hands out
    "StepProfile",
    # verdicts and their words (str enums: Outcome.PASS == "pass")
    "Verdict",
    "Outcome",
    "Category",
    # errors (each names the file, the key and the fix)
    "PerfgateError",
    "ProfileSchemaError",
    "ProfileNotFound",
    "ServerError",
]

# name -> module: imported on first use, so `import perfgate` stays cheap (the plugin loads in every
# pytest session of a project that installs perfgate)
_HOME = {
    "PerfServer": "perfgate.plugin.api",
    "Measure": "perfgate.plugin.api",
    "PerfCheck": "perfgate.plugin.api",
    "PerfCompare": "perfgate.plugin.compare",
    "BaselineServer": "perfgate.plugin.compare",
    "CandidateServer": "perfgate.plugin.stackpair",
    "MicroCase": "perfgate.measuring.micro",
    "Measurement": "perfgate.measuring.metrics",
    "Stat": "perfgate.measuring.metrics",
    "Metric": "perfgate.measuring.metrics",
    "METRICS": "perfgate.measuring.metrics",
    "Profile": "perfgate.profiles",
    "Workload": "perfgate.profiles",
    "Floor": "perfgate.profiles",
    "load_profile": "perfgate.profiles.load",
    "Variant": "perfgate.profiles.variants",
    "VariantSet": "perfgate.profiles.variants",
    "load_variants": "perfgate.profiles.variants",
    "StepProfile": "perfgate.measuring.trace",
    "Verdict": "perfgate.measuring.verdict",
    "Outcome": "perfgate.categories",
    "Category": "perfgate.categories",
    "PerfgateError": "perfgate.errors",
    "ProfileSchemaError": "perfgate.errors",
    "ProfileNotFound": "perfgate.errors",
    "ServerError": "perfgate.errors",
}

if TYPE_CHECKING:  # the same names, typed, for a user's type checker (the package ships py.typed)
    from perfgate.categories import Category, Outcome
    from perfgate.errors import PerfgateError, ProfileNotFound, ProfileSchemaError, ServerError
    from perfgate.measuring.metrics import METRICS, Measurement, Metric, Stat
    from perfgate.measuring.micro import MicroCase
    from perfgate.measuring.trace import StepProfile
    from perfgate.measuring.verdict import Verdict
    from perfgate.plugin.api import Measure, PerfCheck, PerfServer
    from perfgate.plugin.compare import BaselineServer, PerfCompare
    from perfgate.plugin.stackpair import CandidateServer
    from perfgate.profiles import Floor, Profile, Workload
    from perfgate.profiles.load import load_profile
    from perfgate.profiles.variants import Variant, VariantSet, load_variants


def __getattr__(name: str) -> Any:
    if name in _HOME:
        import importlib

        value = getattr(importlib.import_module(_HOME[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'perfgate' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

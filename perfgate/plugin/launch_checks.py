"""Why a config must not be launched, found before any launch (real engine only): SGLang's own parser rejects
its flags (``bad-flag``), or a variant's required module is not importable by the server's Python
(``missing-dependency``). :class:`perfgate.plugin.state.PerfgateState` delegates ``flag_problem``/``missing_module``
here; the flags of every selected config are checked once per session.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfgate.measuring.verdict import Verdict
    from perfgate.plugin.state import PerfgateState
    from perfgate.profiles.config import ServerConfig

__all__ = ["missing_module", "flag_problem"]


def missing_module(st: PerfgateState, config: ServerConfig) -> Verdict | None:
    """A variant's ``requires`` module that the server's Python cannot import (real engine only)."""
    if config.engine != "sglang" or not config.variant:
        return None
    variant = st.variants.get(config.variant)
    if not variant.requires:
        return None
    from perfgate.engines.sglang import importable

    python = str(dict(config.engine_options).get("python") or st.profile.engine.python or sys.executable)
    missing = [m for m in variant.requires if not importable(m, python)]
    if not missing:
        return None
    from perfgate.measuring.verdict import Verdict

    names = ", ".join(missing)
    return Verdict(outcome="fail", category="missing-dependency",
                   message=(f"{config.variant}: Python module {names} not importable by {python}: the server "
                            f"would start without the {variant.backend or config.variant} backend and measure "
                            f"the default all-reduce instead; install it next to SGLang to run this attempt "
                            f"({st.variants.path} [variants.{config.variant}] requires)"))


def flag_problem(st: PerfgateState, config: ServerConfig) -> Verdict | None:
    """SGLang's own parser on the config's flags, before any launch (real engine only)."""
    if config.engine != "sglang":
        return None
    arm_python = str(dict(config.engine_options).get("python") or "")
    if st._flag_results is None:
        import time

        from perfgate.serving.preflight import check_configs

        configs = {c.key: c for c in st.selected_configs.values() if c.engine == "sglang"
                   and not dict(c.engine_options).get("python")}
        if not arm_python:
            configs.setdefault(config.key, config)
        st._flag_results = {}
        if configs:
            eng = st._engine_for(next(iter(configs.values())))
            t0 = time.monotonic()
            st._flag_results = check_configs(configs, st.variants, version=eng.version(),
                                             python=st.profile.engine.python or None)
            first = next(iter(st._flag_results.values()))
            bad = sum(1 for r in st._flag_results.values() if r.available and not r.ok)
            if first.available:
                st._note(f"perfgate: flags of {len(configs)} config(s) checked against SGLang "
                         f"{first.sglang_version}'s parser in {time.monotonic() - t0:.1f} s: {bad} rejected")
            else:
                st._note(f"perfgate: flags not pre-checked ({first.reason})")
    if arm_python and config.key not in st._flag_results:
        # a stack-pair candidate with its own Python: its own SGLang's parser, on its own config
        from perfgate.serving.preflight import check_configs

        st._flag_results.update(check_configs({config.key: config}, st.variants,
                                              version=st._engine_for(config).version(), python=arm_python))
    res = st._flag_results.get(config.key)
    if res is None or not res.available or res.ok:
        return None
    from perfgate.measuring.verdict import Verdict

    return Verdict(outcome="fail", category="bad-flag",
                   message=(f"SGLang {res.sglang_version}'s own parser rejects the flags of {config.name}, found "
                            f"before launching: {res.message()}"))

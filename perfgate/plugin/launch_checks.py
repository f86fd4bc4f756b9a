"""Why a config must not be launched, found before any launch (real engine only): SGLang's own parser rejects
its flags (``bad-flag``), or a variant's required module is not importable by the server's Python
(``missing-dependency``). The server pool (:mod:`perfgate.plugin.pool`) asks both before it launches a config,
through the narrow view :class:`Launching`; the flags of every selected config are checked once per session.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from perfgate.measuring.verdict import Verdict
    from perfgate.profiles import Profile
    from perfgate.profiles.config import ServerConfig
    from perfgate.profiles.variants import VariantSet

__all__ = ["Launching", "missing_module", "flag_problem"]


class Launching(Protocol):
    """What the launch checks read of the session's server pool (perfgate.plugin.pool.Pool is one)."""

    #: the parser's answer per config key, once checked (None: not yet)
    flag_results: dict[str, Any] | None

    @property
    def profile(self) -> Profile: ...

    @property
    def variants(self) -> VariantSet: ...

    @property
    def selected_configs(self) -> Mapping[str, ServerConfig]: ...

    def engine_for(self, config: ServerConfig) -> Any: ...

    def note(self, msg: str) -> None: ...


def missing_module(st: Launching, config: ServerConfig) -> Verdict | None:
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


def flag_problem(st: Launching, config: ServerConfig) -> Verdict | None:
    """SGLang's own parser on the config's flags, before any launch (real engine only)."""
    if config.engine != "sglang":
        return None
    arm_python = str(dict(config.engine_options).get("python") or "")
    if st.flag_results is None:
        import time

        from perfgate.serving.preflight import check_configs

        configs = {c.key: c for c in st.selected_configs.values() if c.engine == "sglang"
                   and not dict(c.engine_options).get("python")}
        if not arm_python:
            configs.setdefault(config.key, config)
        st.flag_results = {}
        if configs:
            eng = st.engine_for(next(iter(configs.values())))
            t0 = time.monotonic()
            st.flag_results = check_configs(configs, st.variants, version=eng.version(),
                                             python=st.profile.engine.python or None)
            first = next(iter(st.flag_results.values()))
            bad = sum(1 for r in st.flag_results.values() if r.available and not r.ok)
            if first.available:
                st.note(f"perfgate: flags of {len(configs)} config(s) checked against SGLang "
                         f"{first.sglang_version}'s parser in {time.monotonic() - t0:.1f} s: {bad} rejected")
            else:
                st.note(f"perfgate: flags not pre-checked ({first.reason})")
    if arm_python and config.key not in st.flag_results:
        # a stack-pair candidate with its own Python: its own SGLang's parser, on its own config
        from perfgate.serving.preflight import check_configs

        st.flag_results.update(check_configs({config.key: config}, st.variants,
                                              version=st.engine_for(config).version(), python=arm_python))
    res = st.flag_results.get(config.key)
    if res is None or not res.available or res.ok:
        return None
    from perfgate.measuring.verdict import Verdict

    return Verdict(outcome="fail", category="bad-flag",
                   message=(f"SGLang {res.sglang_version}'s own parser rejects the flags of {config.name}, found "
                            f"before launching: {res.message()}"))

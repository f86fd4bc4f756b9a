"""Why a config must not be launched, found before any launch (real engine only): SGLang's own parser rejects
its flags (``bad-flag``), or a variant's required module is not importable by the server's Python
(``missing-dependency``). The server pool (:mod:`perfgate.serving.pool`) asks both before it launches a config,
through the narrow view :class:`Launching`; the flags of every selected config are checked once per session.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from perfgate.categories import Category, Outcome

if TYPE_CHECKING:
    from perfgate.measuring.verdict import Verdict
    from perfgate.profiles import Profile
    from perfgate.profiles.config import ServerConfig
    from perfgate.profiles.variants import VariantSet

__all__ = ["Launching", "missing_module", "flag_problem"]


class Launching(Protocol):
    """What the launch checks read of the session's server pool (perfgate.serving.pool.Pool is one)."""

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
    return Verdict(outcome=Outcome.FAIL, category=Category.MISSING_DEPENDENCY,
                   message=(f"{config.variant}: Python module {names} not importable by {python}: the server "
                            f"would start without the {variant.backend or config.variant} backend and measure "
                            f"the default all-reduce instead; install it next to SGLang to run this attempt "
                            f"({st.variants.path} [variants.{config.variant}] requires)"))


def flag_problem(st: Launching, config: ServerConfig) -> Verdict | None:
    """SGLang's own parser on the config's flags, before any launch (real engine only). The first call checks every
    selected config, each arm (the current stack, a stack-pair candidate) by the parser of its own release
    (:func:`_check_arms`)."""
    if config.engine != "sglang":
        return None
    if st.flag_results is None:
        st.flag_results = {}
        configs = {c.key: c for c in st.selected_configs.values() if c.engine == "sglang"}
        configs.setdefault(config.key, config)
        _check_arms(st, configs)
    if config.key not in st.flag_results:
        _check_arms(st, {config.key: config})
    res = st.flag_results.get(config.key)
    if res is None or not res.available or res.ok:
        return None
    from perfgate.measuring.verdict import Verdict

    return Verdict(outcome=Outcome.FAIL, category=Category.BAD_FLAG,
                   message=(f"SGLang {res.sglang_version}'s own parser rejects the flags of {config.name}, found "
                            f"before launching: {res.message()}"))


def _arm_environment(st: Launching, config: ServerConfig) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The interpreter and the ``PYTHON*`` variables ``config``'s server starts with: which SGLang it imports."""
    python = str(dict(config.engine_options).get("python") or st.profile.engine.python or "")
    return python, tuple(sorted((k, v) for k, v in config.env_dict.items() if k.startswith("PYTHON")))


def _check_arms(st: Launching, configs: Mapping[str, ServerConfig]) -> None:
    """Check ``configs`` into ``st.flag_results``, one subprocess per arm environment: the parser of the SGLang that
    arm's server imports (its interpreter, its ``PYTHONPATH``), else the installed parser of the arm's release
    (``$PERFGATE_SGLANG_PARSERS/sglang-X``, X the version its engine spells for: a candidate's from its own
    fingerprint, perfgate.serving.arms.arm_stack)."""
    import time

    from perfgate.flagcheck import installed_parser
    from perfgate.serving.preflight import check_configs

    arms: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, ServerConfig]] = {}
    for key, c in configs.items():
        arms.setdefault(_arm_environment(st, c), {})[key] = c
    assert st.flag_results is not None
    for (python, env), group in arms.items():
        t0 = time.monotonic()
        version = str(st.engine_for(next(iter(group.values()))).version() or "")
        kw: dict[str, Any] = {"env": dict(env)} if env else {}
        res = check_configs(group, st.variants, version=version or None, python=python or None, **kw)
        first = next(iter(res.values()))
        where = f"{python or sys.executable}" + (f" with {', '.join(f'{k}={v}' for k, v in env)}" if env else "")
        parser = None if first.available else installed_parser(version)
        why = "" if first.available else first.reason
        if parser is not None:
            # the installed parser with this process's own packages: not the arm's overlays (PYTHONPATH cleared)
            res = check_configs(group, st.variants, version=version, sglang_path=parser, env={"PYTHONPATH": ""})
            where, first = f"the installed parser {parser}; its own environment: {why}", next(iter(res.values()))
        st.flag_results.update(res)
        bad = sum(1 for r in res.values() if r.available and not r.ok)
        if first.available:
            st.note(f"perfgate: flags of {len(group)} config(s) checked against SGLang {first.sglang_version}'s "
                    f"parser ({where}) in {time.monotonic() - t0:.1f} s: {bad} rejected")
        elif parser is not None:
            st.note(f"perfgate: flags of {len(group)} config(s) not pre-checked (its own environment: {why}; the "
                    f"installed parser {parser}: {first.reason})")
        else:
            st.note(f"perfgate: flags of {len(group)} config(s) not pre-checked ({why}"
                    + (f"; no parser for SGLang {version} under $PERFGATE_SGLANG_PARSERS" if version else "") + ")")

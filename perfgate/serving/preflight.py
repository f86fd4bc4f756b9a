"""Preflight: every config's SGLang flags parsed by SGLang's own parser before any launch.

An unknown or renamed flag is found in seconds (one subprocess imports SGLang once and parses every
argv) instead of after a 10-minute model load, and becomes a ``bad-flag`` record naming the closest
valid spelling.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from perfgate.engines.argv import render_flags
from perfgate.flagcheck import FlagCheckResult, check_many
from perfgate.profiles import Profile
from perfgate.profiles.config import ServerConfig
from perfgate.profiles.variants import VariantSet, spell_flags


def argv_for(config: ServerConfig, variants: VariantSet, version: str | None) -> list[str]:
    """The SGLang argv perfgate would launch for ``config`` (host/port aside), spelled for ``version``."""
    spell = tuple(variants.spellings)
    if config.variant:
        spell = variants.get(config.variant).spellings + spell
    return ["--model-path", config.model_path, *render_flags(spell_flags(config.flag_dict, spell, version))]


def profile_configs(profile: Profile, variants: VariantSet) -> dict[str, ServerConfig]:
    """Every config a profile can launch: each mode, and each variant in each of its variant modes."""
    out: dict[str, ServerConfig] = {}
    for mode in profile.modes:
        out[f"{profile.name}:{mode}"] = profile.config(mode)
    names = profile.variant_include if profile.variant_include is not None else tuple(variants.variants)
    for name in names:
        for mode in profile.variant_modes:
            out[f"{profile.name}:{mode}+{name}"] = profile.config(mode, variant=variants.get(name))
    return out


def check_configs(configs: Mapping[str, ServerConfig], variants: VariantSet, *, version: str | None,
                  sglang_path: str | None = None, python: str | None = None,
                  env: Mapping[str, str] | None = None) -> dict[str, FlagCheckResult]:
    """Parse each config's argv, spelled for ``version``, with SGLang's parser (one subprocess for all): the
    SGLang at ``sglang_path``, else the one ``python`` imports with ``env`` (perfgate.flagcheck.check_many)."""
    argvs = {name: argv_for(cfg, variants, version) for name, cfg in configs.items()}
    return check_many(argvs, sglang_path, python=python, env=env)


def summarize(results: Mapping[str, FlagCheckResult]) -> Iterable[str]:
    for name, res in results.items():
        if not res.available:
            yield f"{name}: not checked ({res.reason})"
        elif not res.ok:
            yield f"{name}: {res.message()}"

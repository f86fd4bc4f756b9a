"""ServerConfig: the frozen description of one server launch.

A config is built from a profile's controlled settings, a mode and (optionally) a variant.
It knows which keys the variant declared, so a comparison against the baseline can tell a
controlled difference from a confounded one (the seed's mem-fraction-static mistake).

Flags are SGLang flag names without the leading dashes (``tp-size``), with values that are
str, int, float or bool (``True`` is a bare switch, ``False`` leaves it out). Environment
keys are plain variable names. Both are kept as sorted tuples so configs hash and compare.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

FlagValue = str | int | float | bool | list[str | int | float | bool]


#: where perfgate's own data lies (the shipped profiles' boxes, prompts and models: perfgate/data/project)
_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent)


def _freeze(m: Mapping[str, object]) -> tuple[tuple[str, object], ...]:
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in m.items()))


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """One server launch: engine, model, flags and environment, and where they came from."""

    profile: str
    mode: str
    variant: str | None = None
    engine: str
    model_path: str
    flags: tuple[tuple[str, object], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # keys (flag names, or "env:NAME") the variant declared it changes
    declared_keys: frozenset[str] = frozenset()
    speculative: bool = False
    # engine-specific settings that are not SGLang flags (sim hardware file, startup delay, ...)
    engine_options: tuple[tuple[str, object], ...] = ()
    #: the profile's project root: paths under it (the model, a draft model, the simulated box) enter the key
    #: relative to it, so a config has the same key in every checkout (a plan's shards, a report's costs)
    root: str = field(default="", compare=False)

    @classmethod
    def build(
        cls,
        *,
        profile: str,
        mode: str,
        engine: str,
        model_path: str,
        flags: Mapping[str, object],
        env: Mapping[str, str],
        variant: str | None = None,
        declared_keys: frozenset[str] = frozenset(),
        speculative: bool = False,
        engine_options: Mapping[str, object] | None = None,
        root: str = "",
    ) -> ServerConfig:
        return cls(
            root=root,
            profile=profile,
            mode=mode,
            variant=variant,
            engine=engine,
            model_path=model_path,
            flags=_freeze(flags),
            env=tuple(sorted((k, str(v)) for k, v in env.items())),
            declared_keys=frozenset(declared_keys),
            speculative=speculative,
            engine_options=_freeze(engine_options or {}),
        )

    @property
    def name(self) -> str:
        """Human id: ``mode`` or ``mode+variant``."""
        return self.mode if not self.variant else f"{self.mode}+{self.variant}"

    @property
    def flag_dict(self) -> dict[str, object]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.flags}

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    def settings(self) -> dict[str, object]:
        """Every controlled setting as one flat dict: flags by name, env as ``env:NAME``."""
        out: dict[str, object] = {"model-path": self.model_path}
        out.update(self.flag_dict)
        out.update({f"env:{k}": v for k, v in self.env})
        return out

    @property
    def key(self) -> str:
        """Stable short id of everything that affects the server (used for logs and caching)."""
        blob = json.dumps(
            [self.engine, self.model_path, self.flags, self.env, self.engine_options],
            sort_keys=True,
            default=str,
        )
        for base, name in ((self.root, "<project>"), (_PACKAGE_DIR, "<perfgate>")):
            if base:
                blob = blob.replace(json.dumps(base.rstrip("/") + "/")[1:-1], name + "/")
        return hashlib.sha1(blob.encode()).hexdigest()[:10]

    @property
    def slug(self) -> str:
        """File-name-safe id: ``profile-mode+variant-<key>``."""
        safe = "".join(c if c.isalnum() or c in "-_.+" else "_" for c in f"{self.profile}-{self.name}")
        return f"{safe}-{self.key}"


def gpus_needed(flags: Mapping[str, object]) -> int:
    """GPUs one server of these flags holds: tp x pp, times dp unless the data-parallel ranks live inside tp
    (``enable-dp-attention``)."""
    from perfgate.sim.args import dest_of

    by = {dest_of(k): v for k, v in flags.items()}

    def n(field: str) -> int:
        try:
            return max(1, int(str(by.get(field) or 1)))
        except ValueError:
            return 1

    dp = 1 if by.get("enable_dp_attention") else n("dp_size")
    return n("tp_size") * n("pp_size") * dp


def differing_keys(a: ServerConfig, b: ServerConfig) -> set[str]:
    """Settings whose values differ between two configs (flags, env as ``env:NAME``, model)."""
    sa, sb = a.settings(), b.settings()
    return {k for k in sa.keys() | sb.keys() if sa.get(k) != sb.get(k)}


def confounders(candidate: ServerConfig, reference: ServerConfig) -> set[str]:
    """Keys that differ between candidate and reference but that the candidate did not declare.

    Speculative-decoding flags of a speculative mode count as declared by the mode.
    A non-empty result makes a comparison inconclusive.
    """
    diff = differing_keys(candidate, reference)
    declared = set(candidate.declared_keys)
    return {k for k in diff if k not in declared}

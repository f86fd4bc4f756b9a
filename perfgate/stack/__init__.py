"""The software/hardware stack a run happened on: what it is, a simulated one, overrides.

A :class:`Stack` is recorded as suite-level JUnit properties and on every testcase
(``stack.gpu``, ``stack.cuda``, ...), so merged reports from several boxes stay
self-describing. Every piece that cannot be found is the string ``"unknown"``.

:func:`detect_stack` measures this box's stack from the probes of :mod:`perfgate.stack.probes` and never
raises; :func:`detect_stack_in` the stack of another Python environment on this box (a stack-pair
candidate's), its software probed by that environment's own interpreter; stack conditions over a stack
(``flashinfer < 0.8 and sm == 12.0``) are :mod:`perfgate.stack.conditions`. Which machine it was (GPU UUIDs,
power limit, clocks, a hashed host id) is :mod:`perfgate.stack.machine`, and its session-start calibration
:mod:`perfgate.stack.calibration`.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from perfgate.errors import ConfigError
from perfgate.stack import probes
from perfgate.stack.probes import UNKNOWN
from perfgate.versions import is_version, key_versions

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib


#: Stack pieces that are versions (ordered comparisons allowed).
VERSION_KEYS = ("gpu_count", "sm", "driver", "cuda", "torch", "nccl", "sglang", "sgl_kernel", "flashinfer")
#: Stack pieces that are names (``==`` / ``!=`` only).
NAME_KEYS = ("gpu", "interconnect", "simulated")
#: Pieces ``KEY=VER`` overrides (``--perfgate-sim-stack`` or ``PERFGATE_SIM_STACK``) may set.
OVERRIDE_KEYS = ("gpu", "gpu_count", "sm", "interconnect", "driver", "cuda", "torch", "nccl", "sglang",
                 "sgl_kernel", "flashinfer")
_ALIASES = {"sgl-kernel": "sgl_kernel", "sglang-kernel": "sgl_kernel", "sglang_kernel": "sgl_kernel",
            "gpu-count": "gpu_count", "count": "gpu_count", "flashinfer-python": "flashinfer",
            "flashinfer_python": "flashinfer"}


@dataclass(frozen=True, kw_only=True)
class Stack:
    """GPU hardware and software versions of one box; unknown pieces are ``"unknown"``."""

    gpu: str = UNKNOWN
    gpu_count: int | str = UNKNOWN
    sm: str = UNKNOWN
    interconnect: str = UNKNOWN  # "nvlink" | "pcie" | "unknown"
    driver: str = UNKNOWN
    cuda: str = UNKNOWN
    torch: str = UNKNOWN
    nccl: str = UNKNOWN
    sglang: str = UNKNOWN
    sgl_kernel: str = UNKNOWN
    flashinfer: str = UNKNOWN
    simulated: bool = False

    def as_properties(self) -> dict[str, str]:
        """The ``stack.*`` JUnit properties, every value a string."""
        out: dict[str, str] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool):
                text = "true" if value else "false"
            else:
                text = str(value).strip() if value is not None else ""
                text = text or UNKNOWN
            out[f"stack.{f.name}"] = text
        return out

    def value(self, key: str) -> str:
        """One piece as a string (``simulated`` as ``true``/``false``); accepts aliases."""
        key = _canonical_key(key)
        return self.as_properties()[f"stack.{key}"]


# ---------------------------------------------------------------- this box


@functools.lru_cache(maxsize=1)
def detect_stack() -> Stack:
    """Measure this box's stack (cached for the process). Never raises."""
    return _detect_uncached()


def _detect_uncached() -> Stack:
    hw: dict[str, Any] = {}
    try:
        hw = probes.nvml_facts()
    except Exception:
        hw = {}
    if any(hw.get(k, UNKNOWN) == UNKNOWN for k in ("gpu", "gpu_count", "sm", "driver", "cuda", "interconnect")):
        try:
            smi = probes.smi_facts()
        except Exception:
            smi = {}
        for k, v in smi.items():
            if hw.get(k, UNKNOWN) == UNKNOWN:
                hw[k] = v
    torch_version = probes.dist_version("torch")
    cuda = hw.get("cuda", UNKNOWN)
    nccl = UNKNOWN
    torch_facts: dict[str, str] = {}
    if torch_version != UNKNOWN:
        torch_facts = probes.torch_facts()
        nccl = torch_facts.get("nccl", UNKNOWN)
        if cuda == UNKNOWN:
            cuda = torch_facts.get("cuda", UNKNOWN)
    if nccl == UNKNOWN:
        nccl = probes.dist_version("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")
    return Stack(
        gpu=str(hw.get("gpu", UNKNOWN)),
        gpu_count=hw.get("gpu_count", UNKNOWN),
        sm=str(hw.get("sm", UNKNOWN)),
        interconnect=str(hw.get("interconnect", UNKNOWN)),
        driver=str(hw.get("driver", UNKNOWN)),
        cuda=cuda,
        torch=torch_version,
        nccl=nccl,
        sglang=probes.dist_version("sglang"),
        sgl_kernel=probes.dist_version("sglang-kernel", "sgl-kernel"),
        flashinfer=probes.dist_version("flashinfer-python", "flashinfer"),
        simulated=False,
    )


#: the pieces of a stack that belong to a Python environment (the rest are the box's: GPUs, driver, CUDA)
ENVIRONMENT_KEYS = ("torch", "nccl", "sglang", "sgl_kernel", "flashinfer")


def detect_stack_in(python: str = "", env: Mapping[str, str] | None = None, *, box: Stack | None = None) -> Stack:
    """The stack a server started with ``python`` and environment ``env`` runs on (a stack-pair candidate's
    ``python=`` or ``env.PYTHONPATH=``): the box's GPUs, driver and CUDA (``box``, default :func:`detect_stack`),
    and the software of that environment (:data:`ENVIRONMENT_KEYS`) as its own interpreter finds it, asked in one
    subprocess (:func:`perfgate.stack.probes.environment_facts`). Cached per (python, env, box). Never raises:
    what the probe cannot find is ``"unknown"``."""
    items = tuple(sorted((env if env is not None else os.environ).items()))
    return _stack_in(python or sys.executable, items, box or detect_stack())


@functools.lru_cache(maxsize=16)
def _stack_in(python: str, env: tuple[tuple[str, str], ...], box: Stack) -> Stack:
    facts = probes.environment_facts(python, dict(env))
    cuda = box.cuda if box.cuda != UNKNOWN else facts.get("cuda", UNKNOWN)
    found: dict[str, Any] = {k: facts.get(k, UNKNOWN) for k in ENVIRONMENT_KEYS}
    return replace(box, cuda=cuda, **found)


# ---------------------------------------------------------------- simulated stacks


def simulated_stack(hardware_file: Path, overrides: Mapping[str, str] | None = None) -> Stack:
    """The stack described by a simulated box's TOML, with ``KEY=VER`` overrides; simulated=True.

    The file has ``[hardware]`` (gpu, count, sm, interconnect, driver) and ``[stack]``
    (cuda, torch, nccl, sglang, sgl_kernel, flashinfer); missing keys are ``unknown``.
    """
    path = Path(hardware_file)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: simulated hardware file not found; "
                          "fix: pass an existing fixtures/sim/*.toml") from None
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: cannot read simulated hardware file: {e}") from None
    hw = data.get("hardware", {})
    st = data.get("stack", {})
    if not isinstance(hw, dict) or not isinstance(st, dict):
        raise ConfigError(f"{path}: [hardware] and [stack] must be tables")

    def s(table: Mapping[str, Any], key: str) -> str:
        v = table.get(key)
        if v is None or (isinstance(v, str) and not v.strip()):
            return UNKNOWN
        if isinstance(v, float):
            return f"{v:g}" if key != "sm" else f"{v:.1f}"
        return str(v).strip()

    count_raw = hw.get("count", hw.get("gpu_count"))
    count: int | str = UNKNOWN
    if isinstance(count_raw, int) and not isinstance(count_raw, bool):
        count = count_raw
    elif isinstance(count_raw, str) and count_raw.strip().isdigit():
        count = int(count_raw)
    stack = Stack(
        gpu=s(hw, "gpu"),
        gpu_count=count,
        sm=s(hw, "sm"),
        interconnect=s(hw, "interconnect").lower(),
        driver=s(hw, "driver"),
        cuda=s(st, "cuda"),
        torch=s(st, "torch"),
        nccl=s(st, "nccl"),
        sglang=s(st, "sglang"),
        sgl_kernel=s(st, "sgl_kernel") if "sgl_kernel" in st else s(st, "sgl-kernel"),
        flashinfer=s(st, "flashinfer"),
        simulated=True,
    )
    return apply_overrides(stack, overrides or {})


def apply_overrides(stack: Stack, overrides: Mapping[str, str]) -> Stack:
    """A copy of ``stack`` with pieces replaced (keys as in :func:`parse_overrides`)."""
    changes: dict[str, Any] = {}
    for raw_key, value in overrides.items():
        key = _canonical_key(raw_key)
        if key not in OVERRIDE_KEYS:
            raise ConfigError(
                f"stack override {raw_key!r}: unknown key; fix: use one of {', '.join(OVERRIDE_KEYS)}"
            )
        if key == "gpu_count":
            text = str(value).strip()
            if not text.isdigit():
                raise ConfigError(f"stack override gpu_count={value!r}: expected a whole number")
            changes[key] = int(text)
        elif key == "interconnect":
            changes[key] = str(value).strip().lower()
        else:
            changes[key] = str(value).strip()
    return replace(stack, **changes)


def parse_overrides(text: str) -> dict[str, str]:
    """Parse ``"flashinfer=0.8.0,cuda=13.1"`` into ``{"flashinfer": "0.8.0", "cuda": "13.1"}``.

    Keys are stack pieces (``sgl-kernel`` and ``sgl_kernel`` both work); an empty string gives
    ``{}``. Raises :class:`ConfigError` naming the bad item and the fix. The items are
    :func:`perfgate.versions.key_versions`'; this checks their keys and versions.
    """
    out: dict[str, str] = {}
    for item, key, value in key_versions(text, bad=lambda item: ConfigError(
            f"stack override {item!r}: expected KEY=VERSION; fix: e.g. 'flashinfer=0.8.0,cuda=13.1'")):
        canon = _canonical_key(key)
        if canon not in OVERRIDE_KEYS:
            raise ConfigError(
                f"stack override {item!r}: unknown key {key!r}; fix: use one of {', '.join(OVERRIDE_KEYS)}"
            )
        if not value or any(c.isspace() for c in value) or "=" in value:
            raise ConfigError(f"stack override {item!r}: empty or malformed value; fix: KEY=VERSION, no spaces")
        if canon in VERSION_KEYS and canon != "gpu_count" and not is_version(value):
            raise ConfigError(
                f"stack override {item!r}: {value!r} is not a version (PEP 440); fix: e.g. {key}=0.8.0"
            )
        if canon == "gpu_count" and not value.isdigit():
            raise ConfigError(f"stack override {item!r}: gpu_count must be a whole number")
        if canon in out:
            raise ConfigError(f"stack override {item!r}: {key!r} given twice")
        out[canon] = value
    return out


def _canonical_key(key: str) -> str:
    k = key.strip().lower()
    k = _ALIASES.get(k, k)
    return k.replace("-", "_")

"""The software/hardware stack a run happened on, and stack conditions over it.

A :class:`Stack` is recorded as suite-level JUnit properties and on every testcase
(``stack.gpu``, ``stack.cuda``, ...), so merged reports from several boxes stay
self-describing. Every piece that cannot be found is the string ``"unknown"``; detection
never raises.

Detection (:func:`detect_stack`) asks NVML (nvidia-ml-py) for GPU name, count, compute
capability, driver, the driver's CUDA version and NVLink state, and falls back to
``nvidia-smi``. Package versions come from ``importlib.metadata``. The NCCL version comes
from torch, asked in a short subprocess so the pytest process never imports torch.

Stack conditions (:func:`condition_holds`) are what expectations use to say "this xfail
holds only while ``flashinfer < 0.8``"::

    flashinfer < 0.8
    sm == 12.0 and interconnect == pcie
    sglang >= 0.5.18 and gpu == "NVIDIA RTX PRO 6000 Blackwell Server Edition"

Versions compare with :class:`packaging.version.Version`, ignoring local labels
(``2.13.0+cpu`` equals ``2.13.0``); ``gpu`` and ``interconnect`` compare as
case-insensitive strings (``==``/``!=`` only); an ``unknown`` piece never satisfies any
comparison, ``!=`` included.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from perfgate.errors import ConfigError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

UNKNOWN = "unknown"

#: Stack pieces that are versions (ordered comparisons allowed).
VERSION_KEYS = ("gpu_count", "sm", "driver", "cuda", "torch", "nccl", "sglang", "sgl_kernel", "flashinfer")
#: Stack pieces that are names (``==`` / ``!=`` only).
NAME_KEYS = ("gpu", "interconnect", "simulated")
#: Pieces ``--perfgate-stack-override``-style ``KEY=VER`` overrides may set.
OVERRIDE_KEYS = ("gpu", "gpu_count", "sm", "interconnect", "driver", "cuda", "torch", "nccl", "sglang",
                 "sgl_kernel", "flashinfer")
_ALIASES = {"sgl-kernel": "sgl_kernel", "sglang-kernel": "sgl_kernel", "sglang_kernel": "sgl_kernel",
            "gpu-count": "gpu_count", "count": "gpu_count", "flashinfer-python": "flashinfer",
            "flashinfer_python": "flashinfer"}

_NCCL_TIMEOUT_S = 30.0
_SMI_TIMEOUT_S = 10.0


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


# ---------------------------------------------------------------- detection


def gpu_visible() -> bool:
    """Whether an NVIDIA GPU is visible to CUDA here (NVML, honouring CUDA_VISIBLE_DEVICES).

    Never raises; fast (no subprocess, no torch).
    """
    try:
        import pynvml
    except Exception:
        return False
    try:
        pynvml.nvmlInit()
    except Exception:
        return False
    try:
        return len(_visible_handles(pynvml)) > 0
    except Exception:
        return False
    finally:
        _nvml_shutdown(pynvml)


@functools.lru_cache(maxsize=1)
def detect_stack() -> Stack:
    """Measure this box's stack (cached for the process). Never raises."""
    return _detect_uncached()


def _detect_uncached() -> Stack:
    hw: dict[str, Any] = {}
    try:
        hw = _detect_nvml()
    except Exception:
        hw = {}
    if any(hw.get(k, UNKNOWN) == UNKNOWN for k in ("gpu", "gpu_count", "sm", "driver", "cuda", "interconnect")):
        try:
            smi = _detect_nvidia_smi()
        except Exception:
            smi = {}
        for k, v in smi.items():
            if hw.get(k, UNKNOWN) == UNKNOWN:
                hw[k] = v
    torch_version = _dist_version("torch")
    cuda = hw.get("cuda", UNKNOWN)
    nccl = UNKNOWN
    torch_facts: dict[str, str] = {}
    if torch_version != UNKNOWN:
        torch_facts = _torch_facts()
        nccl = torch_facts.get("nccl", UNKNOWN)
        if cuda == UNKNOWN:
            cuda = torch_facts.get("cuda", UNKNOWN)
    if nccl == UNKNOWN:
        nccl = _dist_version("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")
    return Stack(
        gpu=str(hw.get("gpu", UNKNOWN)),
        gpu_count=hw.get("gpu_count", UNKNOWN),
        sm=str(hw.get("sm", UNKNOWN)),
        interconnect=str(hw.get("interconnect", UNKNOWN)),
        driver=str(hw.get("driver", UNKNOWN)),
        cuda=cuda,
        torch=torch_version,
        nccl=nccl,
        sglang=_dist_version("sglang"),
        sgl_kernel=_dist_version("sglang-kernel", "sgl-kernel"),
        flashinfer=_dist_version("flashinfer-python", "flashinfer"),
        simulated=False,
    )


def _dist_version(*names: str) -> str:
    for name in names:
        try:
            v = importlib.metadata.version(name)
        except Exception:
            continue
        if v:
            return v
    return UNKNOWN


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace").strip()
    return str(value).strip()


def _nvml_shutdown(pynvml: Any) -> None:
    try:
        pynvml.nvmlShutdown()
    except Exception:
        pass


def _visible_handles(pynvml: Any) -> list[Any]:
    """NVML handles of the devices CUDA would see, in CUDA_VISIBLE_DEVICES order."""
    count = int(pynvml.nvmlDeviceGetCount())
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    spec = os.environ.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return handles
    uuids: list[str] = []
    for h in handles:
        try:
            uuids.append(_text(pynvml.nvmlDeviceGetUUID(h)))
        except Exception:
            uuids.append("")
    return [handles[i] for i in visible_indices(spec, count, uuids)]


def visible_indices(spec: str, count: int, uuids: list[str] | None = None) -> list[int]:
    """Physical device indices a CUDA_VISIBLE_DEVICES value selects (CUDA's rules).

    Entries are indices or (prefixes of) ``GPU-`` UUIDs; CUDA stops at the first entry that
    names no device, and a duplicate hides everything.
    """
    uuids = uuids or []
    out: list[int] = []
    for raw in spec.split(","):
        entry = raw.strip()
        if not entry:
            break
        idx: int | None = None
        if re.fullmatch(r"-?\d+", entry):
            n = int(entry)
            idx = n if 0 <= n < count else None
        elif entry.upper().startswith(("GPU-", "MIG-")):
            matches = [i for i, u in enumerate(uuids) if u and u.upper().startswith(entry.upper())]
            idx = matches[0] if len(matches) == 1 else None
        if idx is None:
            break
        if idx in out:
            return []
        out.append(idx)
    return out


def _detect_nvml() -> dict[str, Any]:
    import pynvml

    pynvml.nvmlInit()
    try:
        handles = _visible_handles(pynvml)
        out: dict[str, Any] = {"gpu_count": len(handles)}
        try:
            out["driver"] = _text(pynvml.nvmlSystemGetDriverVersion())
        except Exception:
            pass
        try:
            out["cuda"] = cuda_version_from_int(int(pynvml.nvmlSystemGetCudaDriverVersion()))
        except Exception:
            pass
        if not handles:
            return out
        first = handles[0]
        try:
            out["gpu"] = _text(pynvml.nvmlDeviceGetName(first))
        except Exception:
            pass
        try:
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(first)
            out["sm"] = f"{int(major)}.{int(minor)}"
        except Exception:
            pass
        out["interconnect"] = _nvml_interconnect(pynvml, handles)
        return out
    finally:
        _nvml_shutdown(pynvml)


def _nvml_interconnect(pynvml: Any, handles: list[Any]) -> str:
    """``nvlink`` if any visible GPU has an active NVLink; ``pcie`` if NVML answered for none."""
    max_links = int(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18))
    enabled = getattr(pynvml, "NVML_FEATURE_ENABLED", 1)
    not_supported = getattr(pynvml, "NVML_ERROR_NOT_SUPPORTED", 3)
    invalid_arg = getattr(pynvml, "NVML_ERROR_INVALID_ARGUMENT", 2)
    answered = False
    for h in handles:
        for link in range(max_links):
            try:
                state = pynvml.nvmlDeviceGetNvLinkState(h, link)
            except Exception as e:
                code = getattr(e, "value", None)
                if code in (not_supported, invalid_arg):
                    answered = True  # this link (or NVLink altogether) does not exist here
                    if code == not_supported:
                        break
                    continue
                continue
            answered = True
            if state == enabled:
                return "nvlink"
    return "pcie" if answered else UNKNOWN


def cuda_version_from_int(value: int) -> str:
    """``12080`` -> ``"12.8"`` (NVML / cudaDriverGetVersion encoding)."""
    if value <= 0:
        return UNKNOWN
    major, rest = divmod(value, 1000)
    return f"{major}.{rest // 10}"


def _run_smi(args: list[str]) -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        proc = subprocess.run(
            [exe, *args], capture_output=True, text=True, timeout=_SMI_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout


def _detect_nvidia_smi() -> dict[str, Any]:
    out: dict[str, Any] = {}
    query = _run_smi(["--query-gpu=index,name,compute_cap,driver_version", "--format=csv,noheader"])
    if query is not None:
        out.update(parse_query_gpu(query, os.environ.get("CUDA_VISIBLE_DEVICES")))
    header = _run_smi([])
    if header is not None:
        m = re.search(r"CUDA Version:\s*([0-9]+(?:\.[0-9]+)*)", header)
        if m:
            out["cuda"] = m.group(1)
    topo = _run_smi(["topo", "-m"])
    if topo is not None:
        ic = parse_topo_matrix(topo)
        if ic != UNKNOWN:
            out["interconnect"] = ic
    return out


def parse_query_gpu(text: str, cuda_visible_devices: str | None = None) -> dict[str, Any]:
    """Parse ``nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv,noheader``."""
    rows: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 4 and parts[0].isdigit():
            rows.append(parts)
    if cuda_visible_devices is not None:
        idx = visible_indices(cuda_visible_devices, len(rows))
        rows = [rows[i] for i in idx]
    out: dict[str, Any] = {"gpu_count": len(rows)}
    if rows:
        _, name, cap, driver = rows[0][:4]
        if name and "[" not in name:
            out["gpu"] = name
        if re.fullmatch(r"\d+\.\d+", cap):
            out["sm"] = cap
        if driver and "[" not in driver:
            out["driver"] = driver
    return out


_TOPO_PCIE = {"PIX", "PXB", "PHB", "NODE", "SYS", "SOC"}


def parse_topo_matrix(text: str) -> str:
    """``nvlink`` / ``pcie`` / ``unknown`` from the GPU-to-GPU cells of ``nvidia-smi topo -m``."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return UNKNOWN
    header = lines[0].split()
    gpu_cols = [i for i, h in enumerate(header) if re.fullmatch(r"GPU\d+", h)]
    if not gpu_cols:
        return UNKNOWN
    seen_pcie = False
    for ln in lines[1:]:
        cells = ln.split()
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
            continue
        values = cells[1:]
        for col in gpu_cols:
            if col >= len(values):
                continue
            cell = values[col].upper()
            if re.fullmatch(r"NV\d+", cell):
                return "nvlink"
            if cell in _TOPO_PCIE:
                seen_pcie = True
    return "pcie" if seen_pcie else UNKNOWN


_TORCH_PROBE = r"""
import json, torch
out = {"cuda": torch.version.cuda or ""}
try:
    v = torch.cuda.nccl.version()
    out["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
except Exception:
    pass
print(json.dumps(out))
"""


def _torch_facts() -> dict[str, str]:
    """CUDA runtime and NCCL versions from torch; in-process only if torch is already imported."""
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        out: dict[str, str] = {}
        try:
            if torch.version.cuda:
                out["cuda"] = str(torch.version.cuda)
        except Exception:
            pass
        try:
            v = torch.cuda.nccl.version()
            out["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
        except Exception:
            pass
        return out
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _TORCH_PROBE],
            capture_output=True, text=True, timeout=_NCCL_TIMEOUT_S, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    if proc.returncode != 0:
        return {}
    import json

    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}
    return {k: str(v) for k, v in data.items() if v}


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
        raise ConfigError(f"{path}: simulated hardware file not found; fix: pass an existing fixtures/sim/*.toml") from None
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
    ``{}``. Raises :class:`ConfigError` naming the bad item and the fix.
    """
    out: dict[str, str] = {}
    if not text or not text.strip():
        return out
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise ConfigError(
                f"stack override {item!r}: expected KEY=VERSION; fix: e.g. 'flashinfer=0.8.0,cuda=13.1'"
            )
        key, _, value = item.partition("=")
        key, value = key.strip(), value.strip()
        canon = _canonical_key(key)
        if canon not in OVERRIDE_KEYS:
            raise ConfigError(
                f"stack override {item!r}: unknown key {key!r}; fix: use one of {', '.join(OVERRIDE_KEYS)}"
            )
        if not value or any(c.isspace() for c in value) or "=" in value:
            raise ConfigError(f"stack override {item!r}: empty or malformed value; fix: KEY=VERSION, no spaces")
        if canon in VERSION_KEYS and canon != "gpu_count" and not _is_version(value):
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


def _is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


# ---------------------------------------------------------------- conditions

_OPS = ("<=", ">=", "==", "!=", "<", ">")
_CLAUSE = re.compile(
    r"""\s*(?P<key>[A-Za-z_][A-Za-z0-9_-]*)\s*
        (?P<op><=|>=|==|!=|<|>)\s*
        (?P<val>"[^"]*"|'[^']*'|[^\s"'<>=!]+(?:[ \t]+(?![Aa][Nn][Dd]\b)[^\s"'<>=!]+)*)\s*""",
    re.VERBOSE,
)
_CONDITION_HELP = (
    "write clauses 'KEY OP VALUE' joined by 'and', e.g. 'flashinfer < 0.8 and interconnect == pcie'; "
    f"KEY one of {', '.join(VERSION_KEYS + NAME_KEYS)}; OP one of {' '.join(_OPS)}"
)


@dataclass(frozen=True, kw_only=True)
class Clause:
    """One parsed ``KEY OP VALUE`` clause of a stack condition."""

    key: str
    op: str
    value: str


def parse_condition(expr: str) -> tuple[Clause, ...]:
    """Parse a stack condition into clauses; raises :class:`ConfigError` naming the fix."""
    if not isinstance(expr, str) or not expr.strip():
        raise ConfigError(f"stack condition {expr!r} is empty; fix: {_CONDITION_HELP}")
    clauses: list[Clause] = []
    pos = 0
    text = expr
    while True:
        m = _CLAUSE.match(text, pos)
        if m is None:
            raise ConfigError(
                f"stack condition {expr!r}: cannot parse at {text[pos:].strip()[:40]!r}; fix: {_CONDITION_HELP}"
            )
        raw_key, op, val = m.group("key"), m.group("op"), m.group("val")
        key = _canonical_key(raw_key)
        if key not in VERSION_KEYS and key not in NAME_KEYS:
            raise ConfigError(f"stack condition {expr!r}: unknown key {raw_key!r}; fix: {_CONDITION_HELP}")
        if val[:1] in "\"'":
            val = val[1:-1]
        val = val.strip()
        if not val:
            raise ConfigError(f"stack condition {expr!r}: empty value for {raw_key!r}; fix: {_CONDITION_HELP}")
        if key in NAME_KEYS:
            if op not in ("==", "!="):
                raise ConfigError(
                    f"stack condition {expr!r}: {raw_key!r} is a name, only == and != apply; "
                    f"fix: e.g. '{raw_key} == {val}'"
                )
            if key == "simulated" and val.lower() not in ("true", "false"):
                raise ConfigError(f"stack condition {expr!r}: simulated is true or false")
        elif not _is_version(val):
            if re.search(r"\s(or|and)\s", f" {val} ", re.IGNORECASE):
                raise ConfigError(
                    f"stack condition {expr!r}: only 'and' joins clauses (no 'or', no parentheses); "
                    f"fix: {_CONDITION_HELP}"
                )
            example = {"sm": "9.0", "gpu_count": "8", "driver": "580.95.05"}.get(key, "0.8.0")
            raise ConfigError(
                f"stack condition {expr!r}: {val!r} is not a version for {raw_key!r}; "
                f"fix: e.g. '{raw_key} >= {example}'"
            )
        clauses.append(Clause(key=key, op=op, value=val))
        pos = m.end()
        if pos >= len(text):
            break
        m_and = re.compile(r"and\b", re.IGNORECASE).match(text, pos)
        if m_and is None:
            raise ConfigError(
                f"stack condition {expr!r}: expected 'and' at {text[pos:].strip()[:40]!r}; fix: {_CONDITION_HELP}"
            )
        pos = m_and.end()
    return tuple(clauses)


def _compare(a: Any, op: str, b: Any) -> bool:
    if op == "==":
        return bool(a == b)
    if op == "!=":
        return bool(a != b)
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


def clause_holds(clause: Clause, stack: Stack) -> bool:
    """Whether one clause holds; an unknown or unparsable stack piece never does."""
    actual = stack.value(clause.key)
    if actual.strip().lower() in ("", UNKNOWN):
        return False
    if clause.key in NAME_KEYS:
        return _compare(actual.strip().lower(), clause.op, clause.value.strip().lower())
    try:
        have = Version(Version(actual.strip()).public)
    except InvalidVersion:
        return False
    want = Version(Version(clause.value).public)
    return _compare(have, clause.op, want)


def condition_holds(expr: str, stack: Stack) -> bool:
    """Whether every clause of ``expr`` holds for ``stack`` (see the module docstring).

    Raises :class:`ConfigError` for a malformed expression.
    """
    return all(clause_holds(c, stack) for c in parse_condition(expr))

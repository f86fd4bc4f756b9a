"""Probes of this box's stack: NVML, nvidia-smi, torch and the installed packages.

:func:`perfgate.stack.detect_stack` asks NVML (nvidia-ml-py) for GPU name, count, compute capability, driver,
the driver's CUDA version and NVLink state, and falls back to ``nvidia-smi``. Package versions
come from ``importlib.metadata``. The NCCL version comes from torch, asked in a short
subprocess so the pytest process never imports torch. Which GPUs count is
:mod:`perfgate.host.gpu`'s (``CUDA_VISIBLE_DEVICES``).

:func:`environment_facts` asks another environment (an interpreter and its environment variables, a stack-pair
candidate's ``python=`` or ``env.PYTHONPATH=``) for its software in one subprocess of that interpreter: the
versions of the SGLang, kernel package, FlashInfer and torch it would import, and torch's CUDA and NCCL.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from perfgate.host import gpu

#: what a probe reports for a piece it cannot find (every field of a Stack starts as this)
UNKNOWN = "unknown"
_NCCL_TIMEOUT_S = 30.0
_SMI_TIMEOUT_S = 10.0


def dist_version(*names: str) -> str:
    for name in names:
        try:
            v = importlib.metadata.version(name)
        except Exception:
            continue
        if v:
            return v
    return UNKNOWN


def nvml_facts() -> dict[str, Any]:
    import pynvml

    pynvml.nvmlInit()
    try:
        handles = gpu.visible_handles(pynvml)
        out: dict[str, Any] = {"gpu_count": len(handles)}
        try:
            out["driver"] = gpu.text(pynvml.nvmlSystemGetDriverVersion())
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
            out["gpu"] = gpu.text(pynvml.nvmlDeviceGetName(first))
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
        gpu.shutdown(pynvml)


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


def smi_facts() -> dict[str, Any]:
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
        idx = gpu.visible_indices(cuda_visible_devices, len(rows))
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


def torch_facts() -> dict[str, str]:
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


#: run by the probed environment's own interpreter (``python -c``); self-contained: perfgate need not be
#: importable there. Each version is the one of the package that interpreter would import: the dist-info next to
#: the module it finds first on its path, else the ``__version__`` its files write (nothing of it is imported but
#: torch, for its CUDA and NCCL versions).
_ENV_PROBE = r"""
import importlib.metadata as md, importlib.util as iu, json, os, re, sys
def canon(n):
    return re.sub(r"[-_.]+", "-", n or "").lower()
def version_of(module, *dists):
    try:
        spec = iu.find_spec(module)
    except Exception:
        spec = None
    if spec is None:
        return ""
    where = list(spec.submodule_search_locations or []) or ([os.path.dirname(spec.origin)] if spec.origin else [])
    if where:
        parent = os.path.dirname(where[0].rstrip(os.sep)) if spec.submodule_search_locations else where[0]
        try:
            for d in md.distributions(path=[parent]):
                if canon(d.metadata["Name"]) in dists:
                    return d.version
        except Exception:
            pass
        for f in ("version.py", "_version.py", "__init__.py"):
            try:
                text = open(os.path.join(where[0], f), encoding="utf-8").read()
            except OSError:
                continue
            m = re.search(r"__version__\s*(?::\s*str\s*)?=\s*(?:version\s*=\s*)?['\"]([^'\"]+)['\"]", text)
            if m:
                return m.group(1)
    for n in dists:
        try:
            return md.version(n)
        except Exception:
            pass
    return ""
out = {"python": sys.executable, "sglang": version_of("sglang", "sglang"),
       "sgl_kernel": version_of("sgl_kernel", "sglang-kernel", "sgl-kernel"),
       "flashinfer": version_of("flashinfer", "flashinfer-python", "flashinfer"),
       "torch": version_of("torch", "torch")}
if out["torch"]:
    try:
        import torch
        out["cuda"] = torch.version.cuda or ""
        v = torch.cuda.nccl.version()
        out["nccl"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception:
        pass
if not out.get("nccl"):
    for n in ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11"):
        try:
            out["nccl"] = md.version(n)
            break
        except Exception:
            pass
print(json.dumps(out))
"""
_ENV_TIMEOUT_S = 60.0


def environment_facts(python: str = "", env: Mapping[str, str] | None = None,
                      timeout_s: float = _ENV_TIMEOUT_S) -> dict[str, str]:
    """The software of another environment: ``python`` (default: this interpreter) run with ``env`` (default:
    this process's), asked in one subprocess. Keys ``sglang``, ``sgl_kernel``, ``flashinfer``, ``torch``,
    ``cuda`` (torch's), ``nccl`` where found, ``python`` (the interpreter that answered); ``{"error": why}`` when
    the probe could not run. Never raises."""
    exe = python or sys.executable
    try:
        proc = subprocess.run([exe, "-c", _ENV_PROBE], capture_output=True, text=True, timeout=timeout_s,
                              check=False, stdin=subprocess.DEVNULL, env=None if env is None else dict(env))
    except subprocess.TimeoutExpired:
        return {"error": f"the stack probe in {exe} timed out after {timeout_s:.0f} s"}
    except OSError as e:
        return {"error": f"cannot run {exe}: {e}"}
    import json

    lines = proc.stdout.strip().splitlines()
    try:
        data = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"the stack probe in {exe} failed (exit {proc.returncode}): {tail}"}
    return {str(k): str(v) for k, v in data.items() if v}

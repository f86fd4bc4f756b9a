"""Probes of this box's stack: NVML, nvidia-smi, torch and the installed packages.

:func:`perfgate.stack.detect_stack` asks NVML (nvidia-ml-py) for GPU name, count, compute capability, driver,
the driver's CUDA version and NVLink state, and falls back to ``nvidia-smi``. Package versions
come from ``importlib.metadata``. The NCCL version comes from torch, asked in a short
subprocess so the pytest process never imports torch. Which GPUs count is
:mod:`perfgate.serving.gpu`'s (``CUDA_VISIBLE_DEVICES``).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from typing import Any

from perfgate.serving import gpu

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

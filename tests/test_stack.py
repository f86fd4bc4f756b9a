"""perfgate.stack: fingerprint, detection, GPU visibility, simulated stacks, overrides, stack conditions."""

from __future__ import annotations

import os
import stat
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import Version

import perfgate.stack
from perfgate.errors import ConfigError
from perfgate.host.gpu import gpu_visible, visible_indices
from perfgate.sim.hardware import parse_stack_overrides
from perfgate.stack import NAME_KEYS, VERSION_KEYS, Stack, detect_stack, parse_overrides, probes, simulated_stack
from perfgate.stack.conditions import condition_holds, parse_condition
from perfgate.stack.probes import cuda_version_from_int, parse_query_gpu, parse_topo_matrix
from perfgate.versions import key_versions

ROOT = Path(__file__).resolve().parent.parent
SEED_BOX = ROOT / "fixtures" / "sim" / "rtxpro6000-x8-pcie.toml"
CONTRACT_KEYS = {f"stack.{k}" for k in ("gpu", "gpu_count", "sm", "interconnect", "driver", "cuda", "torch", "nccl",
                                        "sglang", "sgl_kernel", "flashinfer", "simulated")}

SEED = Stack(gpu="NVIDIA RTX PRO 6000 Blackwell Server Edition", gpu_count=8, sm="12.0", interconnect="pcie",
             driver="580.95.05", cuda="12.8", torch="2.9.1+cu128", nccl="2.27.3", sglang="0.5.17",
             sgl_kernel="0.4.5", flashinfer="0.6.15.post1")


# ---------------------------------------------------------------- properties


def test_properties_follow_the_junit_contract() -> None:
    props = Stack().as_properties()
    assert set(props) == CONTRACT_KEYS
    assert props["stack.simulated"] == "false"
    assert {v for k, v in props.items() if k != "stack.simulated"} == {"unknown"}
    props = SEED.as_properties()
    assert props["stack.gpu_count"] == "8" and props["stack.sm"] == "12.0" and props["stack.torch"] == "2.9.1+cu128"
    assert all(isinstance(v, str) and v for v in props.values())
    assert Stack(gpu="", driver="  ").as_properties()["stack.gpu"] == "unknown"


def test_detection_never_raises_and_says_unknown() -> None:
    assert isinstance(gpu_visible(), bool)
    s = detect_stack()
    assert s is detect_stack()  # cached
    assert set(s.as_properties()) == CONTRACT_KEYS and s.simulated is False
    if not gpu_visible():
        assert s.gpu_count in ("unknown", 0)


# ---------------------------------------------------------------- NVML (a stand-in module) and nvidia-smi


class _NvmlError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


def fake_pynvml(*, names: list[str], nvlink: bool | None, cap: tuple[int, int] = (12, 0)) -> Any:
    m: Any = types.ModuleType("pynvml")  # a stand-in pynvml (Any: the NVML functions are set on it below)
    m.NVML_FEATURE_ENABLED = 1
    m.NVML_ERROR_NOT_SUPPORTED = 3
    m.NVML_ERROR_INVALID_ARGUMENT = 2
    m.NVML_NVLINK_MAX_LINKS = 18
    m.nvmlInit = lambda: None
    m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetCount = lambda: len(names)
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetUUID = lambda h: f"GPU-{h:04d}-aaaa"
    m.nvmlDeviceGetName = lambda h: names[h].encode()
    m.nvmlDeviceGetCudaComputeCapability = lambda h: cap
    m.nvmlSystemGetDriverVersion = lambda: "580.95.05"
    m.nvmlSystemGetCudaDriverVersion = lambda: 12080

    def link_state(h: int, link: int) -> int:
        if nvlink is None:
            raise _NvmlError(3)  # NVML_ERROR_NOT_SUPPORTED: no NVLink on this GPU
        if link >= 4:
            raise _NvmlError(2)
        return 1 if nvlink else 0

    m.nvmlDeviceGetNvLinkState = link_state
    return m


@pytest.mark.parametrize(("nvlink", "expected"), [(True, "nvlink"), (False, "pcie"), (None, "pcie")])
def test_nvml_facts(monkeypatch: pytest.MonkeyPatch, nvlink: bool | None, expected: str) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(names=["NVIDIA RTX PRO 6000"] * 8, nvlink=nvlink))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    hw = probes.nvml_facts()
    assert hw == {"gpu_count": 8, "driver": "580.95.05", "cuda": "12.8", "gpu": "NVIDIA RTX PRO 6000",
                  "sm": "12.0", "interconnect": expected}
    assert gpu_visible()


def test_nvml_honours_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(names=["A", "B", "C", "D"], nvlink=True))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    hw = probes.nvml_facts()
    assert (hw["gpu_count"], hw["gpu"]) == (2, "C")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert not gpu_visible()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert not gpu_visible()


def test_visible_indices_follow_cuda_rules() -> None:
    uuids = ["GPU-0a", "GPU-1b", "GPU-2c"]
    assert visible_indices("0,2", 3) == [0, 2]
    assert visible_indices("1,7,2", 3) == [1]  # CUDA stops at the first invalid entry
    assert visible_indices("GPU-1", 3, uuids) == [1]
    assert visible_indices("0,0", 3) == []
    assert visible_indices("", 3) == []


TOPO_NVLINK = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV18\tNV18\tNV18\tPXB\t0-55\t0\t\tN/A
GPU1\tNV18\t X \tNV18\tNV18\tPXB\t0-55\t0\t\tN/A
GPU2\tNV18\tNV18\t X \tNV18\tSYS\t56-111\t1\t\tN/A
GPU3\tNV18\tNV18\tNV18\t X \tSYS\t56-111\t1\t\tN/A
NIC0\tPXB\tPXB\tSYS\tSYS\t X

Legend:
  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks
"""
TOPO_PCIE = """\
\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity
GPU0\t X \tNODE\tSYS\t0-63\t0
GPU1\tNODE\t X \tSYS\t0-63\t0
GPU2\tSYS\tSYS\t X \t64-127\t1

Legend:
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def test_topology_matrix() -> None:
    assert parse_topo_matrix(TOPO_NVLINK) == "nvlink"
    assert parse_topo_matrix(TOPO_PCIE) == "pcie"
    assert parse_topo_matrix("\tGPU0\tCPU Affinity\nGPU0\t X \t0-63\n") == "unknown"
    assert parse_topo_matrix("") == "unknown"


def test_query_gpu_csv() -> None:
    text = "0, NVIDIA H200, 9.0, 580.95.05\n1, NVIDIA H200, 9.0, 580.95.05\n"
    assert parse_query_gpu(text) == {"gpu_count": 2, "gpu": "NVIDIA H200", "sm": "9.0", "driver": "580.95.05"}
    assert parse_query_gpu(text, "1")["gpu_count"] == 1
    assert parse_query_gpu("0, NVIDIA T4, [N/A], 535.54.03\n") == {"gpu_count": 1, "gpu": "NVIDIA T4",
                                                                     "driver": "535.54.03"}


def test_nvidia_smi_fallback_with_a_real_subprocess(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "topo.txt").write_text(TOPO_PCIE)
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  --query-gpu=*) printf '0, NVIDIA RTX PRO 6000 Blackwell Server Edition, 12.0, 580.95.05\\n"
        "1, NVIDIA RTX PRO 6000 Blackwell Server Edition, 12.0, 580.95.05\\n' ;;\n"
        f"  topo) cat {tmp_path / 'topo.txt'} ;;\n"
        "  *) echo '| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05   CUDA Version: 13.0 |' ;;\n"
        "esac\n")
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def no_nvml() -> dict[str, object]:
        raise RuntimeError("NVML Shared Library Not Found")

    monkeypatch.setattr(probes, "nvml_facts", no_nvml)
    monkeypatch.setattr(probes, "torch_facts", dict)
    s = perfgate.stack._detect_uncached()
    assert (s.gpu, s.gpu_count, s.sm, s.driver, s.cuda, s.interconnect) == (
        "NVIDIA RTX PRO 6000 Blackwell Server Edition", 2, "12.0", "580.95.05", "13.0", "pcie")


def test_cuda_version_encoding() -> None:
    assert cuda_version_from_int(12080) == "12.8"
    assert cuda_version_from_int(13010) == "13.1"
    assert cuda_version_from_int(0) == "unknown"


# ---------------------------------------------------------------- simulated stacks and overrides


def test_simulated_stack_from_the_seed_box() -> None:
    s = simulated_stack(SEED_BOX, {})
    assert s.simulated and s.as_properties()["stack.simulated"] == "true"
    assert s.sm == "12.0" and s.interconnect == "pcie" and s.gpu_count == 8
    assert all(v != "" for v in s.as_properties().values())
    up = simulated_stack(SEED_BOX, parse_overrides("flashinfer=0.8.0,cuda=13.1"))
    assert (up.flashinfer, up.cuda, up.sm) == ("0.8.0", "13.1", s.sm)


def test_simulated_stack_tolerates_missing_keys_and_rejects_bad_files(tmp_path: Path) -> None:
    f = tmp_path / "box.toml"
    f.write_text('[hardware]\ngpu = "X"\ncount = 2\nsm = 9.0\n[stack]\nsglang = "0.5.23"\n')
    s = simulated_stack(f, {"sgl-kernel": "0.4.10"})
    assert (s.gpu, s.gpu_count, s.sm, s.sglang, s.sgl_kernel, s.torch) == ("X", 2, "9.0", "0.5.23", "0.4.10",
                                                                            "unknown")
    with pytest.raises(ConfigError, match="not found"):
        simulated_stack(tmp_path / "missing.toml", {})
    f.write_text("[hardware\n")
    with pytest.raises(ConfigError, match="cannot read"):
        simulated_stack(f, {})


def test_parse_overrides() -> None:
    assert parse_overrides("") == {}
    assert parse_overrides(" flashinfer=0.8.0 , cuda=13.1,sgl-kernel=0.4.10,") == {
        "flashinfer": "0.8.0", "cuda": "13.1", "sgl_kernel": "0.4.10"}
    assert parse_overrides("interconnect=nvlink,gpu_count=4") == {"interconnect": "nvlink", "gpu_count": "4"}


@pytest.mark.parametrize(("text", "match"), [
    ("flashinfer", "expected KEY=VERSION"),
    ("flashinfer=", "empty or malformed"),
    ("frobnicator=1.0", "unknown key 'frobnicator'"),
    ("cuda=thirteen", "not a version"),
    ("cuda=13.1,cuda=13.2", "given twice"),
    ("gpu_count=eight", "whole number"),
])
def test_parse_overrides_rejects_with_the_fix(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_overrides(text)


def test_one_reader_of_key_version_lists() -> None:
    """perfgate.versions.key_versions reads every stack override list (the stack's, the simulator's, a candidate's
    ``sim-stack=``): items stripped and in order, a key twice twice, the first item without ``=`` named when reached."""
    assert list(key_versions(" a = 1 ,,b=2=3, a=4")) == [("a = 1", "a", "1"), ("b=2=3", "b", "2=3"), ("a=4", "a", "4")]
    assert list(key_versions(None)) == list(key_versions("  ")) == []
    assert list(key_versions("a=1;b=2", ";")) == [("a=1", "a", "1"), ("b=2", "b", "2")]
    with pytest.raises(ValueError, match="stack override 'b' is not KEY=VERSION"):
        list(key_versions("a=1,b,c"))
    with pytest.raises(ConfigError, match="unknown key 'frobnicator'"):  # the items before a bad one come first
        parse_overrides("frobnicator=1.0,flashinfer")
    assert parse_stack_overrides("cuda=13.0, cuda=13.1") == {"cuda": "13.1"}  # the simulator's: the last wins


# ---------------------------------------------------------------- conditions


@pytest.mark.parametrize(("expr", "holds"), [
    ("flashinfer < 0.8", True),
    ("flashinfer >= 0.6.15", True),
    ("sm == 12.0", True),
    ("sm == 12", True),
    ("sm >= 9.0 and interconnect == pcie", True),
    ("interconnect == PCIe", True),
    ("interconnect != nvlink", True),
    ("sglang >= 0.5.18", False),
    ("torch == 2.9.1", True),  # local labels (+cu128) are ignored
    ("torch < 2.10 AND gpu_count >= 8", True),
    ('gpu == "NVIDIA RTX PRO 6000 Blackwell Server Edition"', True),
    ("gpu == NVIDIA RTX PRO 6000 Blackwell Server Edition and sm == 12.0", True),
    ("simulated == false", True),
    ("sgl-kernel == 0.4.5", True),
])
def test_conditions(expr: str, holds: bool) -> None:
    assert condition_holds(expr, SEED) is holds


def test_unknown_never_satisfies() -> None:
    blank = Stack()
    for expr in ("flashinfer < 0.8", "flashinfer >= 0.8", "interconnect != nvlink", "sm != 9.0", "gpu == unknown"):
        assert condition_holds(expr, blank) is False, expr


@pytest.mark.parametrize(("expr", "match"), [
    ("", "empty"),
    ("flashinfer << 0.8", "cannot parse"),
    ("flashinfer ~= 0.8", "cannot parse"),
    ("cudnn >= 9", "unknown key 'cudnn'"),
    ("interconnect > pcie", "only == and != apply"),
    ("sm == twelve", "not a version"),
    ("sm == 12.0 or sm == 10.0", "only 'and'"),
    ("sm == 12.0 and", "cannot parse"),
    ("sm == 12.0 sm == 10.0", "not a version|expected 'and'"),
])
def test_malformed_conditions_name_the_expression_and_the_fix(expr: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        condition_holds(expr, SEED)
    assert repr(expr) in str(info.value) and "fix" in str(info.value).lower()


_VERSION = st.builds(lambda parts: ".".join(map(str, parts)), st.lists(st.integers(0, 30), min_size=1, max_size=3))
_OP = st.sampled_from(["<", "<=", ">", ">=", "==", "!="])
_VKEY = st.sampled_from(["sm", "cuda", "torch", "nccl", "sglang", "sgl_kernel", "flashinfer", "driver"])


def _reference(have: str, op: str, want: str) -> bool:
    a, b = Version(have), Version(want)
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]


@given(clauses=st.lists(st.tuples(_VKEY, _OP, _VERSION), min_size=1, max_size=4), have=_VERSION,
       spaces=st.sampled_from(["", " ", "  "]))
def test_generated_conditions_agree_with_packaging(clauses: list[tuple[str, str, str]], have: str,
                                                   spaces: str) -> None:
    versions: dict[str, Any] = {k: have for k in ("sm", "cuda", "torch", "nccl", "sglang", "sgl_kernel", "flashinfer",
                                                  "driver")}
    s = Stack(**versions)
    expr = " and ".join(f"{k}{spaces}{op}{spaces}{v}" for k, op, v in clauses)
    assert len(parse_condition(expr)) == len(clauses)
    assert condition_holds(expr, s) is all(_reference(have, op, v) for _, op, v in clauses)
    assert condition_holds(expr, Stack()) is False


@given(text=st.text(max_size=80))
def test_condition_parser_raises_only_config_error(text: str) -> None:
    try:
        result = condition_holds(text, SEED)
    except ConfigError:
        return
    assert isinstance(result, bool)


@given(parts=st.lists(st.sampled_from([*VERSION_KEYS, *NAME_KEYS, "and", "or", "==", "<", ">=", "!=", "0.8", "12.0",
                                       "pcie", '"x y"', "'", "true", "=", "<<"]), max_size=12))
def test_condition_parser_on_token_soup(parts: list[str]) -> None:
    try:
        result = condition_holds(" ".join(parts), SEED)
    except ConfigError:
        return
    assert isinstance(result, bool)

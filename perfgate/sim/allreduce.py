"""All-reduce latency model: the backends SGLang selects between, and NCCL's tuning knobs.

One all-reduce of ``B`` bytes on ``n`` ranks over one backend/protocol costs (microseconds)::

    base_us + per_peer_us * (n - 1) + B * traffic(n) / (gbps * 1000)

``traffic(n)`` is ``2 (n - 1) / n`` for ring-style NCCL and ``n - 1`` for one-shot backends
(custom all-reduce, FlashInfer PCIe IPC, torch symmetric memory, MSCCL++), which read every
peer's buffer. The constants come from the hardware file's ``[cost]`` table.

SGLang's run-time selection order (``GroupCoordinator``): custom all-reduce, PCIe IPC, MSCCL++,
torch symmetric memory, then NCCL; each backend only takes messages up to its ``max_kb``.
NCCL itself picks the fastest allowed (algorithm, protocol) pair; the environment
(``NCCL_ALGO``, ``NCCL_PROTO``, ``NCCL_MIN_NCHANNELS`` / ``NCCL_MAX_NCHANNELS``,
``NCCL_BUFFSIZE``, ``NCCL_P2P_DISABLE``) restricts or rescales them:

- fewer channels than the default lower the per-call synchronisation (``base_us`` x
  (0.8 + 0.2 c/c0)) but cut Simple-protocol bandwidth (x c/c0); more channels do the opposite;
- ``NCCL_BUFFSIZE`` below the 4 MiB default cuts Simple bandwidth by sqrt(size / 4 MiB);
- ``NCCL_P2P_DISABLE=1`` routes through host memory (base x1.3, bandwidth x0.6 on PCIe,
  x0.1 on NVLink);
- Tree scales base and bandwidth by ``tree_base_factor`` / ``tree_bw_factor``; NVLS (NVSwitch
  multicast) has its own constants and only the Simple protocol.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

NCCL_ALGOS = ("ring", "tree", "nvls", "nvlstree", "collnetdirect", "collnetchain", "pat")
NCCL_PROTOS = ("ll", "ll128", "simple")
_PROTO_NAMES = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}
DEFAULT_BUFFSIZE = 4 * 1024 * 1024


class NcclConfigError(Exception):
    """The NCCL environment leaves no usable (algorithm, protocol) pair."""


@dataclass(frozen=True, kw_only=True)
class Proto:
    """One latency/bandwidth line (see the module docstring)."""

    base_us: float
    per_peer_us: float
    gbps: float
    oneshot: bool = False

    def latency_us(self, nbytes: float, n: int) -> float:
        traffic = (n - 1) if self.oneshot else 2.0 * (n - 1) / n
        return self.base_us + self.per_peer_us * (n - 1) + nbytes * traffic / (self.gbps * 1000.0)


def _proto(table: Mapping[str, Any], *, oneshot: bool) -> Proto:
    return Proto(base_us=float(table["base_us"]), per_peer_us=float(table["per_peer_us"]),
                 gbps=float(table["gbps"]), oneshot=oneshot)


def _parse_list(value: str | None, known: tuple[str, ...]) -> set[str] | None:
    """NCCL-style list: ``"Ring,Tree"`` or ``"^Tree"``; None when unset."""
    if value is None or not value.strip():
        return None
    v = value.strip()
    exclude = v.startswith("^")
    names = {x.strip().lower() for x in v.lstrip("^").split(",") if x.strip()}
    names &= set(known)
    return set(known) - names if exclude else names


def _env_int(env: Mapping[str, str], key: str) -> int | None:
    try:
        return int(env[key]) if key in env and str(env[key]).strip() else None
    except ValueError:
        return None


@dataclass(frozen=True, kw_only=True)
class NcclModel:
    """NCCL for one world size under one environment."""

    options: tuple[tuple[str, str, Proto], ...]  # (algo, proto, line) NCCL may pick from
    algos: frozenset[str]
    algo_explicit: bool
    channels: int
    default_channels: int

    def best(self, nbytes: float, n: int) -> tuple[float, str]:
        lat, algo, proto = min((p.latency_us(nbytes, n), a, pr) for a, pr, p in self.options)
        return lat, f"{algo}/{_PROTO_NAMES[proto]}"


def nccl_model(cost: Mapping[str, Any], *, interconnect: str, nvswitch: bool,
               env: Mapping[str, str], symm_mem: bool = False) -> NcclModel:
    """NCCL's options on this box under ``env``; raise :class:`NcclConfigError` if none is left."""
    c = cost["nccl"]
    available_protos = {"ll", "simple"} | ({"ll128"} if interconnect == "nvlink" and "ll128" in c else set())
    available_algos = {"ring", "tree"} | ({"nvls"} if nvswitch and "nvls" in c else set())
    algo_env = env.get("NCCL_ALGO")
    requested_algos = _parse_list(algo_env, NCCL_ALGOS)
    algos = (requested_algos & available_algos) if requested_algos is not None else (
        available_algos - {"tree"})  # intra-node NCCL uses Ring (and NVLS) unless told otherwise
    requested_protos = _parse_list(env.get("NCCL_PROTO"), NCCL_PROTOS)
    protos = (requested_protos & available_protos) if requested_protos is not None else available_protos

    c0 = int(c.get("channels", 4))
    ch = c0
    lo, hi = _env_int(env, "NCCL_MIN_NCHANNELS"), _env_int(env, "NCCL_MAX_NCHANNELS")
    if hi is not None:
        ch = min(ch, max(1, hi))
    if lo is not None:
        ch = max(ch, lo)
    base_f = max(0.8, 0.8 + 0.2 * ch / c0)
    simple_bw_f = ch / c0 if ch < c0 else 1.0 + 0.1 * math.log2(ch / c0)
    buff = _env_int(env, "NCCL_BUFFSIZE")
    if buff is not None and 0 < buff < DEFAULT_BUFFSIZE:
        simple_bw_f *= math.sqrt(buff / DEFAULT_BUFFSIZE)
    p2p_base_f, p2p_bw_f = 1.0, 1.0
    if str(env.get("NCCL_P2P_DISABLE", "0")).strip() in ("1", "true", "True"):
        p2p_base_f, p2p_bw_f = 1.3, (0.6 if interconnect == "pcie" else 0.1)
    symm_f = 0.7 if symm_mem and interconnect == "nvlink" else 1.0

    options: list[tuple[str, str, Proto]] = []
    for algo in sorted(algos):
        if algo == "nvls":
            if "simple" not in protos:
                continue
            p = _proto(c["nvls"], oneshot=False)
            options.append(("nvls", "simple", Proto(base_us=p.base_us * p2p_base_f * symm_f,
                                                     per_peer_us=p.per_peer_us, gbps=p.gbps * p2p_bw_f)))
            continue
        if algo not in ("ring", "tree"):
            continue
        for proto in sorted(protos):
            if proto not in c:
                continue
            p = _proto(c[proto], oneshot=False)
            bf = base_f * p2p_base_f * symm_f
            gf = p2p_bw_f * (simple_bw_f if proto == "simple" else 1.0)
            if algo == "tree":
                bf *= float(c.get("tree_base_factor", 0.5))
                gf *= float(c.get("tree_bw_factor", 0.5))
            options.append((algo, proto, Proto(base_us=p.base_us * bf, per_peer_us=p.per_peer_us * bf,
                                               gbps=p.gbps * gf)))
    if not options:
        shown = algo_env if algo_env is not None else env.get("NCCL_PROTO", "")
        what = "NCCL_ALGO" if algo_env is not None else "NCCL_PROTO"
        raise NcclConfigError(
            "NCCL WARN Error : no algorithm/protocol available for function AllReduce with datatype "
            f"ncclBfloat16. {what} was set to {shown}."
        )
    return NcclModel(options=tuple(options), algos=frozenset(algos),
                     algo_explicit=requested_algos is not None, channels=ch, default_channels=c0)


@dataclass(frozen=True, kw_only=True)
class Backend:
    """A non-NCCL all-reduce backend in force, with the largest message it takes."""

    name: str
    line: Proto
    max_bytes: int


def backend_from_cost(name: str, cost: Mapping[str, Any]) -> Backend:
    t = cost[name]
    return Backend(name=name, line=_proto(t, oneshot=True), max_bytes=int(float(t["max_kb"]) * 1024))


@dataclass(frozen=True, kw_only=True)
class CommSetup:
    """What one tensor-parallel all-reduce costs, given the backends SGLang ended up with."""

    world: int
    backends: tuple[Backend, ...]  # in SGLang's selection order, before NCCL
    nccl: NcclModel | None
    fusion_saving_us: float = 0.0
    fusion_max_tokens: int = 2048

    def allreduce(self, nbytes: float) -> tuple[float, str]:
        """(latency in microseconds, backend name) of one all-reduce of ``nbytes``."""
        if self.world <= 1:
            return 0.0, "none"
        for b in self.backends:
            if nbytes <= b.max_bytes:
                return b.line.latency_us(nbytes, self.world), b.name
        assert self.nccl is not None
        lat, how = self.nccl.best(nbytes, self.world)
        return lat, f"nccl:{how}"

    def allreduce_us(self, nbytes: float) -> float:
        return self.allreduce(nbytes)[0]

    def fused_allreduce_us(self, nbytes: float, tokens: int) -> float:
        """An all-reduce followed by RMSNorm, with the FlashInfer fusion saving when in force."""
        lat = self.allreduce_us(nbytes)
        if self.fusion_saving_us and tokens <= self.fusion_max_tokens and self.world > 1:
            lat = max(lat * 0.5, lat - self.fusion_saving_us)
        return lat

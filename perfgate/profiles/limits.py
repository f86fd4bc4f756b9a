"""The limits records are judged against: ``[floors]`` per mode (and per concurrency) and the
all-reduce ``[micro]`` floors."""

from __future__ import annotations

from collections.abc import Mapping

from perfgate.profiles import DEFAULT_TOLERANCE, MICRO_TIMINGS, Floor, MicroFloor, MicroSpec, Mode
from perfgate.profiles.reader import TableReader, _close


def _floor(f: TableReader, mode: str, *, concurrency: int | None = None, simulated: bool = False,
           gpu: str = "") -> Floor:
    """``[floors.<mode>]`` (or its ``[floors.<mode>.c<N>]`` sub-table): limits with their tolerance."""
    from perfgate.record import METRICS, RECORD_METRICS

    per_level = {k for k in f.data if k[:1] == "c" and k[1:].isdigit()} if concurrency is None else set()
    own_tol = {f"{k}_tolerance" for k in {**METRICS, **RECORD_METRICS} if k not in ("tok_s", "accept_len")}
    f.only({"tok_s", "tolerance", "accept_len", "accept_len_tolerance", "measured", "max_cv", *METRICS, *RECORD_METRICS,
            *per_level, *own_tol})
    limits = {}
    for name, metric in {**METRICS, **RECORD_METRICS}.items():
        if name not in ("tok_s", "accept_len") and name in f.data:  # those two are fields of their own
            kind = "a floor" if metric.higher_is_better else "a ceiling"
            limits[name] = float(f.num(name, f"{metric.unit} > 0 ({kind})", lo=1e-9))
    return Floor(
        mode=mode,
        tok_s=f.num("tok_s", "tok/s > 0", None, lo=1e-9),
        tolerance=float(f.num("tolerance", "a fraction in [0, 1)", DEFAULT_TOLERANCE, lo=0, hi=0.999)),
        accept_len=f.num("accept_len", "an acceptance length >= 1", None, lo=1),
        accept_len_tolerance=float(f.num("accept_len_tolerance", "a fraction in [0, 1)", 0.05, lo=0, hi=0.999)),
        measured=dict(f.sub("measured").data),
        limits=limits,
        by_concurrency={int(k[1:]): _floor(f.sub(k), mode, concurrency=int(k[1:]), simulated=simulated, gpu=gpu)
                        for k in sorted(per_level)},
        max_cv=f.num("max_cv", "a fraction in (0, 1]", None, lo=0.0001, hi=1),
        tolerances={k.removesuffix("_tolerance"): float(f.num(k, "a fraction in [0, 1)", lo=0, hi=0.999))
                    for k in sorted(own_tol) if k in f.data},
        tolerance_shared="tolerance" in f.data and "tok_s" not in f.data,
        simulated=simulated,
        gpu=gpu,
    )


def _micro_floors(mi: TableReader, world_sizes: tuple[object, ...]) -> dict[str, MicroFloor]:
    """``[micro.floors]``: "<backend>.<eager|graph>.<bytes>" = { latency_us = X, tolerance = T[, world_size = N] }."""
    from perfgate.allreduce import BACKENDS

    fr = mi.sub("floors")
    example = '"nccl.graph.14336" = { latency_us = 11.07, tolerance = 0.25 }'
    out: dict[str, MicroFloor] = {}
    for key, spec in fr.data.items():
        qkey = f'"{key}"'
        parts = key.rsplit(".", 2)
        if len(parts) != 3:
            raise fr.err(qkey, 'a key "<backend>.<eager|graph>.<bytes>"', key, fix=f"write {example}")
        backend, timing, nbytes = parts
        if backend not in BACKENDS:
            raise fr.err(qkey, f"an all-reduce backend ({', '.join(BACKENDS)})", backend, fix=_close(backend, BACKENDS))
        if timing not in MICRO_TIMINGS:
            raise fr.err(qkey, '"eager" or "graph" after the backend', timing, fix=_close(timing, MICRO_TIMINGS))
        if timing == "graph" and BACKENDS[backend].device != "cuda":
            raise fr.err(qkey, f'"eager" ({backend} runs on the CPU: it has no CUDA-graph timing)', timing,
                         fix=f'write "{backend}.eager.{nbytes}"')
        if not nbytes.isdigit() or int(nbytes) < 1:
            raise fr.err(qkey, "a message size in bytes (an integer >= 1) at the end", nbytes, fix=f"write {example}")
        if not isinstance(spec, dict):
            raise fr.err(qkey, "{ latency_us = X, tolerance = T }", spec, fix=f"write {example}")
        sr = TableReader(fr.path, spec, f"{fr.k(qkey)}.")
        sr.only({"latency_us", "tolerance", "world_size"})
        lat = sr.num("latency_us", "the measured median latency in µs (> 0)", required=True, lo=1e-9)
        tol = sr.num("tolerance", "a fraction >= 0 (the ceiling is latency_us × (1 + tolerance))", required=True,
                     lo=0, hi=10)
        ws = sr.get("world_size", int, "the world size it was measured at (an integer >= 2)", None)
        if ws is None:
            if len(world_sizes) != 1 or not isinstance(world_sizes[0], int) or isinstance(world_sizes[0], bool):
                raise sr.err("world_size", "the world size it was measured at",
                             fix=f"add world_size = N to the entry ([micro] world_sizes is {list(world_sizes)}, "
                                 "not a single world size)")
            ws = world_sizes[0]
        if ws < 2:
            raise sr.err("world_size", "an integer >= 2 (at world size 1 there is no communication to guard)", ws)
        canon = f"{backend}.{timing}.{int(nbytes)}"
        out[canon] = MicroFloor(backend=backend, timing=timing, bytes=int(nbytes), world_size=ws,
                                latency_us=float(lat), tolerance=float(tol), key=fr.k(qkey))
    return out


def floors(r: TableReader, modes: Mapping[str, Mode], *, simulated: bool = False, gpu: str = "") -> dict[str, Floor]:
    """``[floors.<mode>]``: each mode's limits (``simulated``: the simulator's noise priors for their tolerances; else
    ``gpu``'s, the profile's ``hardware.gpu``)."""
    fl = r.sub("floors")
    out: dict[str, Floor] = {}
    for mname in fl.data:
        if mname not in modes:
            raise fl.err(mname, f"a mode of this profile ({', '.join(modes)})", mname, fix=_close(mname, modes))
        out[mname] = _floor(fl.sub(mname), mname, simulated=simulated, gpu=gpu)

    return out


def micro(r: TableReader) -> MicroSpec:
    """``[micro]``: all-reduce micro-benchmark shapes and floors."""
    mi = r.sub("micro")
    mi.only({"tokens", "sweep_bytes", "world_sizes", "iters", "warmup", "floors"})
    micro_ws = tuple(mi.get("world_sizes", list, "a list of world sizes", []))
    return MicroSpec(
        tokens=tuple(mi.get("tokens", list, "a list of token counts", [1, 2, 4, 8])),
        sweep_bytes=tuple(mi.get("sweep_bytes", list, "a list of byte sizes", [])),
        world_sizes=micro_ws,
        iters=mi.int_("iters", "an integer >= 1", 200, lo=1),
        warmup=mi.int_("warmup", "an integer >= 0", 20, lo=0),
        floors=_micro_floors(mi, micro_ws),
    )

"""One parser per section of a profile (``[hardware]``, ``[engine]``, ``[model]``, ``[server]``,
``[modes]``, ``[workload]``, ``[expectations]``, ``[variants]``); each validates its table and
returns what :class:`~perfgate.profiles.Profile` holds. ``[floors]`` and ``[micro]`` are
:mod:`perfgate.profiles.limits`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from perfgate.categories import Category, Outcome
from perfgate.profiles import (
    CATEGORIES,
    DEFAULT_PREFILL_TRACES,
    DEFAULT_TTFT_PROBES,
    ENGINES,
    EXPECTS,
    EngineSpec,
    Expectation,
    Hardware,
    Mode,
    ModelSpec,
    Workload,
    WorkloadOverrides,
)
from perfgate.profiles.reader import TableReader, _close, env_table, flag_table, line_of, local_paths, resolve_path


def hardware(r: TableReader) -> Hardware:
    """``[hardware]``: the GPUs a profile is valid for."""
    h = r.sub("hardware", required=True)
    h.only({"gpu", "count", "sm", "interconnect"})
    sm = h.req("sm", (str,), 'a compute capability string such as "12.0"')
    try:
        float(sm)
    except ValueError:
        raise h.err("sm", 'a compute capability string such as "9.0"', sm) from None
    ic = h.req("interconnect", str, '"pcie" or "nvlink"')
    if ic not in ("pcie", "nvlink"):
        raise h.err("interconnect", '"pcie" or "nvlink"', ic)
    return Hardware(gpu=h.req("gpu", str, "a GPU name string"),
                    count=h.int_("count", "a GPU count >= 1", required=True, lo=1),
                    sm=sm, interconnect=ic)


def engine(r: TableReader, root: Path) -> EngineSpec:
    """``[engine]``: which engine serves the model, and how it is started."""
    e = r.sub("engine", required=True)
    e.only({"name", "launcher", "python", "startup_timeout_s", "teardown_timeout_s", "sglang_version",
            "sim_hardware", "sim_startup_s"})
    ename = e.req("name", str, f"one of {list(ENGINES)}")
    if ename not in ENGINES:
        raise e.err("name", f"one of {list(ENGINES)}", ename, fix=_close(ename, ENGINES))
    launcher = e.get("launcher", str, '"launch_server" or "serve"', "launch_server")
    if launcher not in ("launch_server", "serve"):
        raise e.err("launcher", '"launch_server" or "serve"', launcher)
    sim_hw = e.get("sim_hardware", str, "a path to a simulated hardware file", None)
    if ename == "sim":
        if not sim_hw:
            raise e.err("sim_hardware", "a path to a simulated hardware file (fixtures/sim/*.toml)",
                        fix='add sim_hardware = "fixtures/sim/<box>.toml" under [engine]')
        sim_path = resolve_path(root, sim_hw)
        if not sim_path.is_file():
            raise e.err("sim_hardware", "an existing file", sim_hw, fix=f"no file at {sim_path}")
    else:
        sim_path = None
    return EngineSpec(
        name=ename,
        launcher=launcher,
        python=e.get("python", str, "an interpreter path", ""),
        startup_timeout_s=float(e.num("startup_timeout_s", "seconds > 0", 1200.0, lo=0.001)),
        teardown_timeout_s=float(e.num("teardown_timeout_s", "seconds > 0", 30.0, lo=0.001)),
        sglang_version=e.get("sglang_version", str, "a version string", ""),
        sim_hardware=sim_path,
        sim_startup_s=float(e.num("sim_startup_s", "seconds >= 0", 2.0, lo=0)),
    )


def model(r: TableReader, root: Path) -> ModelSpec:
    """``[model]``: the served model, and its all-reduce latencies measured on the box."""
    mo = r.sub("model", required=True)
    mo.only({"path", "name", "layers", "hidden", "allreduces_per_layer", "allreduce_latency_us"})
    lat = mo.sub("allreduce_latency_us")
    lat_points = []
    for b, us in lat.data.items():
        if not b.isdigit() or isinstance(us, bool) or not isinstance(us, (int, float)) or us <= 0:
            raise lat.err(b, 'entries "<bytes>" = <microseconds > 0>', {b: us})
        lat_points.append((int(b), float(us)))
    mpath = mo.req("path", str, "a model path or Hugging Face id")
    local = resolve_path(root, mpath)
    if not Path(mpath).is_absolute() and local.exists():
        mpath = str(local)
    return ModelSpec(
        path=mpath,
        name=mo.get("name", str, "a string", Path(mpath).name),
        layers=mo.int_("layers", "an integer >= 1", None, lo=1),
        hidden=mo.int_("hidden", "an integer >= 1", None, lo=1),
        allreduces_per_layer=mo.int_("allreduces_per_layer", "an integer >= 0", 2, lo=0),
        allreduce_latency_us=tuple(sorted(lat_points)),
    )


def server(r: TableReader, root: Path) -> tuple[dict[str, object], dict[str, str]]:
    """``[server]``: flags and environment shared by every mode (host, port and model are perfgate's)."""
    s = r.sub("server")
    flags_only = TableReader(r.path, {"server": {k: v for k, v in s.data.items() if k != "env"}})
    server_flags = local_paths(root, flag_table(flags_only, "server"))
    for k in ("model-path", "model", "host", "port"):
        if k in server_flags:
            raise s.err(k, "no host/port/model flags here (perfgate sets them)", k,
                        fix="model goes in [model] path; host and port are chosen per launch")
    server_env = env_table(s, "env")

    return server_flags, server_env


def modes(r: TableReader, root: Path) -> dict[str, Mode]:
    """``[modes.<name>]``: flags, environment and workload overrides of each serving mode."""
    ms = r.sub("modes", required=True)
    if not ms.data:
        raise ms.err("", "at least one mode table, e.g. [modes.baseline]")
    out: dict[str, Mode] = {}
    for mname in ms.data:
        if not mname.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise ms.err(mname, "a mode name of letters, digits, '-', '_', '.'", mname)
        mr = ms.sub(mname)
        mr.only({"description", "flags", "env", "workload"})
        over = _mode_workload(mr.sub("workload"))
        out[mname] = Mode(name=mname, description=mr.get("description", str, "a string", ""),
                            flags=local_paths(root, flag_table(mr, "flags")), env=env_table(mr, "env"),
                            workload=over)

    return out


def _mode_workload(wo: TableReader) -> WorkloadOverrides:
    """``[modes.<name>.workload]``: the same rules as [workload], checked now, not when the mode runs (in the file's
    order: the first bad key is the one named); the values as written."""
    wo.only({"max_new_tokens", "requests_per_trial", "warmup", "trials", "request_timeout_s"})
    over = WorkloadOverrides()
    for k in wo.data:
        if k == "max_new_tokens":
            over["max_new_tokens"] = wo.int_(k, "an integer >= 2", lo=2)
        elif k == "requests_per_trial":
            over["requests_per_trial"] = wo.int_(k, "an integer >= 0", lo=0)
        elif k == "warmup":
            over["warmup"] = wo.int_(k, "an integer >= 0", lo=0)
        elif k == "trials":
            over["trials"] = wo.int_(k, "an integer >= 1", lo=1)
        else:
            over["request_timeout_s"] = wo.num(k, "seconds > 0", lo=0.001)
    return over


def workload(r: TableReader, root: Path) -> Workload:
    """``[workload]``: what is sent to the server and how often."""
    w = r.sub("workload", required=True)
    w.only({"prompts", "max_new_tokens", "concurrency", "requests_per_trial", "warmup", "trials",
            "request_timeout_s", "max_cv", "token_match_min", "concurrency_sweep", "confidence", "min_effect",
            "starts", "max_starts", "max_time_s", "ttft_probes", "prefill_traces"})
    prompts = resolve_path(root, w.req("prompts", str, "a prompt-set path (fixtures/prompts/*.jsonl)"))
    if not prompts.is_file():
        raise w.err("prompts", "an existing prompt file", str(prompts),
                    fix="point it at a file under fixtures/prompts/")
    sweep = w.get("concurrency_sweep", list, "a list of concurrency levels", [])
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in sweep):
        raise w.err("concurrency_sweep", "a list of integers >= 1", sweep)
    return Workload(
        prompts=prompts,
        max_new_tokens=w.int_("max_new_tokens", "an integer >= 2", required=True, lo=2),
        concurrency=w.int_("concurrency", "an integer >= 1", 1, lo=1),
        requests_per_trial=w.int_("requests_per_trial", "an integer >= 0", 0, lo=0),
        warmup=w.int_("warmup", "an integer >= 0", 1, lo=0),
        trials=w.int_("trials", "an integer >= 1", 5, lo=1),
        request_timeout_s=float(w.num("request_timeout_s", "seconds > 0", 300.0, lo=0.001)),
        max_cv=float(w.num("max_cv", "a fraction in (0, 1]", 0.05, lo=0.0001, hi=1)),
        token_match_min=float(w.num("token_match_min", "a fraction in [0, 1]", 1.0, lo=0, hi=1)),
        concurrency_sweep=tuple(sweep),
        confidence=float(w.num("confidence", "a level in (0.5, 1)", 0.95, lo=0.5, hi=0.9999)),
        min_effect=float(w.num("min_effect", "a fraction in [0, 0.5]", 0.02, lo=0, hi=0.5)),
        starts=w.int_("starts", "an integer >= 1", 1, lo=1),
        max_starts=w.int_("max_starts", "an integer >= 1 (the most starts per config an undecided comparison may "
                                        "take)", 0, lo=1) or 0,
        max_time_s=float(w.num("max_time_s", "seconds > 0", None, lo=0.001) or 0.0),
        ttft_probes=w.int_("ttft_probes", "an integer >= 0 (TTFT probes per server start; 0: none)",
                           DEFAULT_TTFT_PROBES, lo=0, hi=10_000),
        prefill_traces=w.int_("prefill_traces", "an integer >= 0 (prefills per server start traced with SGLang's "
                                                "profiler; 0: none)", DEFAULT_PREFILL_TRACES, lo=0, hi=1000),
    )


def expectations(r: TableReader, modes: Mapping[str, Mode], text: str) -> dict[str, dict[str, tuple[Expectation, ...]]]:
    """``[expectations.<check or variant>]``: what each is expected to do per mode (``text``: the file, for line
    numbers)."""
    ex = r.sub("expectations")
    table: dict[str, dict[str, tuple[Expectation, ...]]] = {}
    for ename_, _ in ex.data.items():
        er = ex.sub(ename_)
        per_mode: dict[str, tuple[Expectation, ...]] = {}
        own_modes = _allreduce_modes(ex, ename_) if ename_.startswith("allreduce:") else modes
        for mname, spec in er.data.items():
            if mname != "*" and mname not in own_modes:
                raise er.err(mname, f"a mode of this profile or \"*\" ({', '.join(own_modes)})", mname,
                             fix=_close(mname, list(own_modes) + ["*"]))
            specs = spec if isinstance(spec, list) else [spec]
            out = []
            for i, one in enumerate(specs):
                if not isinstance(one, dict):
                    raise er.err(mname, '{ expect = "pass" } or { expect = "xfail", category = "...", '
                                        'reason = "..." }', one)
                sr = TableReader(r.path, one, f"{er.k(mname)}{f'[{i}]' if isinstance(spec, list) else ''}.")
                sr.only({"expect", "category", "reason", "when"})
                exp = sr.req("expect", str, '"pass" or "xfail"')
                if exp not in EXPECTS:
                    raise sr.err("expect", '"pass" or "xfail"', exp, fix=_close(exp, EXPECTS))
                cat = sr.get("category", str, "a failure category", None)
                if exp == "xfail" and not cat:
                    raise sr.err("category", f"the category it must fail with (one of {', '.join(CATEGORIES)})",
                                 fix="an xfail must say why it fails")
                if cat is not None and cat not in CATEGORIES:
                    raise sr.err("category", f"one of {', '.join(CATEGORIES)}", cat, fix=_close(cat, CATEGORIES))
                when = sr.get("when", str, 'a stack condition such as "flashinfer < 0.8"', "")
                if when:
                    from perfgate.stack.conditions import parse_condition

                    try:
                        parse_condition(when)
                    except Exception as err:  # ConfigError: "stack condition '...': <problem>; fix: <how>"
                        problem, _, how = str(err).partition("; fix: ")
                        problem = problem.removeprefix(f"stack condition {when!r}").lstrip(": ")
                        raise sr.err("when", 'a stack condition such as "flashinfer < 0.8 and sm == 12.0"', when,
                                     fix=f"{problem}: {how}" if problem and how else how or problem) from None
                out.append(Expectation(expect=Outcome(exp), category=Category(cat) if cat else None,
                                       reason=sr.get("reason", str, "a string", ""),
                                       when=when, key=f"expectations.{ename_}.{mname}",
                                       line=line_of(text, f"[expectations.{ename_}", mname) or line_of(text, ename_)))
            per_mode[mname] = tuple(out)
        table[ename_] = per_mode

    return table


def _allreduce_modes(ex: TableReader, name: str) -> tuple[str, ...]:
    """``[expectations."allreduce:<backend>"]``: the micro tier's records of one backend; their modes are the
    timings (``eager``, ``graph``)."""
    from perfgate.allreduce import BACKENDS
    from perfgate.profiles import MICRO_TIMINGS

    backend = name.removeprefix("allreduce:")
    if backend not in BACKENDS:
        raise ex.err(f'"{name}"', f'"allreduce:<backend>" with an all-reduce backend ({", ".join(BACKENDS)})',
                     backend, fix=_close(name, [f"allreduce:{b}" for b in BACKENDS]))
    return MICRO_TIMINGS


def variants(r: TableReader, modes: Mapping[str, Mode]
             ) -> tuple[tuple[str, ...], tuple[str, ...] | None, dict[str, dict[str, object]]]:
    """``[variants]``: (the modes variants run in, the variants included or None for all, per-variant overrides)."""
    vr = r.sub("variants")
    vr.only({"modes", "include", "overrides"})
    default_modes = [next(iter(modes))] if "baseline" not in modes else ["baseline"]
    vmodes = vr.get("modes", list, "a list of mode names", default_modes)
    for m in vmodes:
        if m not in modes:
            raise vr.err("modes", f"mode names of this profile ({', '.join(modes)})", m, fix=_close(str(m), modes))
    include = vr.get("include", list, "a list of variant names", None)
    ov = vr.sub("overrides")
    overrides = {vname: dict(ov.sub(vname).data) for vname in ov.data}

    return tuple(vmodes), tuple(include) if include is not None else None, overrides



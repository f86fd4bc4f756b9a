"""perfgate's pytest plugin: options, markers, fixtures and hooks (heavy modules load lazily).

Registered by ``pip install`` (the ``pytest11`` entry point ``perfgate.plugin``; a ``conftest.py`` with
``pytest_plugins = ["perfgate.plugin"]`` does the same without installing). It stays inert in sessions
that do not use it: it switches on when a profile is named (``--perfgate-profile``, ``PERFGATE_PROFILE``,
the ``perfgate_profile`` ini option, or ``perfgate = true``) or when a collected test uses one of its
fixtures (``perf_server``, ``measure``, ``perf_check``, ``perf_case``, ``perf``), wherever the test lives.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from perfgate.record import case_of, fmt
from perfgate.session import _MATRIX_KINDS, BUILTIN_KINDS, KIND_ORDER, PERF_FIXTURES, PerfgateState

if TYPE_CHECKING:
    from perfgate.profiles import Profile

MARKERS = {
    "baseline": "throughput floors for plain decoding (perfgate)",
    "speculative": "speculative decoding vs the baseline, acceptance length (perfgate)",
    "backends": "the backend compatibility matrix: one record per variant x mode (perfgate)",
    "micro": "fast tier: all-reduce micro-benchmarks, no server (perfgate)",
    "profile": "where each decode step's GPU time goes, from SGLang's own trace: all-reduces, backend (perfgate)",
    "perfgate(kind, modes, variants)": "a perfgate record of the given kind (perf_case or perf_server tests); "
                                       "modes=[...] and variants=True choose its configs",
}

STATE = pytest.StashKey[PerfgateState]()


def state_of(config: pytest.Config) -> PerfgateState:
    return config.stash[STATE]


# ----------------------------------------------------------------------------- hooks


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("perfgate", "perfgate: SGLang performance regression suite")
    parser.addini("perfgate_profile", "perfgate: the profile to run (a path, or <hardware>/<model> under baselines/), "
                  "as --perfgate-profile; also switches perfgate on from the start (needed under pytest-xdist)",
                  default="")
    parser.addini("perfgate", "perfgate: switch the plugin on for every session of this project (otherwise it "
                  "switches on when a collected test uses a perfgate fixture)", type="bool", default=False)
    g.addoption("--perfgate-profile", default=None, metavar="PATH|HW/MODEL",
                help="profile to run (a path, or <hardware>/<model> under baselines/; env PERFGATE_PROFILE). "
                     "Default: the simulated seed box when no NVIDIA GPU is visible, else the profile matching the GPUs.")
    g.addoption("--perfgate-url", default=None, metavar="URL",
                help="attach to a running server instead of launching; tests whose config differs are skipped")
    g.addoption("--perfgate-update-baselines", action="store_true", default=False,
                help="write the measured floors (with stack, date, n, CV) back into the profile")
    g.addoption("--perfgate-allow-hardware-mismatch", action="store_true", default=False,
                help="run a profile on hardware other than the one it is for")
    g.addoption("--perfgate-log-dir", default=None, metavar="DIR", help="where server logs go")
    g.addoption("--perfgate-sim-stack", default=None, metavar="PKG=VER,...",
                help="simulated stack overrides, e.g. flashinfer=0.8.0 (env PERFGATE_SIM_STACK)")
    g.addoption("--perfgate-sim-fault", default=None, metavar="NAME", help=argparse.SUPPRESS)
    g.addoption("--perfgate-variants", default=None, metavar="A,B", help="only these variants")
    g.addoption("--perfgate-shard", default=None, metavar="I/N",
                help="run cell I of the profile's configs split into N (as `perfgate plan` splits them without "
                     "reports; tests with no server config, the micro tier, run in cell 1)")
    g.addoption("--perfgate-configs", default=None, metavar="KEY,KEY",
                help="run only the records of these server configs (the keys of a `perfgate plan` cell); a "
                     "variant's baseline is still measured to compare with, its records are not reported")
    g.addoption("--perfgate-variants-file", default=None, metavar="PATH", help="variants file (default baselines/variants.toml)")
    g.addoption("--perfgate-crosscheck", default="auto", choices=("auto", "on", "off"),
                help="measure each mode with SGLang's own bench_one_batch_server too: auto = with the real engine "
                     "(default), on = also on the simulated server, off = never (saves ~1 min per mode)")
    g.addoption("--perfgate-trials", default=None, type=_positive_int, metavar="N",
                help="override the profile's trials (at least 3 for a confidence interval; fewer: numbers, no verdict)")
    g.addoption("--perfgate-startup-timeout", default=None, type=float, metavar="S",
                help="override the profile's server start-up timeout")
    g.addoption("--perfgate-progress-interval", default=15.0, type=_positive_seconds, metavar="S",
                help="while a server starts, print its phase and elapsed time at least every S seconds (default 15)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise pytest.UsageError(f"perfgate: --perfgate-trials {text!r}: expected a whole number of trials >= 1, e.g. 5")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise pytest.UsageError(f"perfgate: --perfgate-progress-interval {text!r}: expected seconds > 0, e.g. 15")
    return value


def pytest_configure(config: pytest.Config) -> None:
    for name, desc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {desc}")
    config.stash[STATE] = PerfgateState(config)
    if _wants_perf(config):  # named on the command line, in the environment or in the ini file
        _activate(config, early=True)


def _activate(config: pytest.Config, *, early: bool) -> None:
    """Switch perfgate on for this session: inputs validated (file, key and fix), GPUs partitioned under
    xdist, SIGTERM made a clean end, the JUnit file kept current. Early: at configure, when the profile is
    named; late: at collection, when a collected test uses a perfgate fixture."""
    st = state_of(config)
    if st.active:
        return
    workerinput = getattr(config, "workerinput", None)
    if not early and workerinput is not None and not workerinput.get("perfgate_active") \
            and not st.profile.simulated:
        raise pytest.UsageError(
            "perfgate: under pytest-xdist perfgate must know the profile before the workers start, to give each "
            "its own GPUs: pass --perfgate-profile, set PERFGATE_PROFILE, or set perfgate_profile (or "
            "perfgate = true) in the pytest ini file")
    st.active = True
    _install_sigterm()
    _validate_inputs(config)
    if early:
        _assign_gpus(config)
    from perfgate.junitguard import install

    install(config)  # the JUnit file stays current: a killed pytest loses no finished record
    if not early:
        _add_suite_properties(config)


def _activate_late(config: pytest.Config) -> None:
    _activate(config, early=False)


def _validate_inputs(config: pytest.Config) -> None:
    """Bad profiles, variants or options fail here, before collection, with the file, key and fix."""
    st = state_of(config)
    p = st.profile
    vs = st.variants
    names = list(p.variant_include or ()) + list(p.variant_overrides) + list(p.expectations)
    checks = {"speculation-vs-baseline", "floor", "acceptance", "sweep", "variant"}
    for n in names:
        if n not in vs.variants and n not in checks and not n.startswith("allreduce:"):  # checked by the loader
            from perfgate.profiles.reader import _close

            where = "[variants] include / overrides / [expectations]"
            raise pytest.UsageError(f"perfgate: {p.path}: {where} names '{n}', which is neither a variant of "
                                    f"{vs.path} nor a check ({', '.join(sorted(checks))}); "
                                    f"{_close(n, list(vs.variants) + sorted(checks))}")
    wanted = st.opt("perfgate_variants")
    for n in (wanted.split(",") if wanted else []):
        if n not in vs.variants:
            from perfgate.profiles.reader import _close

            raise pytest.UsageError(f"perfgate: --perfgate-variants: unknown variant '{n}' in {vs.path}; "
                                    f"{_close(n, vs.variants)}")
        if p.variant_include is not None and n not in p.variant_include:
            raise pytest.UsageError(
                f"perfgate: --perfgate-variants: '{n}' is a variant of {vs.path} but not in {p.path} [variants] "
                f"include ({', '.join(p.variant_include) or 'empty'}), so no record would run; add it to include "
                f"or pick one of those")
    if p.simulated:
        _ = st.stack  # validates --perfgate-sim-stack
    else:  # a profile for other hardware is refused here, not once per test
        from perfgate.errors import HardwareMismatch

        try:
            st.check_hardware()
        except HardwareMismatch as e:
            raise pytest.UsageError(f"perfgate: {e}") from None


def _gpu_plan(config: pytest.Config, workers: int) -> tuple[int, list[str]] | None:
    """(GPUs per worker, visible GPU ids) for a real-engine profile; None when not applicable."""
    st = state_of(config)
    p = st.profile
    if p.simulated or workers <= 1:
        return None
    tp = int(p.server_flags.get("tp-size", 1) or 1) * int(p.server_flags.get("pp-size", 1) or 1)
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis:
        ids = [x.strip() for x in vis.split(",") if x.strip()]
    else:
        from perfgate.stack import detect_stack

        n = detect_stack().gpu_count
        ids = [str(i) for i in range(int(n))] if str(n).isdigit() else []
    if workers * tp > len(ids):
        raise pytest.UsageError(
            f"perfgate: -n {workers} workers x tp {tp} needs {workers * tp} GPUs but {len(ids)} are visible "
            f"({','.join(ids) or 'none'}); use -n {max(1, len(ids) // tp)} or fewer: two servers never share a GPU"
        )
    return tp, ids


def _assign_gpus(config: pytest.Config) -> None:
    """Under pytest-xdist, each worker owns a disjoint set of GPUs (CUDA_VISIBLE_DEVICES)."""
    if hasattr(config, "workerinput"):
        wid = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        plan = _gpu_plan(config, count)
        if plan is not None:
            tp, ids = plan
            i = int(wid[2:])
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(ids[i * tp:(i + 1) * tp])
        return
    n = getattr(config.option, "numprocesses", None)
    if isinstance(n, int) and n > 1:
        _gpu_plan(config, n)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    st = state_of(node.config)
    node.workerinput["perfgate_run"] = st.log_dir.name
    node.workerinput["perfgate_active"] = st.active


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under xdist, send all records of one server config to one worker (each config starts once)."""
    if not state_of(config).active or getattr(config.option, "dist", "load") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ConfigScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.endswith("]") and "[" in nodeid:
                param = nodeid[nodeid.rindex("[") + 1 : -1]
                if ":" in param:
                    return "perfgate:" + param.split(":", 1)[1]
            return str(super()._split_scope(nodeid))

    return ConfigScheduling(config, log)


def _install_sigterm() -> None:
    """SIGTERM ends the session like Ctrl-C: JUnit is written, servers are torn down."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        return

    def _term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, _term)


def pytest_unconfigure(config: pytest.Config) -> None:
    st = config.stash.get(STATE, None)
    if st is not None:
        from perfgate.errors import PerfgateError

        try:
            st.stop()  # normally already done at sessionfinish
        except PerfgateError as e:
            sys.stderr.write(f"perfgate: server teardown failed: {e}\n")


def _wants_perf(config: pytest.Config) -> bool:
    """Activated from the start: a profile named (option, environment, ini) or ``perfgate = true`` in the ini."""
    if config.getoption("perfgate_profile") or os.environ.get("PERFGATE_PROFILE"):
        return True
    return bool(config.getini("perfgate_profile")) or bool(config.getini("perfgate"))


def pytest_sessionstart(session: pytest.Session) -> None:
    _add_suite_properties(session.config)


def _add_suite_properties(config: pytest.Config) -> None:
    """The stack and perfgate.* on the JUnit suite (written by the controller, so they survive -n N)."""
    st = state_of(config)
    if hasattr(config, "workerinput") or not st.active:
        return
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover
        return
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    for k, v in _suite_properties(st).items():
        xml.add_global_property(k, v)


def _suite_properties(st: PerfgateState) -> dict[str, str]:
    import perfgate

    p = st.profile
    props = {
        "perfgate.version": perfgate.__version__,
        "perfgate.engine": p.engine.name,
        "perfgate.profile": p.name,
        "perfgate.profile_path": str(p.path),
        "perfgate.simulated": "true" if p.simulated else "false",
        "perfgate.started_at": st.started_at,
    }
    props.update(st.stack.as_properties())
    return props


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    mark = metafunc.definition.get_closest_marker("perfgate")
    if "micro_case" in metafunc.fixturenames:  # the micro tier (kind allreduce): no server, cell 1 of a shard
        _activate_late(metafunc.config)
        cases = state_of(metafunc.config).cases("allreduce")
        metafunc.parametrize("micro_case", cases, ids=[c.id for c in cases])
        return
    if "perf_server" in metafunc.fixturenames:
        _activate_late(metafunc.config)
        kw = mark.kwargs if mark is not None else {}
        st = state_of(metafunc.config)
        cases = st.cases(str(kw.get("kind", "custom")), modes=kw.get("modes"), variants=bool(kw.get("variants")),
                         where=metafunc.definition.nodeid)
        metafunc.parametrize("perf_server", cases, ids=[c.id for c in cases], indirect=True)
        return
    if "perf_case" not in metafunc.fixturenames:
        return
    if mark is None or "kind" not in mark.kwargs:
        raise pytest.UsageError(f"perfgate: {metafunc.definition.nodeid} uses perf_case without @pytest.mark.perfgate(kind=...)")
    _activate_late(metafunc.config)
    st = state_of(metafunc.config)
    kind = mark.kwargs["kind"]
    cases = st.cases(kind, modes=mark.kwargs.get("modes"), variants=bool(mark.kwargs.get("variants")),
                     where=metafunc.definition.nodeid)
    params = cases
    if kind == "crosscheck":  # marked like the mode it checks, so -m baseline / -m speculative select it
        p = st.profile
        params = [pytest.param(c, marks=[pytest.mark.speculative if p.modes[c.mode].speculative
                                         else pytest.mark.baseline]) for c in cases]
    metafunc.parametrize("perf_case", params, ids=[c.id for c in cases])


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order perf tests by server config (baseline configs first) so each config starts once."""
    st = state_of(config)
    if not st.active and any(PERF_FIXTURES & set(getattr(it, "fixturenames", ())) for it in items):
        _activate_late(config)
    if not st.active:
        return
    # a record kind this profile has no case for (e.g. no concurrency sweep) is deselected, not skipped
    empty = [it for it in items if it.get_closest_marker("perfgate") is not None and case_of(it) is None
             and {"perf_case", "perf_server"} & set(getattr(it, "fixturenames", ()))]
    if empty:
        config.hook.pytest_deselected(items=empty)
        items[:] = [it for it in items if it not in empty]
    perf = [it for it in items if case_of(it) is not None]
    if not perf:
        return
    first_seen: dict[str, int] = {}
    keyed = []
    base = st.profile.baseline_mode()
    for idx, it in enumerate(items):
        case = case_of(it)
        if case is None:
            keyed.append(((0, 0, 0, idx), it))
            continue
        cfg = st.config_for(case)
        key = cfg.key
        st.selected_configs[key] = cfg
        if case.kind in ("speculation-vs-baseline", "variant"):
            bcfg = st.config_for(case.baseline(case.mode if case.kind == "variant" else base))
            st.selected_configs[bcfg.key] = bcfg
        first_seen.setdefault(key, len(first_seen))
        is_base = case.mode == base and case.variant is None
        keyed.append(((1, 0 if is_base else 1, first_seen[key], KIND_ORDER.get(case.kind, 9), idx), it))
    items[:] = [it for _, it in sorted(keyed, key=lambda t: t[0])]
    _select_cell(config, st, items)


def _select_cell(config: pytest.Config, st: PerfgateState, items: list[pytest.Item]) -> None:
    """--perfgate-shard / --perfgate-configs: keep the records of this cell's configs only."""
    shard, keys_opt = st.opt("perfgate_shard"), st.opt("perfgate_configs")
    if not shard and not keys_opt:
        return
    if shard and keys_opt:
        raise pytest.UsageError("perfgate: --perfgate-shard and --perfgate-configs pick the same thing; give one")
    from perfgate.fleet import config_costs, shard_keys

    if shard:
        try:
            keys = shard_keys(config_costs(st.profile, st.variants), shard)
        except ValueError as e:
            raise pytest.UsageError(f"perfgate: {e}") from None
        rest = shard.split("/")[0] == "1"  # tests with no server config go to cell 1
    else:
        keys = {k.strip() for k in keys_opt.split(",") if k.strip()}
        known = {c.key for c in config_costs(st.profile, st.variants)}
        unknown = sorted(keys - known)
        if unknown:
            raise pytest.UsageError(f"perfgate: --perfgate-configs: {', '.join(unknown)} are not config keys of "
                                    f"{st.profile.path}; `perfgate plan {st.profile.name}` lists them")
        rest = False
    keep, drop = [], []
    for it in items:
        case = case_of(it)
        own = st.config_for(case).key in keys if case is not None else rest
        (keep if own else drop).append(it)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    """A record skipped from perfgate's own code (inconclusive, missing dependency) is reported at the test
    that made it, as pytest does for skip marks, not at the line of perfgate that concluded it."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and isinstance(rep.longrepr, tuple) and len(rep.longrepr) == 3:
        raw = Path(str(rep.longrepr[0]))
        candidates = [raw] if raw.is_absolute() else [item.config.invocation_params.dir / raw, item.config.rootpath / raw]
        if any(c.resolve().is_relative_to(_PACKAGE_DIR) for c in candidates):
            fspath, lineno, _ = item.reportinfo()
            rep.longrepr = (str(fspath), (lineno or 0) + 1, rep.longrepr[2])


_PACKAGE_DIR = Path(__file__).resolve().parent


def pytest_report_collectionfinish(config: pytest.Config, start_path: Path, items: list[pytest.Item]) -> list[str]:
    if not any(case_of(it) is not None for it in items):
        return []
    return _banner(state_of(config))


def _banner(st: PerfgateState) -> list[str]:
    p = st.profile
    lines = [f"perfgate: profile {p.path} (engine {p.engine.name})" + (f" — {st.auto_reason}" if st.auto_reason else "")]
    if p.simulated:
        hw = p.hardware
        lines.append(
            f"perfgate: *** SIMULATED: these numbers come from perfgate's simulated SGLang server (a cost model of "
            f"{hw.count}x {hw.gpu}, {hw.interconnect.upper()}), not from real hardware ***"
        )
    if st.opt("perfgate_url"):
        lines.append(f"perfgate: attached to {st.opt('perfgate_url')} (no server is launched)")
    lines.append(f"perfgate: server logs in {st.log_dir}")
    for w in (*p.warnings, *st.variants.warnings):
        lines.append(f"perfgate: WARNING {w}")
    return lines


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    st = config.stash.get(STATE, None)
    if st is None or st._profile is None:
        return
    tr = terminalreporter
    tr.section("perfgate")
    for line in _banner(st):
        tr.write_line(line)
    if st._manager is not None:
        m = st._manager
        tr.write_line(f"perfgate: {m.starts} server start(s) for {len(set(m.started_configs))} distinct config(s)")
    elif st.opt("perfgate_url"):
        tr.write_line(f"perfgate: 0 server start(s): attached to {st.opt('perfgate_url')}")
    elif st.selected_configs and not hasattr(config, "workerinput"):
        tr.write_line("perfgate: 0 server start(s)")
    if st.opt("perfgate_url"):
        _attach_warnings(st, tr)
    if st.opt("perfgate_update_baselines") and not hasattr(config, "workerinput"):
        _write_updates(st, tr)
    for line in matrix_lines(tr.stats):
        tr.write_line(line)
    from perfgate.profiling import profile_lines

    for line in profile_lines(tr.stats):
        tr.write_line(line)
    for line in dict.fromkeys(st.dropped_modes):
        tr.write_line(f"perfgate: {line}", yellow=True)


def matrix_lines(stats: dict[str, list[Any]]) -> list[str]:
    """The records of this run as a variant x mode matrix (outcome, category, tok/s, vs baseline)."""
    cells: dict[tuple[str, str], str] = {}
    modes: list[str] = []
    rows: list[str] = []
    for reports in stats.values():
        for rep in reports:
            props = dict(getattr(rep, "user_properties", ()) or ())
            kind = props.get("kind", "")
            metric = props.get("metric", "")
            if not props.get("outcome") or (kind in BUILTIN_KINDS | {"allreduce"} and kind not in _MATRIX_KINDS):
                continue
            mode = props.get("mode", "")
            if kind in _MATRIX_KINDS:
                row = props.get("variant") or ("(baseline)" if kind == "floor" else "(speculation)")
            else:  # a user's record: one row per kind and metric
                row = f"({kind}" + (f" {metric}" if metric else "") + ")" + (f" +{props['variant']}" if props.get("variant") else "")
            text = props["outcome"]
            if props.get("category"):
                text += f" {props['category']}"
            if metric and props.get(metric):
                text += f" {float(props[metric]):.4g}"
            elif props.get("tok_s"):
                text += f" {float(props['tok_s']):.1f}"
            if props.get("vs_baseline"):
                text += f" x{float(props['vs_baseline']):.2f}"
            cells[(row, mode)] = text
            if mode not in modes:
                modes.append(mode)
            if row not in rows:
                rows.append(row)
    if not cells:
        return []
    w0 = max(len(r) for r in rows)
    widths = {m: max(len(m), *(len(cells.get((r, m), "")) for r in rows)) for m in modes}
    out = ["perfgate: records (outcome, category, decode tok/s or the record's metric, x baseline):",
           "  " + " " * w0 + "  " + "  ".join(m.ljust(widths[m]) for m in modes)]
    for r in rows:
        out.append("  " + r.ljust(w0) + "  " + "  ".join(cells.get((r, m), "-").ljust(widths[m]) for m in modes))
    return out


def _attach_warnings(st: PerfgateState, tr: Any) -> None:
    """Attach mode says what it could not verify on the server (environment variables), never silently."""
    unverified = sorted({u for c in st.attach_checks.values() if c.runs for u in c.unverified})
    if unverified:
        tr.write_line("perfgate: WARNING attach mode cannot verify these settings of the attached server "
                      "(/server_info does not report them), assumed as the profile says: " + ", ".join(unverified),
                      yellow=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under xdist, a worker hands its baseline updates to the controller, which writes them once."""
    config = session.config
    st = config.stash.get(STATE, None)
    if st is not None and hasattr(config, "workeroutput"):
        config.workeroutput["perfgate_updates"] = {  # type: ignore[attr-defined]
            "updates": [list(u) for u in st.updates], "meta": st.update_meta,
            "refused": [list(r) for r in st.update_refused],
        }
    if st is not None:
        _teardown_servers(session, st)


def _teardown_servers(session: pytest.Session, st: PerfgateState) -> None:
    """Stop the last server here (not only at unconfigure), so a teardown problem is a clear line and exit 1."""
    from perfgate.errors import PerfgateError

    try:
        st.stop()
    except PerfgateError as e:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        msg = f"perfgate: server teardown failed: {e}"
        if tr is not None:
            tr.write_line(msg, red=True)
        else:
            sys.stderr.write(msg + "\n")
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    st = node.config.stash.get(STATE, None)
    got = getattr(node, "workeroutput", {}).get("perfgate_updates")
    if st is None or not got:
        return
    st.updates.extend(tuple(u) for u in got["updates"])
    for mode, meta in got["meta"].items():
        st.update_meta.setdefault(mode, {}).update(meta)
    st.update_refused.extend(tuple(r) for r in got["refused"])


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def perfgate_state(request: pytest.FixtureRequest) -> PerfgateState:
    """The session's perfgate state (profile, variants, stack, server manager)."""
    return state_of(request.config)


@pytest.fixture(scope="session")
def perfgate_profile(perfgate_state: PerfgateState) -> Profile:
    """The active, validated profile."""
    return perfgate_state.profile


@pytest.fixture
def perfgate_record(request: pytest.FixtureRequest) -> Any:
    """``record(name, value)``: a JUnit property on this test (no xunit2 warning)."""

    def record(name: str, value: object) -> None:
        request.node.user_properties.append((name, fmt(value)))

    return record


@pytest.fixture
def perf(request: pytest.FixtureRequest, perfgate_state: PerfgateState) -> Any:
    """perfgate's per-test helper (perfgate.runner.PerfRun) behind the built-in tests: measure a case,
    compare, conclude. Tests of your own use perf_server, measure and perf_check."""
    from perfgate.runner import PerfRun

    return PerfRun(item=request.node, state=perfgate_state)


@pytest.fixture
def perf_case(request: pytest.FixtureRequest) -> Any:
    """The record a built-in perf test produces (kind, mode, variant), parametrized by perfgate from the
    profile for tests marked @pytest.mark.perfgate(kind=...)."""
    raise pytest.UsageError(f"perfgate: {request.node.nodeid}: perf_case is parametrized by perfgate; mark the "
                            f"test @pytest.mark.perfgate(kind=...)")


@pytest.fixture
def perf_server(request: pytest.FixtureRequest, perf: Any) -> Any:
    """A running server of one config (perfgate.api.PerfServer: mode, variant, url, log_path). The test
    runs once per mode of the profile (or per @pytest.mark.perfgate(modes=[...]), plus each variant with
    variants=True); each config starts once per session, tests ordered by config; a failed start is the
    test's record (classified, with its log)."""
    from perfgate.api import start

    return start(perf, request.param)


@pytest.fixture
def measure(perf: Any) -> Any:
    """measure(perf_server, *, concurrency=, max_new_tokens=, prompts=, trials=, warmup=,
    requests_per_trial=, request_timeout_s=) -> perfgate.Measurement: the mode's workload with those keys
    replaced, measured cold (prefix cache flushed per trial), median/CI/CV per metric, recorded on the test."""
    from perfgate.api import Measure

    return Measure(perf)


@pytest.fixture
def perf_check(perf: Any) -> Any:
    """perf_check(measurement, metric, *, limit=None, tolerance=None): conclude this test's record on one
    metric (tok_s, output_tok_s, ttft_ms, ttft_ms_p99, itl_ms, itl_ms_p99) in its direction, against the
    profile's [floors.<mode>] / [floors.<mode>.c<N>] or the given limit, through the profile's expectations.
    Ends the test: call it last."""
    from perfgate.api import Check

    return Check(perf)


@pytest.fixture
def step_profile(perf: Any) -> Any:
    """step_profile(perf_server, *, num_steps=16) -> perfgate.trace.StepProfile: capture SGLang's own trace
    of a few decode steps (speculative cycles) on the server, record all-reduces per step, their time and
    share, the backend that ran them, GEMM/attention/other time and rank skew, and conclude the record
    (a variant whose trace shows another all-reduce backend than its own is a `fallback`). Call it last."""
    from perfgate.profiling import StepProfiler

    return StepProfiler(perf)


def _write_updates(st: PerfgateState, tr: Any) -> None:
    """--perfgate-update-baselines: write the measured floors, list every change and every refusal."""
    from perfgate.baseline_update import write_updates
    from perfgate.errors import PerfgateError

    path = st.profile.path
    for mode, key, why in st.update_refused:
        tr.write_line(f"perfgate: NOT updated {path} [floors.{mode}] {key}: {why}", yellow=True)
    if not st.updates:
        tr.write_line("perfgate: --perfgate-update-baselines: nothing measured to write")
        return
    try:
        write_updates(path, st.updates, st.update_meta)
    except (PerfgateError, OSError) as e:
        tr.write_line(f"perfgate: --perfgate-update-baselines: {path} NOT written: {e}", red=True)
        return
    for mode, key, old, new in st.updates:
        tr.write_line(f"perfgate: updated {path} [floors.{mode}] {key}: {'(none)' if old is None else old} -> {new}")


if sys.version_info < (3, 10):  # pragma: no cover
    raise RuntimeError("perfgate needs Python 3.10+")

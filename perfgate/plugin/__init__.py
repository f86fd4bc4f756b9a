"""perfgate's pytest plugin: options, markers, fixtures and hooks (heavy modules load lazily).

Registered by ``pip install`` (the ``pytest11`` entry point ``perfgate.plugin``; a ``conftest.py`` with
``pytest_plugins = ["perfgate.plugin"]`` does the same without installing). It stays inert in sessions
that do not use it: it switches on when a profile is named (``--perfgate-profile``, ``PERFGATE_PROFILE``,
the ``perfgate_profile`` ini option, or ``perfgate = true``) or when a collected test uses one of its
fixtures (``perf_server``, ``measure``, ``perf_check``, ``perf_baseline``, ``perf_candidate``, ``perf_compare``,
``step_profile``, ``perf_crosscheck``, ``micro_check``, ``perf_case``), wherever the test lives.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pytest

from perfgate.plugin.activation import activate, wants_perf
from perfgate.plugin.fixtures import (  # noqa: F401  (registered with this module: see perfgate.plugin.fixtures)
    _perfgate_run,
    measure,
    micro_check,
    perf_baseline,
    perf_candidate,
    perf_case,
    perf_check,
    perf_compare,
    perf_crosscheck,
    perf_server,
    perfgate_profile,
    perfgate_record,
    perfgate_state,
    step_profile,
)
from perfgate.plugin.options import (
    option_budget_seconds,
    option_cpus,
    option_fraction,
    option_max_starts,
    option_reports,
    option_seconds,
    option_starts,
    option_trials,
)
from perfgate.plugin.state import STATE, PerfgateState, state_of
from perfgate.record import case_of

MARKERS = {
    "baseline": "throughput floors for plain decoding (perfgate)",
    "speculative": "speculative decoding vs the baseline, acceptance length (perfgate)",
    "backends": "the backend compatibility matrix: one record per variant x mode (perfgate)",
    "stack_pair": "the current stack against --perfgate-candidate on this box, starts interleaved (perfgate)",
    "micro": "fast tier: all-reduce micro-benchmarks, no server (perfgate)",
    # pytest-xdist registers it too; perfgate tags every record with its config's group, with or without xdist
    "xdist_group(name)": "the pytest-xdist group of a record: its server config (perfgate.plugin.workers)",
    "load": "serving under load: goodput under the profile's [slo], the speculation crossover (perfgate)",
    "profile": "where each decode step's GPU time goes, from SGLang's own trace: all-reduces, backend (perfgate)",
    "perfgate(kind, modes, variants)": "a perfgate record of the given kind (perf_case or perf_server tests); "
                                       "modes=[...] and variants=True choose its configs",
}



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
                     "Default: the simulated seed box when no NVIDIA GPU is visible, else the profile matching "
                     "the GPUs.")
    g.addoption("--perfgate-url", default=None, metavar="URL",
                help="attach to a running server instead of launching; tests whose config differs are skipped")
    g.addoption("--perfgate-update-baselines", action="store_true", default=False,
                help="write the measured floors (with stack, date, n, CV) back into the profile")
    g.addoption("--perfgate-allow-hardware-mismatch", action="store_true", default=False,
                help="run a profile on hardware other than the one it is for")
    g.addoption("--perfgate-log-dir", default=None, metavar="DIR",
                help="where server logs go: one run-<time>-<pid> folder per session under DIR (default: "
                     "perfgate-logs/)")
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
    g.addoption("--perfgate-variants-file", default=None, metavar="PATH",
                help="variants file (default baselines/variants.toml)")
    g.addoption("--perfgate-crosscheck", default="auto", choices=("auto", "on", "off"),
                help="measure each mode with SGLang's own bench_one_batch_server too: auto = with the real engine "
                     "(default), on = also on the simulated server, off = never (saves ~1 min per mode)")
    g.addoption("--perfgate-calibrate", default="auto", choices=("auto", "on", "off"),
                help="calibrate the GPU at session start (HBM copy, bf16 GEMM; a few seconds, recorded as calib.*): "
                     "auto = with the real engine (default; the simulator's modelled figures for a simulated "
                     "profile; not when attached with --perfgate-url), on = also when attached, off = never")
    g.addoption("--perfgate-trials", default=None, type=option_trials, metavar="N",
                help="override the profile's trials (at least 3 for a confidence interval; fewer: numbers, no verdict)")
    g.addoption("--perfgate-starts", default=None, type=option_starts, metavar="N",
                help="start every config N times, interleaved with the configs it is compared with (A B, then B A: "
                     "alternated), and judge comparisons on the per-start pairs (default: the profile's [workload] "
                     "starts, else 1)")
    g.addoption("--perfgate-max-starts", default=None, type=option_max_starts, metavar="N",
                help="while a paired comparison (a stack pair, or a mode or variant against its baseline under "
                     "--perfgate-starts) is undecided, add interleaved start pairs up to N starts per config "
                     "(default: [workload] max_starts, else 6)")
    g.addoption("--perfgate-max-time", default=None, type=option_budget_seconds, metavar="S",
                help="seconds the start pairs added to undecided comparisons may take in the session "
                     "(default: [workload] max_time_s, else no limit but --perfgate-max-starts)")
    g.addoption("--perfgate-co-resident", default=None, type=option_fraction, metavar="FRACTION",
                help="run a paired comparison's two servers side by side, their trials and TTFT probes interleaved "
                     "request by request (both meet the host's state at the same moments), each server with "
                     "--mem-fraction-static FRACTION, e.g. 0.4 (docs/paired.md, co-resident arms)")
    g.addoption("--perfgate-server-cpus", default=None, type=option_cpus, metavar="CPUS",
                help="launch every server pinned to these CPUs (and every process it starts), e.g. 2-5 or 0,2,4-6, "
                     "or auto (one hyper-thread of each of 4 physical cores near the GPU; auto:N for N): where a "
                     "server's processes run can move its latency (docs/paired.md, TTFT by its legs)")
    g.addoption("--perfgate-noise-from", action="append", default=[], type=option_reports, metavar="PATH",
                help="judge the paired records against the noise earlier paired runs of the same config measured on "
                     "this machine (JUnit files, directories or globs; repeatable), not the documented priors "
                     "(docs/gate.md, noise measured on this box)")
    g.addoption("--perfgate-candidate", default=None, metavar="SPEC",
                help="the stack-pair records' candidate arm, against the current stack on this box: comma-separated "
                     "python=/venv/bin/python, env.NAME=VALUE, sim-stack=KEY=VER;KEY=VER, cpus=3|2-5|0;2|auto")
    g.addoption("--perfgate-startup-timeout", default=None, type=float, metavar="S",
                help="override the profile's server start-up timeout")
    g.addoption("--perfgate-progress-interval", default=15.0, type=option_seconds, metavar="S",
                help="while a server starts, print its phase and elapsed time at least every S seconds (default 15)")


def pytest_configure(config: pytest.Config) -> None:
    from perfgate.plugin.options import rootdir_taken_from_an_option

    rootdir_taken_from_an_option(config)
    for name, desc in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {desc}")
    config.stash[STATE] = PerfgateState(config)
    if wants_perf(config):  # named on the command line, in the environment or in the ini file
        activate(config, early=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    st = state_of(node.config)
    node.workerinput["perfgate_run"] = st.log_dir.name
    node.workerinput["perfgate_active"] = st.active


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under xdist, send all records of one server config to one worker (each config starts once)."""
    from perfgate.plugin.workers import SCHEDULED_DISTS, make_scheduler

    if not state_of(config).active or getattr(config.option, "dist", "load") not in SCHEDULED_DISTS:
        return None

    return make_scheduler(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    st = config.stash.get(STATE, None)
    if st is not None:
        from perfgate.errors import PerfgateError
        from perfgate.plugin.pool import stop_servers

        try:
            stop_servers(config)  # normally already done at sessionfinish
        except PerfgateError as e:
            sys.stderr.write(f"perfgate: server teardown failed: {e}\n")
        xml = getattr(config.option, "xmlpath", None)  # written by now (pytest's LogXML, at sessionfinish)
        if st.active and xml and not hasattr(config, "workerinput"):
            from perfgate.report.pairnoise import keep_paired, noise_auto

            if noise_auto() and Path(xml).is_file():  # the next session's noise on this box (stackpair.measured_noise)
                keep_paired(Path(xml), st.log_root, st.log_dir.name)


def pytest_sessionstart(session: pytest.Session) -> None:
    from perfgate.plugin.activation import add_suite_properties

    add_suite_properties(session.config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    from perfgate.plugin.collection import parametrize

    parametrize(metafunc)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order perf tests by server config (baseline configs first) so each config starts once."""
    from perfgate.plugin.collection import order_items
    from perfgate.plugin.usage import guarded

    guarded(config, items, lambda: order_items(config, items))


def pytest_collection_finish(session: pytest.Session) -> None:
    """The final selection checked before any test runs (a config the visible GPUs cannot hold)."""
    from perfgate.plugin.collection import check_selected
    from perfgate.plugin.usage import guarded

    guarded(session.config, session.items, lambda: check_selected(session))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    """A record skipped from perfgate's own code (inconclusive, missing dependency) is reported at the test
    that made it, as pytest does for skip marks, not at the line of perfgate that concluded it."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "setup" and rep.failed and _concluded(item, call):
        # the perf_server fixture concluded the record (a failed start, a server this record depends on): the
        # test's failure, as when the test itself concludes it, not an error of the set-up (a JUnit <error>)
        rep.when = "call"
    if rep.skipped and isinstance(rep.longrepr, tuple) and len(rep.longrepr) == 3:
        raw = Path(str(rep.longrepr[0]))
        candidates = ([raw] if raw.is_absolute()
                      else [item.config.invocation_params.dir / raw, item.config.rootpath / raw])
        if any(c.resolve().is_relative_to(_PACKAGE_DIR) for c in candidates):
            fspath, lineno, _ = item.reportinfo()
            rep.longrepr = (str(fspath), (lineno or 0) + 1, rep.longrepr[2])


_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # perfgate/


def _concluded(item: pytest.Item, call: Any) -> bool:
    """The failure is perfgate's conclusion of the item's record (PerfRun.conclude writes ``outcome`` first)."""
    exc = getattr(call, "excinfo", None)
    return (exc is not None and exc.errisinstance(pytest.fail.Exception) and case_of(item) is not None
            and any(k == "outcome" for k, _ in item.user_properties))


def pytest_report_collectionfinish(config: pytest.Config, start_path: Path, items: list[pytest.Item]) -> list[str]:
    if not any(case_of(it) is not None for it in items):
        return []
    from perfgate.plugin.terminal import banner

    return banner(state_of(config))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    st = config.stash.get(STATE, None)
    if st is None or st._profile is None:
        return
    from perfgate.plugin.terminal import summary

    summary(terminalreporter, st, worker=hasattr(config, "workerinput"))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """--perfgate-update-baselines: the floors are written here, whatever plugins are active (not from the
    terminal summary); under xdist a worker hands its updates to the controller, which writes them once."""
    config = session.config
    st = config.stash.get(STATE, None)
    if st is not None and hasattr(config, "workeroutput"):
        from perfgate.measuring.ledger import WORKEROUTPUT_KEY

        config.workeroutput[WORKEROUTPUT_KEY] = st.ledger.to_workeroutput()
    elif st is not None and st._profile is not None and st.settings.update_baselines:
        _write_updates(session, st)
    if st is not None:
        _teardown_servers(session, st)
    from perfgate.plugin.usage import at_finish

    at_finish(session)  # under xdist: a usage error a worker met while collecting


def _write_updates(session: pytest.Session, st: PerfgateState) -> None:
    """Write the floors; a profile that could not be written (perfgate.measuring.ledger.Ledger.write's red line) makes
    the session's exit status 1, never a silent 0."""
    from perfgate.plugin.state import LEDGER_REPORT as REPORT

    config = session.config
    lines = config.stash[REPORT] = st.ledger.write(st.profile.path)
    if config.pluginmanager.get_plugin("terminalreporter") is None:  # -p no:terminal: no summary to say it
        for line, _colour in lines:
            sys.stderr.write(line + "\n")
    if any(colour == "red" for _line, colour in lines) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _teardown_servers(session: pytest.Session, st: PerfgateState) -> None:
    """Stop the last server here (not only at unconfigure), so a teardown problem is a clear line and exit 1."""
    from perfgate.errors import PerfgateError
    from perfgate.plugin.pool import stop_servers

    try:
        stop_servers(session.config)
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
    """Under xdist, the controller adds a worker's ledger (its floor updates) to its own, to write at finish."""
    from perfgate.measuring.ledger import WORKEROUTPUT_KEY
    from perfgate.plugin.usage import from_worker

    from_worker(node)  # a usage error it met while collecting, said at finish
    st = node.config.stash.get(STATE, None)
    got = getattr(node, "workeroutput", {}).get(WORKEROUTPUT_KEY)
    if st is not None and got:
        st.ledger.merge(got)

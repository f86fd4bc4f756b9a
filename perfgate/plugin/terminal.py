"""What perfgate prints at the end of a session: the banner, server starts, baseline updates, the record
matrix, one line per record with its figure, interval and decision, and the step profiles (pytest's terminal
summary calls :func:`summary`); the records' matrix and lines are :mod:`perfgate.report.terminal`'s."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perfgate.plugin.pool import Attacher, pool_of
from perfgate.report.terminal import matrix_lines, profile_lines, record_lines, starts_line

if TYPE_CHECKING:
    from perfgate.plugin.state import PerfgateState

__all__ = ["banner", "summary", "attach_warnings", "write_updates"]


def summary(tr: Any, st: PerfgateState, *, worker: bool) -> None:
    """The ``perfgate`` section of the terminal summary (``worker``: an xdist worker's session)."""
    tr.section("perfgate")
    for line in banner(st):
        tr.write_line(line)
    pool = pool_of(st)
    m = pool.launched
    if m is not None:
        tr.write_line(f"perfgate: {m.starts} server start(s) for {len(set(m.started_configs))} distinct config(s)")
        line = starts_line(m.started_configs, st.selected_configs, st.settings)
        if line:
            tr.write_line(line)
    elif pool.attached:
        tr.write_line(f"perfgate: 0 server start(s): attached to {st.settings.url}")
    elif st.selected_configs and not worker:
        tr.write_line("perfgate: 0 server start(s)")
    if isinstance(pool, Attacher):
        attach_warnings(pool, tr)
    if st.settings.update_baselines and not worker:
        write_updates(st, tr)
    for line in matrix_lines(tr.stats):
        tr.write_line(line)
    for line in record_lines(tr.stats):
        tr.write_line(line)

    for line in profile_lines(tr.stats):
        tr.write_line(line)
    for line in dict.fromkeys((*st.dropped_modes, *st.unused_expectations)):
        tr.write_line(f"perfgate: {line}", yellow=True)


def banner(st: PerfgateState) -> list[str]:
    p = st.profile
    lines = [f"perfgate: profile {p.path} (engine {p.engine.name})"
             + (f" — {st.auto_reason}" if st.auto_reason else "")]
    if p.simulated:
        hw = p.hardware
        lines.append(
            f"perfgate: *** SIMULATED: these numbers come from perfgate's simulated SGLang server (a cost model of "
            f"{hw.count}x {hw.gpu}, {hw.interconnect.upper()}), not from real hardware ***"
        )
    else:
        from perfgate.profiles.noise import priors_said

        lines.append(f"perfgate: {priors_said(str(st.stack.gpu))}")
    if st.settings.url:
        lines.append(f"perfgate: attached to {st.settings.url} (no server is launched)")
    lines.append(f"perfgate: server logs in {st.log_dir}")
    for w in (*p.warnings, *st.variants.warnings):
        lines.append(f"perfgate: WARNING {w}")
    return lines


def attach_warnings(pool: Attacher, tr: Any) -> None:
    """Attach mode says what it could not verify on the server (environment variables), never silently."""
    unverified = pool.unverified()
    if unverified:
        tr.write_line("perfgate: WARNING attach mode cannot verify these settings of the attached server "
                      "(/server_info does not report them), assumed as the profile says: " + ", ".join(unverified),
                      yellow=True)


def write_updates(st: PerfgateState, tr: Any) -> None:
    """--perfgate-update-baselines: every change and every refusal (written at session finish,
    perfgate.measuring.ledger.Ledger.write)."""
    from perfgate.plugin.state import LEDGER_REPORT as REPORT

    for line, colour in st.config.stash.get(REPORT, []):
        tr.write_line(line, **({colour: True} if colour else {}))

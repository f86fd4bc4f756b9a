"""What perfgate prints at the end of a session: the banner, server starts, baseline updates, the record
matrix and the step profiles (pytest's terminal summary calls :func:`summary`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from perfgate.plugin.kinds import FLOOR, in_matrix, kind_of
from perfgate.plugin.pool import Attacher, pool_of

if TYPE_CHECKING:
    from perfgate.plugin.state import PerfgateState

__all__ = ["banner", "summary", "matrix_lines", "attach_warnings", "write_updates"]


def summary(tr: Any, st: PerfgateState, *, worker: bool) -> None:
    """The ``perfgate`` section of the terminal summary (``worker``: an xdist worker's session)."""
    tr.section("perfgate")
    for line in banner(st):
        tr.write_line(line)
    pool = pool_of(st)
    m = pool.launched
    if m is not None:
        tr.write_line(f"perfgate: {m.starts} server start(s) for {len(set(m.started_configs))} distinct config(s)")
        from perfgate.plugin.starts import starts_line

        if starts_line(st):
            tr.write_line(starts_line(st))
    elif pool.attached:
        tr.write_line(f"perfgate: 0 server start(s): attached to {st.opt('perfgate_url')}")
    elif st.selected_configs and not worker:
        tr.write_line("perfgate: 0 server start(s)")
    if isinstance(pool, Attacher):
        attach_warnings(pool, tr)
    if st.opt("perfgate_update_baselines") and not worker:
        write_updates(st, tr)
    for line in matrix_lines(tr.stats):
        tr.write_line(line)
    from perfgate.plugin.profiling import profile_lines

    for line in profile_lines(tr.stats):
        tr.write_line(line)
    for line in dict.fromkeys(st.dropped_modes):
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
    if st.opt("perfgate_url"):
        lines.append(f"perfgate: attached to {st.opt('perfgate_url')} (no server is launched)")
    lines.append(f"perfgate: server logs in {st.log_dir}")
    for w in (*p.warnings, *st.variants.warnings):
        lines.append(f"perfgate: WARNING {w}")
    return lines


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
            if not props.get("outcome") or not in_matrix(kind):
                continue
            mode = props.get("mode", "")
            k = kind_of(kind)
            if k is not None and k.matrix:
                row = props.get("variant") or ("(baseline)" if kind == FLOOR else "(speculation)")
            else:  # a user's record: one row per kind and metric
                row = (f"({kind}" + (f" {metric}" if metric else "") + ")"
                       + (f" +{props['variant']}" if props.get("variant") else ""))
            text = props["outcome"]
            if props.get("category"):
                text += f" {props['category']}"
            if metric and props.get(f"{metric}_low") is not None:  # an interval (goodput): [low, high)
                text += " " + interval_cell(props, metric)
            elif metric and props.get(metric):
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


def interval_cell(props: dict[str, Any], metric: str) -> str:
    """A record judged on an interval (goodput: ``<metric>_low``, ``<metric>_high``): ``[low, high)``, ``-`` for
    no high end, then the levels left unresolved (``?3.6,4``)."""
    from perfgate.plugin.loadcheck import GOODPUT_UNRESOLVED

    hi = props.get(f"{metric}_high")
    out = f"[{float(props[f'{metric}_low']):.4g}, {f'{float(hi):.4g}' if hi is not None else '-'})"
    if props.get(GOODPUT_UNRESOLVED):
        out += f" ?{props[GOODPUT_UNRESOLVED]}"
    return out


def attach_warnings(pool: Attacher, tr: Any) -> None:
    """Attach mode says what it could not verify on the server (environment variables), never silently."""
    unverified = pool.unverified()
    if unverified:
        tr.write_line("perfgate: WARNING attach mode cannot verify these settings of the attached server "
                      "(/server_info does not report them), assumed as the profile says: " + ", ".join(unverified),
                      yellow=True)


def write_updates(st: PerfgateState, tr: Any) -> None:
    """--perfgate-update-baselines: every change and every refusal (written at session finish,
    perfgate.plugin.ledger.Ledger.write)."""
    from perfgate.plugin.ledger import REPORT

    for line, colour in st.config.stash.get(REPORT, []):
        tr.write_line(line, **({colour: True} if colour else {}))

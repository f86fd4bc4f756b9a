"""Collection: which records a perf test produces (parametrization from the profile), in what order they run
(by server config, so each config starts once), and which of them a CI cell keeps."""

from __future__ import annotations

import re
from typing import Any

import pytest

from perfgate.kinds import FLOOR, Compares, kind_of, run_order
from perfgate.plugin.activation import activate_late
from perfgate.plugin.state import PERF_FIXTURES, PerfgateState, state_of
from perfgate.profiles.cases import cases as cases_of
from perfgate.profiles.cases import why_none
from perfgate.record import Case, case_of

__all__ = ["parametrize", "order_items", "select_cell", "check_selected", "check_expectation_names"]


#: a usage error met while parametrizing: pytest would make it a collection error of that module (exit 2, a
#: traceback); kept here and raised again when collection ends, so the run ends as a usage error (exit 4) with
#: one message, whichever directory the test is in
_USAGE = pytest.StashKey[pytest.UsageError]()


def parametrize(metafunc: pytest.Metafunc) -> None:
    """``perf_server`` / ``perf_case`` tests get one parameter per record of their kind (``Case.id`` as the id)."""
    from perfgate.errors import PerfgateError

    try:
        _parametrize(metafunc)
    except (pytest.UsageError, PerfgateError) as e:
        err = e if isinstance(e, pytest.UsageError) else pytest.UsageError(f"perfgate: {e}")
        metafunc.config.stash.setdefault(_USAGE, err)


def _parametrize(metafunc: pytest.Metafunc) -> None:
    mark = metafunc.definition.get_closest_marker("perfgate")
    if "micro_case" in metafunc.fixturenames:  # the micro tier (kind allreduce): no server, cell 1 of a shard
        activate_late(metafunc.config)
        from perfgate.plugin.microcheck import micro_cases

        cases = micro_cases(state_of(metafunc.config))
        metafunc.parametrize("micro_case", cases, ids=[c.id for c in cases])
        return
    if "perf_server" in metafunc.fixturenames:
        activate_late(metafunc.config)
        kw = mark.kwargs if mark is not None else {}
        st = state_of(metafunc.config)
        st.kinds_collected.add(str(kw.get("kind", "custom")))
        cases = cases_of(st, str(kw.get("kind", "custom")), modes=kw.get("modes"),
                         variants=bool(kw.get("variants")), where=metafunc.definition.nodeid)
        metafunc.parametrize("perf_server", _params(st, cases, metafunc.config), ids=[c.id for c in cases],
                             indirect=True)
        return
    if "perf_case" not in metafunc.fixturenames:
        return
    if mark is None or "kind" not in mark.kwargs:
        raise pytest.UsageError(f"perfgate: {metafunc.definition.nodeid} uses perf_case without "
                                f"@pytest.mark.perfgate(kind=...)")
    activate_late(metafunc.config)
    st = state_of(metafunc.config)
    kind = mark.kwargs["kind"]
    st.kinds_collected.add(str(kind))
    cases = cases_of(st, kind, modes=mark.kwargs.get("modes"), variants=bool(mark.kwargs.get("variants")),
                     where=metafunc.definition.nodeid)
    metafunc.parametrize("perf_case", _params(st, cases, metafunc.config), ids=[c.id for c in cases])


def _params(st: PerfgateState, cases: list[Case], config: pytest.Config) -> list[Any]:
    """The cases as parameters: a kind marked like the mode it checks (the cross-check) carries that mode's marker,
    so -m baseline / -m speculative select it; a user's kind carries a marker of its own name, so -m <kind> selects
    its records as -m baseline, -m load, ... select the built-in ones."""
    k = kind_of(cases[0].kind) if cases else None
    if k is None:
        mark = kind_marker(config, cases[0].kind) if cases else None
        return [pytest.param(c, marks=[mark]) for c in cases] if mark is not None else list(cases)
    if not k.marked_as_mode:
        return list(cases)
    p = st.profile
    return [pytest.param(c, marks=[pytest.mark.speculative if p.modes[c.mode].speculative else pytest.mark.baseline])
            for c in cases]


#: a name that pytest's -m expression reads as one identifier (not one of its keywords), and pytest.mark accepts
_MARK_NAME = re.compile(r"[A-Za-z][\w:+\-.]*")
_MARK_KEYWORDS = {"and", "or", "not", "True", "False", "None"}


def kind_marker(config: pytest.Config, kind: str) -> pytest.MarkDecorator | None:
    """The marker a user's kind gives its records (``-m <kind>``), registered as perfgate's (so ``--strict-markers``
    accepts it, and the update command a record prints selects with it). None where the name is no marker name, or
    a marker of that name is registered by someone else (pytest's ``skip``, a plugin's, the user's own): that
    marker keeps its meaning, and the user puts it on the tests where they want it."""
    if not _MARK_NAME.fullmatch(kind) or kind in _MARK_KEYWORDS:
        return None
    lines = {str(line).split(":")[0].split("(")[0].strip(): str(line) for line in config.getini("markers")}
    line = lines.get(kind)
    if line is None:
        config.addinivalue_line("markers", f"{kind}: the records of the test kind '{kind}' "
                                           f"(@pytest.mark.perfgate(kind=...)) (perfgate)")
    elif not line.endswith("(perfgate)"):
        return None
    return getattr(pytest.mark, kind)  # type: ignore[no-any-return]


def order_items(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order perf tests by server config (baseline configs first) so each config starts once; tag each with its
    config's ``xdist_group``; keep only this CI cell's configs (``--perfgate-shard`` / ``--perfgate-configs``)."""
    err = config.stash.get(_USAGE, None)
    if err is not None:
        raise err
    st = state_of(config)
    if not st.active and any(PERF_FIXTURES & set(getattr(it, "fixturenames", ())) for it in items):
        activate_late(config)
    if not st.active:
        return
    check_expectation_names(st)
    # a record kind this profile has no case for (e.g. no concurrency sweep) is deselected, not skipped
    empty = [it for it in items if it.get_closest_marker("perfgate") is not None and case_of(it) is None
             and {"perf_case", "perf_server"} & set(getattr(it, "fixturenames", ()))]
    if empty:
        config.hook.pytest_deselected(items=empty)
        items[:] = [it for it in items if it not in empty]
        _say_why_deselected(st, empty)
    perf = [it for it in items if case_of(it) is not None]
    if not perf:  # nothing to order (e.g. only the micro tier): a CI cell still keeps only its share
        select_cell(config, st, items)
        return
    first_seen: dict[str, int] = {}
    keyed: list[tuple[tuple[float, ...], pytest.Item]] = []
    base = st.profile.baseline_mode()
    base_key = st.config_for(Case(st.profile.name, FLOOR, base)).key
    for idx, it in enumerate(items):
        case = case_of(it)
        if case is None:
            keyed.append(((0, 0, 0, idx), it))
            continue
        cfg = st.config_for(case)
        key = cfg.key
        it.add_marker(pytest.mark.xdist_group(name=f"perfgate:{key}"))  # perfgate.plugin.workers groups the same way
        st.selected_configs[key] = cfg
        k = kind_of(case.kind)
        if k is not None and k.compares in (Compares.BASELINE_MODE, Compares.OWN_MODE):
            bcfg = st.config_for(case.baseline(case.mode if k.compares is Compares.OWN_MODE else base))
            st.selected_configs[bcfg.key] = bcfg
        first_seen.setdefault(key, len(first_seen))
        is_base = key == base_key  # by config: a variant that changes nothing runs on the baseline's server
        keyed.append(((1, 0 if is_base else 1, first_seen[key], run_order(case.kind), idx), it))
    items[:] = [it for _, it in sorted(keyed, key=lambda t: t[0])]
    select_cell(config, st, items)


def _say_why_deselected(st: PerfgateState, empty: list[pytest.Item]) -> None:
    """One summary line per record kind this profile has no case for: its tests, and why (not once per test)."""
    by_kind: dict[str, list[str]] = {}
    for it in empty:
        mark = it.get_closest_marker("perfgate")
        by_kind.setdefault(str(mark.kwargs.get("kind", "")) if mark else "", []).append(it.nodeid.split("[")[0])
    for kind, ids in by_kind.items():
        why = why_none(st, kind)
        if why:
            tests = list(dict.fromkeys(ids))
            st.dropped_modes.append(f"{len(tests)} test(s) of kind '{kind}' deselected ({', '.join(tests)}): {why}")


def check_selected(session: pytest.Session) -> None:
    """What the final selection (after -m / -k) must hold before any test runs: each selected config fits the GPUs
    visible here (perfgate.plugin.activation.check_gpus)."""
    st = state_of(session.config)
    if not st.active:
        return
    from perfgate.plugin.activation import check_gpus

    configs = {st.config_for(c).key: st.config_for(c) for c in map(case_of, session.items) if c is not None}
    check_gpus(st, configs.values())


def check_expectation_names(st: PerfgateState) -> None:
    """``[expectations.<name>]`` names a variant, a built-in kind or a record kind of a collected test
    (``@pytest.mark.perfgate(kind=...)``): the kinds are known only now. A name close to a known one is a typo
    (a usage error naming the file, the key and the fix); any other may be the kind of a test this run did not
    collect, and the summary says no record used it."""
    from perfgate.kinds import KINDS
    from perfgate.plugin.activation import expectation_line

    p, vs = st.profile, st.variants
    builtin = sorted(k.name for k in KINDS.values() if k.expectation)
    known = set(vs.variants) | set(builtin) | st.kinds_collected
    for n in p.expectations:
        if n in known or n.startswith("allreduce:"):  # the micro tier's names are checked by the loader
            continue
        import difflib

        where = f"{p.path}: [expectations.{n}] (line {expectation_line(p, n)})"
        own = sorted(st.kinds_collected - set(KINDS))
        close = difflib.get_close_matches(n, sorted(known), n=1)
        if close:
            raise pytest.UsageError(
                f"perfgate: {where} names '{n}', which is not a variant of {vs.path}, a built-in kind "
                f"({', '.join(builtin)}) or the kind of a collected test ({', '.join(own) or 'none'}); "
                f"fix: did you mean '{close[0]}'? (a test's kind is its @pytest.mark.perfgate(kind=\"...\"))")
        st.unused_expectations.append(
            f"{where}: no variant, built-in kind or collected test's kind (@pytest.mark.perfgate(kind=\"{n}\")) "
            f"is named '{n}', so no record of this run used it")


def select_cell(config: pytest.Config, st: PerfgateState, items: list[pytest.Item]) -> None:
    """--perfgate-shard / --perfgate-configs: keep the records of this cell's configs only."""
    shard, keys_opt = st.settings.shard, st.settings.configs
    if not shard and not keys_opt:
        return
    if shard and keys_opt:
        raise pytest.UsageError("perfgate: --perfgate-shard and --perfgate-configs pick the same thing; give one")
    from perfgate.profiles.fleet import config_costs, shard_keys

    if shard:
        try:
            keys = shard_keys(config_costs(st.profile, st.variants, settings=st.settings), shard)
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
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for it in items:
        case = case_of(it)
        own = st.config_for(case).key in keys if case is not None else rest
        (keep if own else drop).append(it)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep

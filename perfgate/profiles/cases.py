"""The records a profile asks for, kind by kind, as the record-kind registry (perfgate.kinds) says: the profile, the
session's settings and variants decide them, read through :class:`CaseSource` (the pytest layer's
``CaseSource`` is one), so anything that plans a session (the plugin's collection, a fleet plan) asks here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from perfgate.kinds import VARIANT, Cases, kind_of
from perfgate.record import Case

if TYPE_CHECKING:
    from perfgate.profiles import Profile
    from perfgate.profiles.settings import Settings
    from perfgate.profiles.variants import VariantSet

__all__ = ["CaseSource", "cases", "why_none"]


class CaseSource(Protocol):
    """What the cases are read from (perfgate.plugin.state.CaseSource is one)."""

    #: marker modes this profile lacks, said in the session's summary (appended to)
    dropped_modes: list[str]

    @property
    def profile(self) -> Profile: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def variants(self) -> VariantSet: ...


def cases(st: CaseSource, kind: str, *, modes: list[str] | None = None, variants: bool = False,
          where: str = "") -> list[Case]:
    """The records of one kind this profile asks for. Built-in kinds decide their own cases; any other
    kind (a user's, or a marked one such as ``profile``) gets one per mode (``modes``: those named, in that
    order) and, with ``variants``, one per variant in each of the profile's variant modes. The micro tier's
    cases come from :func:`perfgate.plugin.microcheck.micro_cases` (no server config)."""
    k = kind_of(kind)
    if k is None or k.cases is Cases.AS_MARKED:
        return _marked_cases(st, kind, modes, variants, where)
    p = st.profile
    names = list(p.modes)
    if k.option is not None:  # e.g. --perfgate-crosscheck: auto = only where SGLang serves
        when = getattr(st.settings, k.option)
        if when == "off" or st.settings.url or (when == "auto" and p.simulated):
            return []
    if k.cases is Cases.PLAIN_MODES:
        return [Case(p.name, kind, m) for m in names if not p.modes[m].speculative]
    if k.cases is Cases.SPECULATIVE_MODES:
        return [Case(p.name, kind, m) for m in names if p.modes[m].speculative]
    if k.cases is Cases.EVERY_MODE:
        return [Case(p.name, kind, m) for m in names]
    if k.cases is Cases.ON_BASELINE:
        return [Case(p.name, kind, p.baseline_mode())] if p.workload.concurrency_sweep else []
    if k.cases is Cases.PER_VARIANT:
        chosen = list(p.variant_include) if p.variant_include is not None else list(st.variants.variants)
        wanted = st.settings.variants
        if wanted:
            chosen = [n for n in chosen if n in wanted]
        for n in chosen:
            st.variants.get(n)  # validates the name
        return [Case(p.name, kind, m, n) for n in chosen for m in p.variant_modes]
    raise ValueError(f"perfgate: kind {kind!r} has {k.cases.value}: its cases come from "
                     f"perfgate.plugin.microcheck.micro_cases")


def _marked_cases(st: CaseSource, kind: str, modes: list[str] | None, variants: bool, where: str) -> list[Case]:
    p = st.profile
    names = list(p.modes) if modes is None else list(modes)
    unknown = [m for m in names if m not in p.modes]
    if unknown:  # a test file serves many profiles: a mode this one lacks is not run, and the summary says so
        from perfgate.profiles.reader import _close

        st.dropped_modes.append(f"{where or kind}: modes {unknown} are not modes of {p.path} "
                                f"({', '.join(p.modes)}), not run; {_close(unknown[0], list(p.modes))}")
        names = [m for m in names if m in p.modes]
    out = [Case(p.name, kind, m) for m in names]
    if variants:
        out += [c for c in cases(st, VARIANT) if c.mode in names]
        out = [Case(p.name, kind, c.mode, c.variant) for c in out]
    return out


def why_none(st: CaseSource, kind: str) -> str:
    """Why this profile asks for no record of ``kind`` (:func:`cases` gave none), with what would ask for one; ""
    when the reason is said elsewhere (a marker's modes this profile lacks: ``st.dropped_modes``)."""
    k = kind_of(kind)
    p = st.profile
    if k is None or k.cases is Cases.AS_MARKED:
        return ""
    if k.option is not None:
        flag = f"--perfgate-{k.option}"
        when = getattr(st.settings, k.option)
        if when == "off":
            return f"{flag} off; fix: {flag} on"
        if st.settings.url:
            return "the server is attached (--perfgate-url); fix: drop --perfgate-url to run them"
        if when == "auto" and p.simulated:
            return f"{flag} auto runs them only where SGLang serves, not on the simulated {p.path}"
    if k.cases is Cases.ON_BASELINE:
        return (f"{p.path} has no [workload] concurrency_sweep; fix: add the levels there, e.g. "
                f"concurrency_sweep = [1, 4, 16]")
    if k.cases is Cases.SPECULATIVE_MODES:
        return f"{p.path} has no speculative mode"
    if k.cases is Cases.PLAIN_MODES:
        return f"{p.path} has no mode without speculative decoding"
    if k.cases is Cases.PER_VARIANT:
        return (f"no variant chosen ({p.path} [variants] include, --perfgate-variants); fix: name one of "
                f"{st.variants.path} there")
    return ""

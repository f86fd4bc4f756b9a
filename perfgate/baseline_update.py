"""``--perfgate-update-baselines``: write measured floors back into a profile, keeping its layout.

Only the keys that change are touched (tomlkit keeps every comment, blank line and the order of
the file); each updated mode gets a ``[floors.<mode>.measured]`` table with the date, trials,
CV and the stack fingerprint. The result is loaded again before this returns; a file that would
no longer load is put back as it was and :class:`~perfgate.errors.ConfigError` is raised.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
import datetime as _dt
from typing import TYPE_CHECKING, Any

import tomlkit

from perfgate.errors import ConfigError, PerfgateError
from perfgate.record import Case
from perfgate.verdict import Verdict, pct

if TYPE_CHECKING:
    from perfgate.metrics import Measurement
    from perfgate.session import PerfgateState

DEFAULT_TOLERANCE = 0.03


def write_updates(path: Path, updates: Sequence[tuple[str, str, object, object]],
                  meta: Mapping[str, Mapping[str, object]]) -> Path:
    """Set ``[floors.<mode>] <key> = new`` and ``[floors.<mode>.measured]`` (comments are kept)."""
    from perfgate.profiles.load import load_profile

    path = Path(path)
    original = path.read_text()
    try:
        known = set(load_profile(path).floors)  # floors this profile has, with an ``extends`` parent's
    except PerfgateError:
        known = set()
    doc = tomlkit.parse(original)
    floors: Any = doc.get("floors")
    if floors is None:
        floors = tomlkit.table(is_super_table=True)
        doc["floors"] = floors
    for mode, key, _old, new in updates:
        if mode not in floors:
            t = tomlkit.table()
            if key == "tok_s" and mode not in known:
                t["tolerance"] = DEFAULT_TOLERANCE
            floors[mode] = t
        floors[mode][key] = new
    for mode, m in meta.items():
        if mode not in floors:
            continue
        values = {k: (v if isinstance(v, (int, float, bool)) else str(v)) for k, v in m.items()}
        measured = floors[mode].get("measured")
        if measured is None:
            measured = tomlkit.table()
            floors[mode]["measured"] = measured
        for k in [k for k in measured if k not in values]:
            del measured[k]  # stale facts of an older measurement
        for k, v in values.items():
            measured[k] = v
    path.write_text(tomlkit.dumps(doc))
    try:
        load_profile(path)
    except PerfgateError as e:
        path.write_text(original)
        raise ConfigError(f"updating {path} would break it ({e}); the file was left as it was") from None
    return path


# ----------------------------------------------------------------------------- during the run


def refuse_update(state: PerfgateState, case: Case, why: str) -> None:
    """--perfgate-update-baselines: this record's floor is not written, and the summary says why."""
    key = {"floor": "tok_s", "acceptance": "accept_len"}.get(case.kind)
    if key is not None and state.opt("perfgate_update_baselines"):
        state.update_refused.append((case.mode, key, why))

def note_update(state: PerfgateState, mode: str, key: str, old: object, m: Measurement, v: Verdict) -> None:
    """Remember a floor to write; never from a failed, noisy or inconclusive measurement."""
    st = state
    if not st.opt("perfgate_update_baselines"):
        return
    new = m.tok_s.median if key == "tok_s" and m.tok_s else m.accept_len if key == "accept_len" else None
    why = ""
    if m.failures:
        why = f"{m.failures} request(s) failed"
    elif new is None:
        why = "nothing was measured"
    elif v.category == "noisy" or v.outcome == "inconclusive":
        why = v.message.removeprefix("inconclusive: ")
    elif m.tok_s is not None and m.tok_s.cv is not None and m.tok_s.cv > st.profile.workload.max_cv:
        why = (f"too noisy: CV {pct(m.tok_s.cv)} of {m.tok_s.n} trials exceeds the profile's max_cv "
               f"{pct(st.profile.workload.max_cv)}")
    elif v.outcome == "fail" and v.category != "slower-than-baseline":
        why = f"the measurement failed ({v.category})"
    if why:
        st.update_refused.append((mode, key, why))
        return
    assert new is not None
    st.updates.append((mode, key, old, round(float(new), 2)))
    meta = st.update_meta.setdefault(mode, {})
    meta.update({
        "date": _dt.date.today().isoformat(),
        "n": m.tok_s.n if m.tok_s else 0,
        "cv": round(m.tok_s.cv, 4) if m.tok_s and m.tok_s.cv is not None else 0.0,
        "engine": st.profile.engine.name,
        "attention_backend": str(st.config_for(Case(st.profile.name, "floor", mode, None)).flag_dict.get("attention-backend", "auto")),
        **({"attached": st.opt("perfgate_url")} if st.opt("perfgate_url") else {}),
        **{k.removeprefix("stack."): v for k, v in st.stack.as_properties().items()},
    })

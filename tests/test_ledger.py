"""The ledger (perfgate.measuring.ledger.Ledger): what a session measured and the floors it writes. A worker's ledger
shipped to the xdist controller (plain JSON, as execnet carries it) and merged there is the one session's record
of the same notes; writing at finish lists every refusal, says when nothing was measured and never breaks a
profile. The runs that write floors with and without the terminal, under xdist and without, are
tests/test_update_at_finish.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from perfgate.measuring.ledger import WORKEROUTPUT_KEY, Ledger
from tests.test_measurement import PROFILE

TABLES = hs.sampled_from(["baseline", "eagle3", "baseline.c8", "eagle3.c32"])
KEYS = hs.sampled_from(["tok_s", "accept_len", "ttft_ms", "itl_ms_p99"])
NUMBERS = hs.floats(allow_nan=False, allow_infinity=False, width=64)
FACTS = hs.dictionaries(hs.sampled_from(["date", "n", "cv", "engine", "machine", "concurrency", "attached"]),
                        hs.one_of(hs.integers(-10**6, 10**6), NUMBERS, hs.booleans(), hs.text(max_size=12)),
                        max_size=4)
UPDATE = hs.tuples(hs.just("update"), TABLES, KEYS, hs.one_of(hs.none(), NUMBERS), NUMBERS, FACTS)
REFUSAL = hs.tuples(hs.just("refuse"), TABLES, KEYS, hs.text(max_size=20))
#: a note and the worker (0 or 1) that made it
NOTES = hs.lists(hs.tuples(hs.one_of(UPDATE, REFUSAL), hs.integers(0, 1)), max_size=12)


def _note(ledger: Ledger, note: tuple[Any, ...]) -> None:
    if note[0] == "update":
        _, table, key, old, new, facts = note
        ledger.note_update(table, key, old, new, facts)
    else:
        _, table, key, why = note
        ledger.refuse(table, key, why)


def _shipped(ledger: Ledger) -> Any:
    """What reaches the controller: the worker's output through JSON (execnet carries no tuples of ours)."""
    return json.loads(json.dumps(ledger.to_workeroutput()))


@settings(max_examples=200)
@given(NOTES)
def test_two_workers_merged_are_the_one_session_record_of_the_same_notes(notes: list[tuple[Any, int]]) -> None:
    workers = [Ledger(), Ledger()]
    for note, w in notes:
        _note(workers[w], note)
    session = Ledger()  # one process making worker 0's notes, then worker 1's (the order the workers end in)
    for w in (0, 1):
        for note, by in notes:
            if by == w:
                _note(session, note)
    controller = Ledger()
    for worker in workers:
        controller.merge(_shipped(worker))
    assert controller.updates == session.updates and controller.refused == session.refused
    assert controller.meta == session.meta
    assert controller.to_workeroutput() == session.to_workeroutput()
    assert len(controller.updates) == sum(1 for note, _ in notes if note[0] == "update")


@given(NOTES)
def test_merging_an_empty_ledger_changes_nothing(notes: list[tuple[Any, int]]) -> None:
    ledger = Ledger()
    for note, _ in notes:
        _note(ledger, note)
    before = ledger.to_workeroutput()
    ledger.merge(_shipped(Ledger()))
    assert ledger.to_workeroutput() == before


def test_measurements_step_profiles_and_starts_stay_in_their_process() -> None:
    ledger = Ledger()
    m, prof = object(), object()  # the ledger keeps them as given (a Measurement, a StepProfile)
    ledger.note_measurement("cfg-a@c8", m)  # type: ignore[arg-type]  # a stand-in: kept as given, never read
    ledger.note_step_profile("cfg-a", prof)  # type: ignore[arg-type]  # a stand-in: kept as given, never read
    ledger.note_measured_start(2)
    assert ledger.measurement("cfg-a@c8") is m and ledger.measurement("cfg-a") is None
    assert ledger.step_profile("cfg-a") is prof and ledger.step_profile("cfg-b") is None
    assert ledger.start_measured(2) and not ledger.start_measured(1)
    assert ledger.to_workeroutput() == {"updates": [], "meta": {}, "refused": []}  # nothing of theirs is shipped


def test_the_shipped_facts_are_a_copy() -> None:
    ledger = Ledger()
    ledger.note_update("baseline", "tok_s", 80.0, 90.0, {"n": 3})
    out = ledger.to_workeroutput()
    out["meta"]["baseline"]["n"] = 99
    ledger.meta["baseline"]["n"] = 98
    assert ledger.to_workeroutput()["meta"] == {"baseline": {"n": 3}}


@pytest.mark.parametrize("shipped", [{"updates": []}, {"updates": [["baseline", "tok_s"]], "meta": {}, "refused": []},
                                     {"updates": [], "meta": [], "refused": []}])
def test_a_malformed_shipment_names_the_key_and_the_fix(shipped: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=rf"workeroutput\[{WORKEROUTPUT_KEY!r}\] is not a ledger .*one perfgate "
                                         r"version"):
        Ledger().merge(shipped)


def _profile(tmp_path: Path) -> Path:
    prof = tmp_path / "baselines" / "t" / "m.toml"
    prof.parent.mkdir(parents=True)
    prof.write_text(PROFILE.replace("STARTUP", "0.2").replace("MAXCV", "0.5").replace("EXTRA_WORKLOAD", ""))
    return prof


def test_writing_lists_each_refusal_and_says_when_nothing_was_measured(tmp_path: Path) -> None:
    prof = _profile(tmp_path)
    before = prof.read_text()
    ledger = Ledger()
    ledger.refuse("baseline", "tok_s", "too noisy")
    assert ledger.write(prof) == [
        (f"perfgate: NOT updated {prof} [floors.baseline] tok_s: too noisy", "yellow"),
        ("perfgate: --perfgate-update-baselines: nothing measured to write", ""),
    ]
    assert prof.read_text() == before


def test_writing_sets_each_floor_once_and_never_breaks_the_profile(tmp_path: Path) -> None:
    from perfgate.profiles.load import load_profile

    prof = _profile(tmp_path)
    ledger = Ledger()
    ledger.note_update("baseline", "tok_s", 80.0, 91.5, {"n": 3, "cv": 0.01, "date": "2026-01-02"})
    ledger.refuse("eagle3", "accept_len", "2 request(s) failed")
    assert ledger.write(prof) == [
        (f"perfgate: NOT updated {prof} [floors.eagle3] accept_len: 2 request(s) failed", "yellow"),
        (f"perfgate: updated {prof} [floors.baseline] tok_s: 80.0 -> 91.5", ""),
    ]
    floor = load_profile(prof).floors["baseline"]
    assert floor.tok_s == 91.5 and floor.measured == {"n": 3, "cv": 0.01, "date": "2026-01-02"}
    good = prof.read_text()
    broken = Ledger()
    broken.note_update("baseline", "tok_s", 91.5, -1.0, {})
    [(line, colour)] = broken.write(prof)
    assert colour == "red" and f"{prof} NOT written" in line and "would break it" in line
    assert prof.read_text() == good


def test_a_floor_written_later_keeps_its_own_stamp_and_leaves_the_other_floors(tmp_path: Path) -> None:
    """A crossover floor from one run, a goodput floor from a later one on another machine: each keeps the facts of
    the measurement it came from, and a rewrite of one replaces only its own."""
    import tomlkit

    from perfgate.profiles.load import load_profile
    from perfgate.profiles.writer import STAMPED, write_updates

    prof = _profile(tmp_path)
    write_updates(prof, [("eagle3", "crossover", None, 18.0)],
                  {"eagle3": {"machine": "aaa", "crossover_ci": "18-20", "report": "x.xml"}})
    write_updates(prof, [("eagle3", "goodput_rps", None, 30.0)], {"eagle3": {"machine": "bbb", "cv": 0.001}})

    def stamp() -> dict[str, Any]:
        doc = tomlkit.parse(prof.read_text())
        measured: dict[str, Any] = json.loads(json.dumps(doc["floors"]["eagle3"]["measured"]))
        return measured

    assert stamp() == {"machine": "aaa", "crossover_ci": "18-20", "report": "x.xml", STAMPED: "crossover",
                       "goodput_rps": {"machine": "bbb", "cv": 0.001}}
    floor = load_profile(prof).floors["eagle3"]
    assert floor.limits["crossover"] == 18.0 and floor.limits["goodput_rps"] == 30.0
    # the crossover measured again: its facts get their own table, and the table's own facts (only its) go
    write_updates(prof, [("eagle3", "crossover", 18.0, 19.0)], {"eagle3": {"machine": "ccc"}})
    assert stamp() == {"goodput_rps": {"machine": "bbb", "cv": 0.001}, "crossover": {"machine": "ccc"}}
    # both measured in one run: each its own stamp still, as the profile's accept_len was written by hand
    write_updates(prof, [("eagle3", "crossover", 19.0, 19.5), ("eagle3", "goodput_rps", 30.0, 31.0)],
                  {"eagle3": {"machine": "ddd"}})
    assert stamp() == {"goodput_rps": {"machine": "ddd"}, "crossover": {"machine": "ddd"}}
    # every limit of the table measured in one run: one stamp for the table again, in place
    write_updates(prof, [("eagle3", k, None, v) for k, v in (("crossover", 20.0), ("goodput_rps", 32.0),
                                                              ("accept_len", 2.5))], {"eagle3": {"machine": "eee"}})
    assert stamp() == {"machine": "eee"}


GOLDEN_FLOORS = '''
# floors, measured on the seed box
[floors.baseline]
tok_s = 80.0  # the floor guarded by test_decode_floor
tolerance = 0.05

# latency ceilings at 4 streams, set by hand from the 2026-11 run
[floors.baseline.c4]
ttft_ms = 300.0

# acceptance: the drafter's own floor
[floors.eagle3]
# written by hand, before the drafter was retrained
accept_len = 1.5
'''

#: what the update writes: every comment still right above the table or key it was written for
GOLDEN_UPDATED = '''
# floors, measured on the seed box
[floors.baseline]
tok_s = 90.0  # the floor guarded by test_decode_floor
tolerance = 0.05

# latency ceilings at 4 streams, set by hand from the 2026-11 run
[floors.baseline.c4]
ttft_ms = 300.0
output_tok_s = 120.0

[floors.baseline.c4.measured]
n = 5
concurrency = 4
keys = "output_tok_s"

[floors.baseline.measured]
n = 5
machine = "aaa"

# acceptance: the drafter's own floor
[floors.eagle3]
# written by hand, before the drafter was retrained
accept_len = 2.0
tok_s = 57.0

[floors.eagle3.measured]
n = 5

# the workload: short, the simulated rates need no long runs
[workload]
'''


def test_the_update_keeps_each_comment_above_the_table_or_key_it_describes(tmp_path: Path) -> None:
    """Issue 32: --perfgate-update-baselines put its [floors.<mode>.measured] stamp (and a new key) between a
    user's comment and the table the comment described. A golden profile text, updated twice."""
    from perfgate.profiles.load import load_profile
    from perfgate.profiles.writer import write_updates

    head, workload = PROFILE.replace("STARTUP", "0.2").split("\n# the workload")
    workload = "\n# the workload" + workload.split("# floors, deliberately")[0].replace("MAXCV", "0.5").replace(
        "EXTRA_WORKLOAD\n", "")
    prof = tmp_path / "baselines" / "t" / "m.toml"
    prof.parent.mkdir(parents=True)
    prof.write_text(head + "\n" + GOLDEN_FLOORS + workload)
    write_updates(prof, [("baseline", "tok_s", 80.0, 90.0), ("baseline.c4", "output_tok_s", None, 120.0),
                         ("eagle3", "accept_len", 1.5, 2.0), ("eagle3", "tok_s", None, 57.0)],
                  {"baseline": {"n": 5, "machine": "aaa"}, "baseline.c4": {"n": 5, "concurrency": 4},
                   "eagle3": {"n": 5}})
    text = prof.read_text()
    assert text.startswith(head + "\n")
    assert text[len(head) + 1:] == GOLDEN_UPDATED + workload.split("[workload]\n", 1)[1]
    # measured again: the stamp's facts refreshed in place, a new fact above the comment that leads to eagle3
    write_updates(prof, [("baseline", "tok_s", 90.0, 91.0)], {"baseline": {"n": 6, "cv": 0.01}})
    again = prof.read_text()
    assert "[floors.baseline.measured]\nn = 6\ncv = 0.01\n\n# acceptance: the drafter's own floor\n[floors.eagle3]\n" \
        in again
    assert again.replace("tok_s = 91.0", "tok_s = 90.0").replace("n = 6\ncv = 0.01\n", 'n = 5\nmachine = "aaa"\n') \
        == text
    floors = load_profile(prof).floors
    assert floors["baseline"].tok_s == 91.0 and floors["eagle3"].accept_len == 2.0 and floors["eagle3"].tok_s == 57.0

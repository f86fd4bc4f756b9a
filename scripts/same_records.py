"""Do two perfgate runs give the same records? A refactoring's check: the JUnit file of a run before the change
against one after it, on the same box.

    python scripts/same_records.py BEFORE.xml AFTER.xml [--rel 0.01] [--noise NAME,...]

Every record (test case) of either file must be in both, with the same pytest result (passed, failed,
skipped, xfailed, error), the same ``outcome``, ``category`` and ``expected`` properties and the same set of
property names. A numeric property must agree within ``--rel`` (relative; default 1 %: a simulated run's
numbers jitter a little between runs); a text of several words (a reason) must be the same with its numbers
masked (they are its figures, compared as properties of their own, or the times of the log lines it quotes); a
one-word text (a key, an id, a version) exactly; a path by its file name (the run's directory differs). The
``--noise`` properties (default: every CV, ``startup_s``) are the run's noise, not its figures: present in both,
not compared. Prints one line per difference, the largest relative differences of the compared numbers, and
ends ``same records`` (exit 0) or ``N difference(s)`` (exit 1).
"""

from __future__ import annotations

import argparse
import fnmatch
import math
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

#: the properties that say how a record ended: equal, never within a tolerance
VERDICT = ("outcome", "category", "expected")
NOISE = ("*_cv", "cv", "startup_s")
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def records(path: Path) -> dict[str, tuple[str, dict[str, str]]]:
    """``classname::name`` -> (the pytest result, the properties) of every test case in a JUnit file."""
    out = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        result = "passed"
        for tag in ("failure", "error", "skipped"):
            el = tc.find(tag)
            if el is not None:
                result = "xfailed" if tag == "skipped" and el.get("type") == "pytest.xfail" else \
                    {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                break
        props = {p.get("name", ""): p.get("value", "") for p in tc.iter("property")}
        out[f"{tc.get('classname')}::{tc.get('name')}"] = (result, props)
    return out


def _number(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _rel(a: float, b: float) -> float:
    return 0.0 if a == b else abs(a - b) / max(abs(a), abs(b))


def compare(before: Path, after: Path, *, rel: float = 0.01, noise: tuple[str, ...] = NOISE
            ) -> tuple[list[str], dict[str, float], int]:
    """The differences (one line each), the largest relative difference per compared numeric property, and the
    number of records compared."""
    a, b = records(before), records(after)
    diffs = [f"{k}: only in {before.name}" for k in sorted(set(a) - set(b))]
    diffs += [f"{k}: only in {after.name}" for k in sorted(set(b) - set(a))]
    worst: dict[str, float] = {}
    for k in sorted(set(a) & set(b)):
        (ra, pa), (rb, pb) = a[k], b[k]
        if ra != rb:
            diffs.append(f"{k}: result {ra} -> {rb}")
        if set(pa) != set(pb):
            diffs.append(f"{k}: properties only before {sorted(set(pa) - set(pb))}, only after "
                         f"{sorted(set(pb) - set(pa))}")
        for name in sorted(set(pa) & set(pb)):
            va, vb = pa[name], pb[name]
            if name in VERDICT:
                if va != vb:
                    diffs.append(f"{k}: {name} {va!r} -> {vb!r}")
                continue
            if any(fnmatch.fnmatch(name, pat) for pat in noise):
                continue
            xa, xb = _number(va), _number(vb)
            if xa is not None and xb is not None:
                d = _rel(xa, xb)
                worst[name] = max(worst.get(name, 0.0), d)
                if d > rel:
                    diffs.append(f"{k}: {name} {va} -> {vb} ({d:.2%})")
                continue
            if va.startswith("/") and vb.startswith("/"):
                if Path(va).name != Path(vb).name:
                    diffs.append(f"{k}: {name} file {Path(va).name} -> {Path(vb).name}")
                continue
            if not any(c.isspace() for c in va + vb):  # one word (a key, an id, a version): exactly
                if va != vb:
                    diffs.append(f"{k}: {name} {va!r} -> {vb!r}")
                continue
            if _NUMBER.sub("#", va) != _NUMBER.sub("#", vb):
                diffs.append(f"{k}: {name} {va[:80]!r} -> {vb[:80]!r}")
    return diffs, worst, len(set(a) & set(b))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--rel", type=float, default=0.01, help="relative tolerance of a number (default 0.01)")
    ap.add_argument("--noise", default=",".join(NOISE), help="properties present in both but not compared")
    args = ap.parse_args(argv)
    diffs, worst, n = compare(args.before, args.after, rel=args.rel,
                              noise=tuple(p for p in args.noise.split(",") if p))
    results: dict[str, int] = {}
    for result, _ in records(args.after).values():
        results[result] = results.get(result, 0) + 1
    print(f"{n} records in both ({', '.join(f'{v} {k}' for k, v in sorted(results.items()))} after)")
    for line in diffs:
        print(f"DIFFERENT {line}")
    top = sorted(worst.items(), key=lambda kv: -kv[1])
    print("largest relative differences: " + (", ".join(f"{k} {v:.3%}" for k, v in top[:12]) or "none"))
    print("same records" if not diffs else f"{len(diffs)} difference(s)")
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())

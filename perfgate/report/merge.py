"""Merge reports of several boxes (one CI run fanned out) into one JUnit file.

Every input ``<testsuite>`` is kept as its own suite, with its hostname, timestamp and
properties (``stack.*``, ``perfgate.*``), plus a ``perfgate.merged_from`` property naming the
input file. Test cases are not renamed: when the same record id comes from several boxes, the
reader (:func:`~perfgate.report.junit_read.read_report`) keys the records apart by
``stack.gpu``, else hostname, else a counter, and the merge reports those collisions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfgate.errors import ReportError
from perfgate.report.junit_read import read_report


@dataclass(frozen=True, kw_only=True)
class MergeResult:
    """What :func:`merge_reports` wrote."""

    path: str
    suites: int
    records: int
    # record keys that had to be qualified because the id occurred several times
    qualified_keys: tuple[str, ...] = ()


def merge_reports(inputs: Sequence[str | Path], output: str | Path) -> MergeResult:
    """Merge ``inputs`` into ``output``. Raises :class:`ReportError` on unreadable input."""
    from junitparser.xunit2 import JUnitXml

    if len(inputs) < 1:
        raise ReportError("merge needs at least one input report")
    loaded = []
    for p in inputs:
        read_report(p)  # validates, with a clear message
        loaded.append((Path(p), JUnitXml.fromfile(str(p))))
    merged = JUnitXml(name="perfgate merged")
    n_suites = 0
    for path, xml in loaded:
        for suite in xml:
            suite.add_property("perfgate.merged_from", path.name)
            # append the element itself: JUnitXml.add_testsuite would fold suites that compare equal
            merged.append(suite)  # type: ignore[no-untyped-call, unused-ignore]  # junitparser: no annotations
            n_suites += 1
    merged.update_statistics()  # type: ignore[no-untyped-call, unused-ignore]  # (as above)
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        merged.write(str(out))
    except OSError as e:
        raise ReportError(f"{out}: cannot write the merged report: {e}") from e
    check = read_report(out)
    qualified = tuple(r.key for r in check.records if r.key != r.id)
    return MergeResult(path=str(out), suites=n_suites, records=len(check.records), qualified_keys=qualified)

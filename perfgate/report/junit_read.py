"""Load a pytest JUnit XML report into frozen :class:`~perfgate.report.records.Record` /
:class:`~perfgate.report.records.Report` values (:mod:`perfgate.report.records`).

This is the one reader that ``diff``, ``gate``, ``history``, ``plot``, ``report`` and
``merge`` use. It follows the JUnit contract of perfgate's plugin (testcase and testsuite
``<property>`` elements) and falls back to the XML outcome elements for reports of other
projects that carry no ``outcome`` property.

Record id = ``classname::name`` with any ``@group`` suffix (pytest-xdist ``loadgroup``)
stripped. Within one report a record is addressed by its *key*: the id, or, when the same id
occurs several times (a report merged from several boxes), the id plus ``@<qualifier>``
where the qualifier is the record's ``stack.gpu``, else its hostname, else a counter.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from perfgate.errors import ReportError
from perfgate.report.records import (
    FAILING,
    OUTCOMES,
    TEXT_KEYS,
    UNKNOWN,
    Record,
    Report,
    SuiteInfo,
    is_machine_key,
    parse_number,
    parse_time,
    record_id,
    strip_group,
)

_SEVERITY = {"error": 3, "fail": 2, "xpass": 2}


def _worse(prop: str, xml: str) -> str:
    """The worse of the property's outcome and the XML element's: a failure anywhere is a failure."""
    if xml in FAILING and (prop not in FAILING or _SEVERITY[xml] > _SEVERITY[prop]):
        return xml
    return prop


def _case_outcome(case: Any) -> tuple[str, str]:
    """Outcome and message from the XML elements alone."""
    from junitparser import Error, Failure, Skipped

    results = list(case.result)
    if not results:
        return "pass", ""
    failures = [r for r in results if isinstance(r, Failure)]
    errors = [r for r in results if isinstance(r, Error)]
    skips = [r for r in results if isinstance(r, Skipped)]
    if failures:
        msg = failures[0].message or ""
        return ("xpass" if msg.startswith("[XPASS(strict)]") else "fail"), msg
    if errors:
        return "error", errors[0].message or ""
    if skips:
        msg = skips[0].message or ""
        return ("xfail" if skips[0].type == "pytest.xfail" else "skip"), msg
    return "pass", ""


def _duration(case: Any) -> float | None:
    try:
        t = case.time
    except (TypeError, ValueError):
        return None
    return float(t) if t is not None and math.isfinite(float(t)) else None


def _props(element: Any) -> list[tuple[str, str]]:
    from junitparser import Properties

    props = element.child(Properties)
    if props is None:
        return []
    return [(p.name or "", p.value if p.value is not None else "") for p in props if p.name]


def _qualify(records: list[Record]) -> tuple[Record, ...]:
    """Give colliding record ids distinct keys: ``id @gpu``, ``id @host``, ``id @gpu/host``, ``#n``."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        groups[r.id].append(i)
    keys = [r.id for r in records]
    for rid, where in groups.items():
        if len(where) == 1:
            continue
        group = [records[i] for i in where]

        def gpu(r: Record) -> str:
            return dict(r.stack).get("stack.gpu", "") or UNKNOWN

        def host(r: Record) -> str:
            return r.hostname or UNKNOWN

        for qual in (gpu, host, lambda r: f"{gpu(r)}/{host(r)}"):
            quals = [qual(r) for r in group]
            if len(set(quals)) == len(quals):
                break
        seen: dict[str, int] = defaultdict(int)
        for i, q in zip(where, quals, strict=False):
            seen[q] += 1
            suffix = q if seen[q] == 1 else f"{q}#{seen[q]}"
            keys[i] = f"{rid} @{suffix}"
    return tuple(replace(r, key=k) for r, k in zip(records, keys, strict=True))


def read_report(path: str | Path) -> Report:
    """Load a JUnit XML report. Raises :class:`ReportError` when it cannot be read."""
    from junitparser import JUnitXmlError
    from junitparser.xunit2 import JUnitXml

    p = Path(path)
    if not p.is_file():
        raise ReportError(f"{p}: no such report file")
    try:
        xml = JUnitXml.fromfile(str(p))
    except JUnitXmlError as e:
        raise ReportError(f"{p}: not a JUnit report (root must be <testsuites> or <testsuite>): {e}") from e
    except Exception as e:  # ElementTree.ParseError / lxml XMLSyntaxError / OSError
        raise ReportError(f"{p}: cannot parse the XML: {e}") from e
    return _from_xml(xml, str(p))


def read_reports(paths: Iterable[str | Path]) -> list[Report]:
    """Load several reports (in the given order)."""
    return [read_report(p) for p in paths]


def _from_xml(xml: Any, path: str) -> Report:
    suites: list[SuiteInfo] = []
    raw: list[Record] = []  # keyed by _qualify
    notes: list[str] = []
    for si, suite in enumerate(xml):
        sprops = _props(suite)
        sd = dict(sprops)
        info = SuiteInfo(
            name=suite.name or "",
            hostname=suite.hostname or "",
            timestamp=parse_time(suite.timestamp),
            started_at=parse_time(sd.get("perfgate.started_at")),
            properties=tuple(sprops),
        )
        suites.append(info)
        suite_stack = {k: v for k, v in sprops if k.startswith("stack.")}
        suite_machine = {k: v for k, v in sprops if is_machine_key(k)}
        for case in suite:
            cprops = _props(case)
            cd = dict(cprops)
            xml_outcome, message = _case_outcome(case)
            prop_outcome = cd.get("outcome", "")
            if prop_outcome in OUTCOMES:
                outcome, source = prop_outcome, "property"
                worse = _worse(prop_outcome, xml_outcome)
                if worse != prop_outcome:  # what every CI system reads is not what the property says
                    outcome, source = worse, "xml"
                if (prop_outcome in FAILING) != (xml_outcome in FAILING) or worse != prop_outcome:
                    notes.append(
                        f"{path}: {case.classname}::{case.name}: the outcome property says {prop_outcome} but the "
                        f"JUnit element says {xml_outcome}"
                        + (f" ({message[:120]})" if message and xml_outcome in FAILING else "")
                        + f"; counted as {outcome}, the worse of the two"
                    )
            else:
                outcome, source = xml_outcome, "xml"
                if prop_outcome:
                    notes.append(
                        f"{path}: {case.classname}::{case.name}: unknown outcome property "
                        f"{prop_outcome!r}; used the XML element ({xml_outcome})"
                    )
            stack = dict(suite_stack)
            stack.update({k: v for k, v in cprops if k.startswith("stack.")})
            machine = dict(suite_machine)
            machine.update({k: v for k, v in cprops if is_machine_key(k)})
            numbers = []
            for k, v in cprops:
                if k in TEXT_KEYS or k.startswith("stack.") or is_machine_key(k):
                    continue
                x = parse_number(v)
                if x is not None:
                    numbers.append((k, x))
            classname = case.classname or ""
            name = case.name or ""
            raw.append(
                Record(
                    key="",
                    id=record_id(classname, name),
                    classname=classname,
                    name=strip_group(name),
                    outcome=outcome,
                    outcome_source=source,
                    message=message,
                    hostname=info.hostname,
                    suite_index=si,
                    properties=tuple(cprops),
                    numbers=tuple(numbers),
                    stack=tuple(sorted(stack.items())),
                    machine=tuple(sorted(machine.items())),
                    duration_s=_duration(case),
                )
            )
    return Report(path=path, suites=tuple(suites), records=_qualify(raw), notes=tuple(notes))

"""The reference pages (docs/reference/) are written from the code by scripts/gen_reference.py and cannot drift:
they are what the script writes now, and every property a committed run wrote is named on the properties page
(exactly, or by a family: ``start_values.<name>``, ``pair.<metric>.*``, ``candidate.<property>``, ...)."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: families the properties page names by a pattern (its "Families of names" table)
FAMILIES = re.compile(r"^(start_values|pair|host|machine|calib|stack|ttft_part|perfgate)\.|^c\d+_")
METRIC_NAMES = re.compile(r"^(tok_s|output_tok_s|ttft_ms|itl_ms|tpot_ms|e2e_ms|accept_len|goodput_rps)(_|$)")


def test_the_reference_is_what_the_code_writes() -> None:
    r = subprocess.run([sys.executable, "scripts/gen_reference.py", "--check"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def test_every_property_a_committed_run_wrote_is_on_the_properties_page() -> None:
    page = (ROOT / "docs" / "reference" / "properties.md").read_text()
    named = set(re.findall(r"`([a-z_.0-9]+)`", page))
    missing: dict[str, str] = {}
    for f in sorted((ROOT / "evidence").rglob("*.xml")):
        try:
            tree = ET.parse(f)
        except ET.ParseError:
            continue
        for p in tree.iter("property"):
            name = p.get("name", "").removeprefix("candidate.")
            if name in named or FAMILIES.match(name) or METRIC_NAMES.match(name):
                continue
            missing.setdefault(name, str(f.relative_to(ROOT)))
    assert missing == {}, (f"properties no reference page names (fix: define them in perfgate/record.py with a #: "
                           f"comment, or in scripts/gen_reference.py, and run it): {missing}")

"""Is a release's start-up set complete and consistent with its wheels' own metadata? (run by build.sh)

Usage: python3 check_set.py REQUIREMENTS WHEELDIR [--base BASE_REQUIREMENTS]

REQUIREMENTS is ``requirements-sglang-X-h200.txt`` (``NAME==VERSION`` per line), the release's complete set;
WHEELDIR holds the wheels build.sh downloaded for it: all of them, or for an overlay bundle (``--base``, the set
of the bundle behind it on PYTHONPATH) only those whose pins differ from the base set. Checked:

- the set pins ``sglang==X`` (X from the file's name), and an overlay's set names every package of its base (a
  package it left out would be imported from the base overlay behind it, at the base's version);
- every wheel is the set's pin of its name, and every pin this bundle must carry has its wheel;
- every requirement a wheel declares (its METADATA ``Requires-Dist``, markers evaluated for CPython 3.12 on
  linux x86_64) on a package of the set is met by the set's pin: SGLang 0.5.16's ``flashinfer_python==0.6.14``
  against the set's ``flashinfer-python``, say. Requirements on packages outside the set are left to the box's
  image (torch 2.11.0 and the CUDA libraries); SGLang's exact pins among them are printed.

Exit 1 with one line per problem naming the file, the package and the fix; 0 with a summary.
"""

from __future__ import annotations

import argparse
import re
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

try:
    from packaging.markers import UndefinedEnvironmentName
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # pragma: no cover - build.sh runs where pip is
    sys.exit("check_set.py needs the 'packaging' module; fix: python3 -m pip install packaging")

#: the box: CPython 3.12 on linux x86_64 (markers of the wheels' requirements are evaluated for it)
BOX = {"sys_platform": "linux", "platform_machine": "x86_64", "platform_system": "Linux", "os_name": "posix",
       "python_version": "3.12", "python_full_version": "3.12.3", "implementation_name": "cpython",
       "platform_python_implementation": "CPython", "extra": ""}


def read_set(path: Path) -> dict[str, tuple[str, int]]:
    """``{canonical name: (version, line number)}`` of a requirements file of ``NAME==VERSION`` lines."""
    out: dict[str, tuple[str, int]] = {}
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9._-]+)\s*==\s*([A-Za-z0-9.+!_-]+)", line)
        if not m:
            sys.exit(f"{path}:{n}: {raw.strip()!r} is not NAME==VERSION; fix: pin one exact version per line")
        name = canonicalize_name(m.group(1))
        if name in out:
            sys.exit(f"{path}:{n}: {m.group(1)} is pinned twice (line {out[name][1]}); fix: keep one pin")
        out[name] = (m.group(2), n)
    return out


def wheel_metadata(whl: Path) -> tuple[str, str, list[str]]:
    """(canonical name, version, Requires-Dist lines) from a wheel's ``*.dist-info/METADATA``."""
    with zipfile.ZipFile(whl) as z:
        names = [n for n in z.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
        if len(names) != 1:
            sys.exit(f"{whl.name}: expected one *.dist-info/METADATA, found {len(names)}; fix: re-download it")
        meta = Parser().parsestr(z.read(names[0]).decode("utf-8", "replace"))
    return canonicalize_name(meta["Name"]), str(meta["Version"]), list(meta.get_all("Requires-Dist") or [])


def applies(req: Requirement) -> bool:
    if req.marker is None:
        return True
    try:
        return bool(req.marker.evaluate(BOX))
    except UndefinedEnvironmentName:
        return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("requirements", type=Path)
    ap.add_argument("wheels", type=Path)
    ap.add_argument("--base", type=Path, default=None, help="the base set (an overlay bundle's)")
    a = ap.parse_args(argv)
    req: Path = a.requirements
    m = re.fullmatch(r"requirements-sglang-(.+)-h200\.txt", req.name)
    if not m:
        sys.exit(f"{req}: expected a file named requirements-sglang-RELEASE-h200.txt")
    release = m.group(1)
    have = read_set(req)
    base = read_set(a.base) if a.base else {}
    problems: list[str] = []
    if have.get("sglang", ("",))[0] != release:
        problems.append(f"{req}: sglang is pinned to {have.get('sglang', ('nothing',))[0]}, not {release}; "
                        f"fix: sglang=={release}")
    for name, (ver, _) in sorted(base.items()):
        if name not in have:
            problems.append(f"{req}: {name} ({ver} in {a.base.name}) is not in this set: it would be imported "
                            f"from the base overlay behind it; fix: pin the {name} that SGLang {release} needs")
    carry = {n for n, (v, _) in have.items() if base.get(n, ("",))[0] != v}
    wheels = sorted(a.wheels.glob("*.whl"))
    seen: dict[str, str] = {}
    reqs_of: dict[str, list[str]] = {}
    for whl in wheels:
        name, ver, reqs = wheel_metadata(whl)
        seen[name], reqs_of[name] = ver, reqs
        pin = have.get(name)
        if pin is None or pin[0] != ver:
            problems.append(f"{whl.name}: {name} {ver} is not the set's pin "
                            f"({req.name}: {name}=={pin[0] if pin else 'absent'}); fix: re-run build.sh")
    for name in sorted(carry - set(seen)):
        problems.append(f"{req}:{have[name][1]}: {name}=={have[name][0]} has no wheel in {a.wheels}; "
                        f"fix: check the pin exists on PyPI for cp312 manylinux x86_64")
    image: dict[str, set[str]] = {}
    checked = 0
    for owner, reqs in sorted(reqs_of.items()):
        for text in reqs:
            try:
                r = Requirement(text)
            except InvalidRequirement:
                continue
            if not applies(r):
                continue
            dep = canonicalize_name(r.name)
            if dep not in have:
                image.setdefault(dep, set()).add(f"{owner}: {r.specifier or 'any'}")
                continue
            checked += 1
            ver = have[dep][0]
            if r.specifier and not r.specifier.contains(ver, prereleases=True):
                problems.append(f"{req}:{have[dep][1]}: {dep}=={ver}, but {owner} {seen[owner]} requires "
                                f"{r.name}{r.specifier} (its METADATA); fix: pin {dep} to a version in "
                                f"{r.specifier}")
    for p in problems:
        print(f"check_set: {p}", file=sys.stderr)
    if problems:
        return 1
    exact = sorted(f"{n}{s.split(': ', 1)[1]}" for n, ss in image.items() for s in ss
                   if s.startswith("sglang:") and "==" in s)
    print(f"check_set: SGLang {release}: {len(have)} pins, {len(wheels)} wheel(s) here"
          f"{f' (an overlay on {a.base.name}: the pins that differ)' if base else ''}; {checked} requirements "
          f"of theirs on the set met; {len(image)} package(s) left to the box's image, SGLang's exact pins among "
          f"them: {', '.join(exact) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

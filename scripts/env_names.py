"""Regenerate perfgate/data/env_names.json: the environment variables NCCL and SGLang read.

NCCL's come from the strings of its library (every NCCL_PARAM and ncclGetEnv name is a literal in
libnccl.so), SGLang's from its Python sources. perfgate checks a profile's and a variant's environment
against them: a name one edit away from a real one (NCCL_ALOG) is a typo and an error.

    python scripts/env_names.py --nccl LIBNCCL.so[:VERSION] ... --sglang SRC_DIR[:VERSION] ...

e.g. pip download --no-deps nvidia-nccl-cu13==2.28.9, unzip, and pass nvidia/nccl/lib/libnccl.so.2:2.28.9;
for SGLang, an unpacked wheel's directory holding sglang/.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "perfgate" / "data" / "env_names.json"
_NCCL = re.compile(rb"(?<![A-Z0-9_])NCCL_[A-Z0-9_]*[A-Z0-9](?![A-Za-z0-9_])")
_SGLANG = re.compile(r"\bSGLANG_[A-Z0-9_]*[A-Z0-9]\b")


def nccl_names(lib: Path) -> set[str]:
    return {m.decode() for m in _NCCL.findall(lib.read_bytes())}


def sglang_names(src: Path) -> set[str]:
    names: set[str] = set()
    for f in src.rglob("*.py"):
        names.update(_SGLANG.findall(f.read_text(errors="replace")))
    return names


def _split(arg: str) -> tuple[Path, str]:
    path, _, version = arg.partition(":")
    return Path(path), version or "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nccl", action="append", default=[], metavar="LIB[:VERSION]")
    ap.add_argument("--sglang", action="append", default=[], metavar="DIR[:VERSION]")
    a = ap.parse_args()
    data: dict[str, dict[str, object]] = {}
    for prefix, args, fn in (("NCCL_", a.nccl, nccl_names), ("SGLANG_", a.sglang, sglang_names)):
        names: set[str] = set()
        versions = []
        for arg in args:
            path, version = _split(arg)
            names |= fn(path)
            versions.append(version)
        data[prefix] = {"source": ", ".join(versions), "names": sorted(names)}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=0) + "\n")
    print(f"{OUT}: " + ", ".join(f"{k} {len(v['names'])} names ({v['source']})" for k, v in data.items()))


if __name__ == "__main__":
    main()

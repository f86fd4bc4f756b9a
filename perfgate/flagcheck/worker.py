"""The flag-check subprocess: ``python -m perfgate.flagcheck.worker [--sglang-path DIR] --json ARGV_JSON``.

It imports SGLang's ``ServerArgs`` once (skipping ``sglang/__init__.py``), checks every argv of
the batch and prints the verdicts as one JSON line; started by :func:`perfgate.flagcheck.check_many`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from perfgate.flagcheck.parsing import CheckingParser, FlagProblem, check_with_parser, with_model_path


def sglang_version_at(pkg_parent: Path) -> str:
    """The version of the ``sglang`` package under ``pkg_parent`` (its dist-info, else its version file)."""
    import importlib.metadata

    try:
        for dist in importlib.metadata.distributions(path=[str(pkg_parent)]):
            if (dist.metadata["Name"] or "").lower() == "sglang":
                return dist.version
    except Exception:
        pass
    for name in ("_version.py", "version.py"):
        f = pkg_parent / "sglang" / name
        if f.exists():
            m = re.search(r"""__version__\s*(?::\s*str\s*)?=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", f.read_text())
            if m:
                return m.group(1)
    return "unknown"


def build_sglang_parser(sglang_path: str | None) -> tuple[argparse.ArgumentParser, str, float]:
    """Import ``ServerArgs`` (skipping ``sglang/__init__``) and return (parser, version, import_s).

    Runs in the flag-check subprocess. Raises ImportError (or anything the import raises)
    when SGLang cannot be imported.
    """
    import importlib.util
    import types

    t0 = time.perf_counter()
    if sglang_path:
        parent = Path(sglang_path).resolve()
        if not (parent / "sglang" / "srt" / "server_args.py").exists():
            raise ImportError(f"no sglang/srt/server_args.py under {parent}")
        sys.path.insert(0, str(parent))
    else:
        spec = importlib.util.find_spec("sglang")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("sglang is not installed (no module named 'sglang')")
        parent = Path(next(iter(spec.submodule_search_locations))).parent
    if "sglang" not in sys.modules:
        stub = types.ModuleType("sglang")
        stub.__path__ = [str(parent / "sglang")]  # skip sglang/__init__.py: only ServerArgs is needed
        sys.modules["sglang"] = stub
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from sglang.srt.server_args import ServerArgs

    parser = CheckingParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser, sglang_version_at(parent), time.perf_counter() - t0


def run_batch(argvs: Mapping[str, Sequence[str]], sglang_path: str | None) -> dict[str, Any]:
    """Check every argv with one import of SGLang; the JSON the subprocess prints."""
    t0 = time.perf_counter()
    try:
        parser, version, import_s = build_sglang_parser(sglang_path)
    except BaseException as e:  # an import can raise anything (SystemExit included)
        return {"available": False, "reason": f"{type(e).__name__}: {e}".strip()[:500],
                "sglang_version": "unknown", "import_s": time.perf_counter() - t0, "results": {}}
    results: dict[str, Any] = {}
    for name, argv in argvs.items():
        t1 = time.perf_counter()
        try:
            problems, deprecations = check_with_parser(parser, with_model_path(argv))
        except Exception as e:  # a parser action blew up: report it, keep going
            problems = (FlagProblem(flag="", kind="value", message=f"{type(e).__name__}: {e}"),)
            deprecations = ()
        results[name] = {
            "argv": list(argv),
            "problems": [asdict(p) for p in problems],
            "deprecations": list(deprecations),
            "parse_s": time.perf_counter() - t1,
        }
    return {"available": True, "reason": "", "sglang_version": version, "import_s": import_s,
            "results": results}


def main(args: Sequence[str] | None = None) -> int:
    """``python -m perfgate.flagcheck.worker [--sglang-path DIR] --json ARGV_JSON``: print the verdicts as JSON.

    ARGV_JSON holds ``{"name": ["--flag", "value", ...], ...}`` (or ``-`` for stdin).
    """
    argl = list(sys.argv[1:] if args is None else args)
    sglang_path: str | None = None
    source: str | None = None
    i = 0
    while i < len(argl):
        tok = argl[i]
        if tok in ("--sglang-path", "--json") and i + 1 < len(argl):
            if tok == "--sglang-path":
                sglang_path = argl[i + 1]
            else:
                source = argl[i + 1]
            i += 2
        elif tok in ("-h", "--help"):
            print(main.__doc__)
            return 0
        else:
            print(f"perfgate.flagcheck: unexpected argument {tok!r}; usage: "
                  "python -m perfgate.flagcheck.worker [--sglang-path DIR] --json ARGV_JSON", file=sys.stderr)
            return 2
    if source is None:
        print("perfgate.flagcheck: --json ARGV_JSON is required", file=sys.stderr)
        return 2
    text = sys.stdin.read() if source == "-" else Path(source).read_text()
    argvs = json.loads(text)
    if not isinstance(argvs, dict) or not all(isinstance(v, list) for v in argvs.values()):
        print("perfgate.flagcheck: ARGV_JSON must be an object of name -> list of strings", file=sys.stderr)
        return 2
    out = run_batch({str(k): [str(x) for x in v] for k, v in argvs.items()}, sglang_path)
    real_stdout = sys.__stdout__ or sys.stdout
    real_stdout.write(json.dumps(out) + "\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

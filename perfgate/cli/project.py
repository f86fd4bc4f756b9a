"""``perfgate init [DIR] [--from PROFILE]``: set up a user's project: a profile copied (with the profiles it
extends) from a shipped one, a sample test, the pytest ini naming the profile, and the commands to write and
check the limits."""

from __future__ import annotations

import argparse
from pathlib import Path

from perfgate.cli.registry import EXIT_OK, subcommand

#: the sample test ``perfgate init`` writes: the README's "Writing your own test" (a test holds them equal)
SAMPLE_TEST = '''"""A perf test of your own, written with perfgate's fixtures (perfgate's docs/writing-tests.md)."""

import pytest

pytestmark = pytest.mark.perfgate(kind="latency", modes=["baseline", "eagle3"])

@pytest.mark.parametrize("metric", ["ttft_ms", "output_tok_s"])
def test_under_load_at_concurrency_4(perf_server, measure, perf_check, metric):
    m = measure(perf_server, concurrency=4, requests_per_trial=16, max_new_tokens=64)
    perf_check(m, metric)      # against [floors.<mode>.c4], in the metric's direction
'''

#: the stack-pair test ``perfgate init`` writes beside it: the shipped one (perftests/test_stack_pair.py), so that
#: ``pytest perftests/ -m stack_pair --perfgate-candidate ...`` and ``perfgate bisect`` find a record to run
STACK_PAIR_TEST = '''"""The paired stack comparison (marker ``stack_pair``): one record per mode, the current stack
against the candidate stack (``--perfgate-candidate``) on this box, their server starts interleaved and alternated,
judged on the candidate/current ratio of each start pair (perfgate's docs/how-to/gate-an-upgrade.md). Without a
candidate each record skips."""

import pytest

pytestmark = pytest.mark.stack_pair


@pytest.mark.perfgate(kind="stack-pair")
def test_stack_pair(perf_candidate, perf_server, measure, perf_compare):
    """The candidate stack is not slower than the current one on this box, judged on interleaved start pairs."""
    current = measure(perf_server)
    perf_compare(measure(perf_candidate), current)
'''

#: the pytest.ini ``perfgate init`` writes: the profile, and where the tests are (plain ``pytest`` in the project
#: collects perftests/ only, not a virtual environment's or a checkout's tests beside it)
INI_TEXT = "[pytest]\ntestpaths = perftests\nperfgate_profile = {spec}\n"

#: the files pytest reads its ini options from, in its own order
_INI_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def _init_args(p: argparse.ArgumentParser) -> None:
    from perfgate.profiles.shipped import DEFAULT_SIM_PROFILE

    default = DEFAULT_SIM_PROFILE.removeprefix("baselines/").removesuffix(".toml")
    p.add_argument("dir", nargs="?", default=".", help="the project directory (default: the current one)")
    p.add_argument("--from", dest="source", default=default, metavar="PROFILE",
                   help=f"the profile to start from: a path, or <hardware>/<model> of this directory's baselines/ "
                        f"or of those perfgate ships (default: {default}, the simulated seed box, which runs "
                        f"without a GPU)")
    p.add_argument("--force", action="store_true", help="overwrite files that exist")


@subcommand("init", "set up a project: a profile (with the profiles it extends), a sample test, the commands to run",
            _init_args)
def _init(args: argparse.Namespace) -> int:
    from perfgate.profiles.load import resolve_profile
    from perfgate.profiles.project import copy_profile

    root = Path(args.dir).resolve()
    source = resolve_profile(args.source, Path.cwd())
    root.mkdir(parents=True, exist_ok=True)
    test = root / "perftests" / "test_mine.py"
    if test.exists() and not args.force:
        from perfgate.cli.registry import usage_error

        raise usage_error(f"{test} exists already; nothing was written; fix: pick another directory, "
                          f"remove it, or pass --force to overwrite")
    copied = copy_profile(source, root, force=args.force)
    test.parent.mkdir(parents=True, exist_ok=True)
    test.write_text(SAMPLE_TEST)
    pair = test.parent / "test_stack_pair.py"
    if args.force or not pair.exists():
        pair.write_text(STACK_PAIR_TEST)
    profile = copied[0].path
    spec = profile.relative_to(root / "baselines").with_suffix("").as_posix()
    ini = next((root / f for f in _INI_FILES if (root / f).is_file()), None)
    lines = [f"perfgate init: a project in {root}, from {source}"]
    for c in copied:
        lines.append(f"  {c.path.relative_to(root)}  ({c.why})")
    lines.append(f"  {test.relative_to(root)}  (a sample test: latency at 4 streams, per mode)")
    lines.append(f"  {pair.relative_to(root)}  (the paired stack comparison: -m stack_pair --perfgate-candidate SPEC)")
    if ini is None:
        (root / "pytest.ini").write_text(INI_TEXT.format(spec=spec))
        lines.append(f"  pytest.ini  (testpaths = perftests, perfgate_profile = {spec}: plain `pytest` runs "
                     f"perftests/ on this profile)")
    else:
        lines.append(f"  ({ini.name} exists: add testpaths = [\"perftests\"] and perfgate_profile = \"{spec}\" to "
                     f"its pytest options, or pass perftests/ --perfgate-profile {spec})")
    where = "" if root == Path.cwd() else f"cd {root}\n  "
    lines += [
        "",
        "next:",
        f"  {where}pytest perftests/ --perfgate-update-baselines   # measure, and write the limits into "
        f"baselines/{spec}.toml",
        "  pytest perftests/                                # check them: a record over its limit fails",
        "  pytest perftests/ --junitxml=new.xml && perfgate gate old.xml new.xml   # gate one run on another",
        "  pytest perftests/ -m stack_pair --perfgate-candidate python=/other/venv/bin/python   # gate a stack, paired",
        "Edit the profile for your box and model (schema: perfgate's docs/profiles.md); add tests next to "
        "perftests/test_mine.py.",
    ]
    print("\n".join(lines))
    return EXIT_OK

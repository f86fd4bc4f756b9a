"""perfgate.flagcheck: flags checked against SGLang's own parser before any launch.

The closest-spelling logic is tested on a stand-in parser; the subprocess protocol on a
stand-in ``sglang`` package; and, when ``PERFGATE_SGLANG_PARSERS`` names the folder that
``ci/install-sglang-parsers.sh`` filled, against the real parsers of SGLang 0.5.17 and 0.5.23.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from perfgate.flagcheck import FlagCheckResult, check_argv, check_many, problems_by_flag
from perfgate.flagcheck.parsing import CheckingParser, check_with_parser, closest, option_strings, with_model_path

ATTENTION = ["triton", "torch_native", "fa3", "flashinfer", "trtllm_mha"]


class _Deprecated(argparse.Action):
    """Like SGLang 0.5.17's alias action: warns, then stores into the new destination."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"\x1b[1;33m'{option_string}' is deprecated and will be removed in a future release. "
              f"Use '--cuda-graph-max-bs-decode' instead.\x1b[0m", file=sys.stderr)
        setattr(namespace, self.dest, values)


def parser_like(version: str) -> argparse.ArgumentParser:
    """A few of SGLang's real options, spelled as in 0.5.17 or 0.5.23."""
    p = CheckingParser(prog="sglang serve")
    p.add_argument("--model-path", "--model", required=True)
    p.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1)
    p.add_argument("--mem-fraction-static", type=float)
    p.add_argument("--attention-backend", choices=ATTENTION)
    p.add_argument("--cuda-graph-max-bs-decode", type=int)
    p.add_argument("--cuda-graph-max-bs-prefill", type=int)
    if version == "0.5.17":
        p.add_argument("--cuda-graph-max-bs", type=int, dest="cuda_graph_max_bs_decode", action=_Deprecated)
    p.add_argument("--enable-torch-symm-mem", action="store_true")
    p.add_argument("--enable-symm-mem", action="store_true")
    p.add_argument("--disable-custom-all-reduce", action="store_true")
    return p


NEW, OLD = parser_like("0.5.23"), parser_like("0.5.17")


def check(parser: argparse.ArgumentParser, *argv: str):
    return check_with_parser(parser, with_model_path(list(argv)))


def test_renamed_flag_is_ambiguous_on_the_new_parser_and_deprecated_on_the_old() -> None:
    problems, deprecations = check(NEW, "--cuda-graph-max-bs", "128")
    assert len(problems) == 1 and deprecations == ()
    p = problems[0]
    assert (p.flag, p.kind, p.suggestion, p.category) == ("--cuda-graph-max-bs", "ambiguous",
                                                          "--cuda-graph-max-bs-decode", "bad-flag")
    assert p.candidates == ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill")
    assert "did you mean --cuda-graph-max-bs-decode?" in p.describe()

    problems, deprecations = check(OLD, "--cuda-graph-max-bs", "128")
    assert problems == ()
    assert deprecations == (("'--cuda-graph-max-bs' is deprecated and will be removed in a future release. "
                             "Use '--cuda-graph-max-bs-decode' instead."),)


def test_typo_names_the_closest_spelling() -> None:
    problems, _ = check(NEW, "--enable-torch-symm-memory")
    assert [(p.flag, p.kind, p.suggestion) for p in problems] == [
        ("--enable-torch-symm-memory", "unknown", "--enable-torch-symm-mem")]


def test_every_problem_is_reported_not_only_the_first() -> None:
    problems, _ = check(NEW, "--tp-size", "8", "--cuda-graph-max-bs=64", "--frobnicate", "3", "4",
                        "--attention-backend", "flashinfr", "--disable-custom-allreduce")
    got = {(p.flag, p.kind, p.suggestion) for p in problems}
    assert got == {
        ("--cuda-graph-max-bs", "ambiguous", "--cuda-graph-max-bs-decode"),
        ("--frobnicate", "unknown", None),  # its values 3 4 are not separate problems
        ("--attention-backend", "value", "flashinfer"),
        ("--disable-custom-allreduce", "unknown", "--disable-custom-all-reduce"),
    }
    assert next(p for p in problems if p.flag == "--frobnicate").message == "unrecognized arguments: --frobnicate 3 4"


def test_valid_argvs_pass() -> None:
    argv = ["--model-path", "/m", "--tp", "8", "--mem-fraction-static", "0.85", "--cuda-graph-max-bs-decode", "128",
            "--attention-backend=triton", "--enable-torch-symm-mem"]
    assert check(NEW, *argv) == ((), ())
    assert check(OLD, *argv) == ((), ())


def test_bad_values_and_missing_values() -> None:
    (p,), _ = check(NEW, "--tp-size", "eight")
    assert (p.flag, p.kind) == ("--tp-size", "value") and "invalid int value" in p.message
    (p,), _ = check(NEW, "--mem-fraction-static")
    assert (p.flag, p.kind) == ("--mem-fraction-static", "value") and "expected one argument" in p.message


def test_model_path_placeholder_only_when_missing() -> None:
    assert with_model_path(["--tp", "2"])[:2] == ["--model-path", "/perfgate-flagcheck/model"]
    assert with_model_path(["--model", "x"]) == ["--model", "x"]
    assert with_model_path(["--model-path=x"]) == ["--model-path=x"]
    problems, _ = check_with_parser(NEW, ["--tp", "2"])
    assert [p.kind for p in problems] == ["required"]


def test_closest() -> None:
    opts = option_strings(NEW)
    assert "--enable-torch-symm-mem" in opts and all(o.startswith("--") for o in opts)
    assert closest("--enable-symm-memory", opts) == "--enable-symm-mem"
    assert closest("--disable-cuda-graph-padding", ["--tp-size"]) is None
    assert closest("--cuda-graph", opts) in ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill")
    assert closest("x", []) is None


def test_result_helpers() -> None:
    res = FlagCheckResult(available=False, reason="ModuleNotFoundError: No module named 'torch'")
    assert not res.ok and res.category is None and "not available" in res.message()
    problems, _ = check(NEW, "--cuda-graph-max-bs", "1")
    bad = FlagCheckResult(available=True, problems=problems, sglang_version="0.5.23")
    assert not bad.ok and bad.category == "bad-flag" and "SGLang 0.5.23 rejects" in bad.message()
    assert problems_by_flag({"a": bad, "b": bad}) == {"--cuda-graph-max-bs": ["a", "b"]}


# ---------------------------------------------------------------- the subprocess protocol, on a stand-in sglang

FAKE_SERVER_ARGS = textwrap.dedent('''
    import argparse

    class ServerArgs:
        @staticmethod
        def add_cli_args(parser: argparse.ArgumentParser) -> None:
            parser.add_argument("--model-path", required=True)
            parser.add_argument("--cuda-graph-max-bs-decode", type=int)
            parser.add_argument("--cuda-graph-max-bs-prefill", type=int)
            parser.add_argument("--enable-torch-symm-mem", action="store_true")
''')


@pytest.fixture
def fake_sglang(tmp_path: Path) -> Path:
    pkg = tmp_path / "sglang"
    (pkg / "srt").mkdir(parents=True)
    # importing the package itself would fail: the flag check must skip sglang/__init__.py
    (pkg / "__init__.py").write_text("raise ImportError('sglang/__init__ imports torch')\n")
    (pkg / "srt" / "__init__.py").write_text("")
    (pkg / "srt" / "server_args.py").write_text(FAKE_SERVER_ARGS)
    dist = tmp_path / "sglang-9.9.9.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 9.9.9\n")
    return tmp_path


def test_check_many_in_one_subprocess(fake_sglang: Path) -> None:
    results = check_many({"old": ["--cuda-graph-max-bs", "128"], "new": ["--cuda-graph-max-bs-decode", "128"],
                          "typo": ["--enable-torch-symm-memory"]}, str(fake_sglang))
    assert {n: r.ok for n, r in results.items()} == {"old": False, "new": True, "typo": False}
    assert all(r.available and r.sglang_version == "9.9.9" and r.elapsed_s > 0 for r in results.values())
    assert results["old"].problems[0].suggestion == "--cuda-graph-max-bs-decode"
    assert results["old"].problems[0].candidates == ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill")
    assert results["typo"].problems[0].suggestion == "--enable-torch-symm-mem"
    assert results["new"].argv == ("--cuda-graph-max-bs-decode", "128")


def test_unavailable_sglang_is_reported_not_raised(tmp_path: Path) -> None:
    res = check_argv(["--tp", "2"], sglang_path=str(tmp_path))
    assert not res.available and not res.ok and "server_args.py" in res.reason
    res = check_argv(["--tp", "2"], sglang_path=str(tmp_path), python=str(tmp_path / "no-such-python"))
    assert not res.available and "cannot run" in res.reason


# ---------------------------------------------------------------- the real parsers (CI installs them)

PARSERS = os.environ.get("PERFGATE_SGLANG_PARSERS")
needs_parsers = pytest.mark.skipif(
    not PARSERS, reason="set PERFGATE_SGLANG_PARSERS=DIR after `ci/install-sglang-parsers.sh DIR` (.ci/run does)")

REAL_ARGVS = {
    "old-spelling": ["--cuda-graph-max-bs", "128"],
    "new-spelling": ["--cuda-graph-max-bs-decode", "128"],
    "typo": ["--enable-torch-symm-memory"],
    "seed-eagle3": ["--model-path", "/m", "--tp-size", "8", "--mem-fraction-static", "0.85",
                    "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d",
                    "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                    "--speculative-num-draft-tokens", "4", "--load-format", "dummy", "--disable-custom-all-reduce"],
}


@pytest.fixture(scope="module")
def real() -> dict[str, dict[str, FlagCheckResult]]:
    assert PARSERS
    versions = ("0.5.17", "0.5.23")
    with ThreadPoolExecutor(len(versions)) as pool:  # one SGLang import per version, side by side
        futures = {v: pool.submit(check_many, REAL_ARGVS, str(Path(PARSERS) / f"sglang-{v}")) for v in versions}
        out = {v: f.result() for v, f in futures.items()}
    for v, results in out.items():
        sample = next(iter(results.values()))
        assert sample.available, f"SGLang {v}'s parser could not be imported: {sample.reason}"
        assert sample.sglang_version == v
    return out


@needs_parsers
def test_real_017_accepts_the_old_spelling_as_deprecated(real: dict[str, dict[str, FlagCheckResult]]) -> None:
    res = real["0.5.17"]["old-spelling"]
    assert res.ok, res.message()
    assert any("--cuda-graph-max-bs-decode" in d for d in res.deprecations)


@needs_parsers
def test_real_023_rejects_the_old_spelling_naming_the_new_one(real: dict[str, dict[str, FlagCheckResult]]) -> None:
    res = real["0.5.23"]["old-spelling"]
    assert res.category == "bad-flag"
    (p,) = res.problems
    assert p.flag == "--cuda-graph-max-bs" and p.kind == "ambiguous"
    assert p.suggestion == "--cuda-graph-max-bs-decode"


@needs_parsers
@pytest.mark.parametrize("version", ["0.5.17", "0.5.23"])
def test_real_new_spelling_and_typo(real: dict[str, dict[str, FlagCheckResult]], version: str) -> None:
    assert real[version]["new-spelling"].ok, real[version]["new-spelling"].message()
    assert real[version]["seed-eagle3"].ok, real[version]["seed-eagle3"].message()
    (p,) = real[version]["typo"].problems
    assert (p.flag, p.suggestion) == ("--enable-torch-symm-memory", "--enable-torch-symm-mem")

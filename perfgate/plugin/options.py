"""The value parsers of perfgate's command-line options: a bad value is pytest's usage error with an example.

What the options resolve to, and their precedence over the profile, is :mod:`perfgate.profiles.settings`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

__all__ = ["PATH_OPTIONS", "rootdir_taken_from_an_option",
           "option_trials", "option_starts", "option_seconds", "option_budget_seconds", "option_max_starts",
           "option_fraction", "option_cpus", "option_reports"]




def _whole_number(option: str, what: str, example: int) -> Callable[[str], int]:
    """The parser of an option whose value is a whole number >= 1 (``what`` of it), else a usage error with an
    example."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise pytest.UsageError(f"perfgate: {option} {text!r}: expected a whole number of {what} >= 1, "
                                    f"e.g. {example}")
        return value

    return parse


#: --perfgate-trials N
option_trials = _whole_number("--perfgate-trials", "trials", 5)
#: --perfgate-starts N
option_starts = _whole_number("--perfgate-starts", "server starts", 3)
#: --perfgate-max-starts N
option_max_starts = _whole_number("--perfgate-max-starts", "server starts per config", 6)


def _seconds(option: str, example: int) -> Callable[[str], float]:
    """The parser of an option whose value is seconds > 0, else a usage error with an example."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not value > 0:
            raise pytest.UsageError(f"perfgate: {option} {text!r}: expected seconds > 0, e.g. {example}")
        return value

    return parse


#: --perfgate-progress-interval S
option_seconds = _seconds("--perfgate-progress-interval", 15)
#: --perfgate-max-time S: the time the starts added to undecided comparisons may take
option_budget_seconds = _seconds("--perfgate-max-time", 1800)


def option_fraction(text: str) -> float:
    """--perfgate-co-resident FRACTION: each co-resident server's --mem-fraction-static (perfgate.serving.coresident),
    else a usage error naming the range and an example."""
    from perfgate.serving.coresident import problem

    try:
        value = float(text)
    except ValueError:
        value = -1.0
    bad = problem(value, attached=False)
    if bad:
        raise pytest.UsageError(f"perfgate: {bad}")
    return value


def option_cpus(text: str) -> frozenset[int]:
    """--perfgate-server-cpus CPUS: the CPUs every launched server may run on (perfgate.host.affinity), else a usage
    error naming the format or the CPUs that are not available."""
    from perfgate.host.affinity import parse_cpus

    try:
        return parse_cpus(text)
    except ValueError as e:
        raise pytest.UsageError(f"perfgate: --perfgate-server-cpus: {e}") from None


def option_reports(text: str) -> tuple[str, ...]:
    """--perfgate-noise-from PATH: the JUnit reports a file, a directory (every ``*.xml`` below) or a glob names, each
    read once here, else a usage error naming the path or the file that is no report."""
    from perfgate.errors import ConfigError, ReportError
    from perfgate.report.gate import history_paths
    from perfgate.report.junit_read import read_reports

    try:
        paths = history_paths([text])
        if not paths:
            raise ConfigError(text)
        read_reports(paths)
    except ConfigError:
        raise pytest.UsageError(f"perfgate: --perfgate-noise-from {text!r}: no report file, directory or glob that "
                                f"matches anything; fix the path, or leave the option out to judge against the "
                                f"documented priors") from None
    except ReportError as e:
        raise pytest.UsageError(f"perfgate: --perfgate-noise-from: {e}; name JUnit reports of perfgate's paired "
                                f"runs") from None
    return tuple(str(p) for p in paths)


#: the options whose value is a folder or file: given in their space form before the plugin is known, pytest takes
#: the value for a path to test and may choose its folder as the rootdir (another pytest.ini, or none)
PATH_OPTIONS = ("perfgate_log_dir", "perfgate_noise_from", "perfgate_profile")


def rootdir_taken_from_an_option(config: pytest.Config) -> None:
    """A usage error when pytest chose as its rootdir the folder one of perfgate's path options names: the project's
    pytest.ini (and its profile) would be ignored without a word."""
    root = Path(str(config.rootpath)).resolve()
    for name in PATH_OPTIONS:
        vals = config.getoption(name, None)
        for v in (vals if isinstance(vals, list) else [vals]):
            for p in (v if isinstance(v, (list, tuple)) else [v]):
                if p and Path(str(p)).exists() and Path(str(p)).resolve() == root and root != Path.cwd().resolve():
                    opt = "--" + name.replace("_", "-")
                    raise pytest.UsageError(
                        f"perfgate: pytest took {root} as its rootdir: it read {opt}'s value as a path to test (the "
                        f"space form, '{opt} {p}'), so this project's pytest.ini and profile were not used; fix: "
                        f"'{opt}={p}'")

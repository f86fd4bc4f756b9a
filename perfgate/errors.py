"""perfgate's exception tree.

    PerfgateError                  base of everything perfgate raises on purpose
    ├── ConfigError                bad input: profiles, variants, options
    │   ├── ProfileNotFound        no such profile file / name
    │   ├── ProfileSchemaError     a profile or variants file breaks the schema (file, key, expected, found)
    │   └── HardwareMismatch       the profile is for other hardware than the one detected
    ├── ServerError                a server process could not be brought up or kept up
    │   ├── ServerExitedError      the process exited (returncode, log tail, category)
    │   ├── ServerStartTimeout     not ready before the deadline
    │   ├── PortInUse              something already answers on the port
    │   └── GpuMemoryNotReleased   teardown finished but the GPU memory is still held
    ├── MicrobenchError            an all-reduce micro-benchmark could not run (backend, category, log_path)
    │   ├── BackendUnavailable     the backend cannot run here (no GPU, not importable, arch); category says why
    │   ├── RankFailed             a rank process failed (rank, returncode, log tail)
    │   └── MicrobenchTimeout      the ranks did not finish before the deadline
    └── ReportError                a JUnit report cannot be read or compared

Context travels as keyword attributes (``returncode=``, ``log_path=``, ``category=``), so
callers never parse messages.
"""

from __future__ import annotations

from enum import IntEnum
from pathlib import Path


class ExitCode(IntEnum):
    """The exit codes of every ``perfgate`` command, in one table (pytest's own are pytest's: a session's failures are
    1, a usage error 4, no test run 5)."""

    OK = 0
    #: ``gate``: a change blocks; ``check-flags``: a flag was rejected; ``floors``: a floor was flagged
    BLOCKED = 1
    #: a usage error: a bad option, a missing or unreadable file; the message names the fix
    USAGE = 2
    #: ``gate``: a strict xfail passed (a backend unblocked): update the expectation
    UNBLOCKED = 3
    #: ``bisect``: it stopped before it decided (its budget, a step that could not decide); what finished is kept
    STOPPED = 3


class PerfgateError(Exception):
    """Base class of every error perfgate raises on purpose."""

    category: str | None = None


class ConfigError(PerfgateError):
    """Bad input: a profile, a variant, a command-line option."""

    category = "config-error"


class ProfileNotFound(ConfigError):
    """The named profile does not exist."""


class ProfileSchemaError(ConfigError):
    """A TOML file breaks the schema; names the file, the key, what was expected and found."""

    def __init__(
        self,
        path: str | Path,
        key: str,
        expected: str,
        found: object = None,
        *,
        fix: str | None = None,
    ) -> None:
        self.path = str(path)
        self.key = key
        self.expected = expected
        self.found = found
        if not fix:  # every schema error says what to do, even where its raiser knows nothing more specific
            fix = ("correct the TOML syntax where the parser says" if key == "(file)"
                   else f"give '{key}' {expected}" if found is None else f"change '{key}' to {expected}")
        self.fix = fix
        msg = f"{self.path}: key '{key}': expected {expected}"
        if found is not None:
            msg += f", found {found!r}"
        msg += f"; fix: {fix}"
        super().__init__(msg)


class HardwareMismatch(ConfigError):
    """The profile was written for other hardware than the one perfgate detected."""

    def __init__(self, message: str, *, profile_path: str, expected: str, detected: str) -> None:
        self.profile_path = profile_path
        self.expected = expected
        self.detected = detected
        super().__init__(message)


def _with_log(message: str, log_path: str | None, log_tail: str) -> str:
    """``message``, then the log's path and its last lines (indented), as server and rank errors print them."""
    full = message
    if log_path:
        full += f"\n  log: {log_path}"
    if log_tail:
        full += "\n  last lines of the log:\n" + "\n".join("    | " + ln for ln in log_tail.splitlines())
    return full


class ServerError(PerfgateError):
    """A server could not be brought up or kept up."""

    def __init__(
        self,
        message: str,
        *,
        log_path: str | Path | None = None,
        log_tail: str = "",
        category: str | None = None,
        returncode: int | None = None,
    ) -> None:
        self.log_path = str(log_path) if log_path else None
        self.log_tail = log_tail
        self.returncode = returncode
        if category is not None:
            self.category = category
        super().__init__(_with_log(message, self.log_path, log_tail))


class ServerExitedError(ServerError):
    """The server process exited before it was ready, or while serving."""

    category = "crash"


class ServerStartTimeout(ServerError):
    """The server did not become ready before the deadline."""

    category = "startup-timeout"


class PortInUse(ServerError):
    """Something already answers on the chosen port."""

    category = "config-error"


class GpuMemoryNotReleased(ServerError):
    """The server's processes are gone but GPU memory is still held (names the PIDs)."""

    category = "crash"

    def __init__(
        self,
        message: str,
        *,
        pids: list[int],
        log_path: str | Path | None = None,
        log_tail: str = "",
        category: str | None = None,
        returncode: int | None = None,
    ) -> None:
        self.pids = pids
        super().__init__(message, log_path=log_path, log_tail=log_tail, category=category, returncode=returncode)


class ReportError(PerfgateError):
    """A JUnit report cannot be read or compared."""


class MicrobenchError(PerfgateError):
    """An all-reduce micro-benchmark could not run or finish (``perfgate.allreduce``)."""

    category = "crash"

    def __init__(
        self,
        message: str,
        *,
        backend: str,
        category: str | None = None,
        log_path: str | Path | None = None,
        log_tail: str = "",
    ) -> None:
        self.backend = backend
        self.log_path = str(log_path) if log_path else None
        self.log_tail = log_tail
        if category is not None:
            self.category = category
        super().__init__(_with_log(message, self.log_path, log_tail))


class BackendUnavailable(MicrobenchError):
    """The all-reduce backend cannot run here; ``category`` says why (missing-dependency, unsupported-arch, ...)."""

    category = "missing-dependency"


class RankFailed(MicrobenchError):
    """A rank process of the micro-benchmark failed (``rank``, ``returncode``)."""

    def __init__(
        self,
        message: str,
        *,
        rank: int,
        returncode: int | None,
        backend: str,
        category: str | None = None,
        log_path: str | Path | None = None,
        log_tail: str = "",
    ) -> None:
        self.rank = rank
        self.returncode = returncode
        super().__init__(message, backend=backend, category=category, log_path=log_path, log_tail=log_tail)


class MicrobenchTimeout(MicrobenchError):
    """The micro-benchmark's ranks did not finish before the deadline (all were killed)."""

    category = "startup-timeout"

"""The processes perfgate starts: free ports, process groups, the reaper watchdog, log tails.

Servers and all-reduce ranks run in process groups of their own, so that teardown kills every
process they spawned. A reaper (``python -m perfgate.host.procs OWNER_PID PGID [GRACE_S]``) runs in
a session of its own beside each group and kills the group when the process that owns it dies
without tearing down (Ctrl-C in the terminal, SIGKILL of pytest, pytest-timeout's ``os._exit``);
it exits as soon as the group is empty.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# ----------------------------------------------------------------------------- ports


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago (perfgate's one port picker).

    Drawn below Linux's ephemeral range (32768-60999), so that no client connection can take it as its
    source port between this check and the server's bind; the kernel's choice only if 200 draws fail.
    """
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 32000)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


#: what a process prints when its bind lost the port to another process (Python's, uvicorn's, torch's TCPStore)
_BIND_LOST = re.compile(r"address already in use|EADDRINUSE", re.IGNORECASE)


def lost_port_race(output: str) -> bool:
    """Whether a process's output says its bind failed because another process holds the port: for a port
    :func:`free_port` chose, the other process took it between the choice and the bind, and another port will do."""
    return bool(_BIND_LOST.search(output))


def port_answers(host: str, port: int, timeout: float = 0.5) -> bool:
    """True if something accepts TCP connections on host:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        return s.connect_ex((host, port)) == 0


# ----------------------------------------------------------------------------- process groups


def group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    import psutil

    out = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except (ProcessLookupError, psutil.Error, OSError):
            continue
    return out


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (True when it cannot be told)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still "exists": check its state
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` exists (zombies included; True when it cannot be told)."""
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to group ``pgid``; a group that is gone (or not ours) is not an error."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_kw(pgid: int) -> dict[str, Any]:
    """Popen arguments that put the child in process group ``pgid`` (0: a new group of its own)."""
    if sys.version_info >= (3, 11):
        return {"process_group": pgid}
    return {"preexec_fn": lambda: os.setpgid(0, pgid)}  # pragma: no cover - Python 3.10


def perfgate_pythonpath(env: Mapping[str, str]) -> str:
    """``PYTHONPATH`` for a child that imports perfgate: this perfgate's root first, then ``env``'s."""
    root = str(Path(__file__).resolve().parents[2])  # perfgate/host/procs.py -> the dir holding perfgate
    return os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)


def start_reaper(pgid: int, grace_s: float, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """The watchdog that kills group ``pgid`` if this process dies first (in a session of its own)."""
    base = dict(os.environ if env is None else env)
    return subprocess.Popen(
        [sys.executable, "-m", "perfgate.host.procs", str(os.getpid()), str(pgid), str(grace_s)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, env={**base, "PYTHONPATH": perfgate_pythonpath(base)},
    )


def reap(owner: int, pgid: int, grace_s: float = 10.0, poll_s: float = 0.5) -> int:
    """Wait while group ``pgid`` lives; once ``owner`` dies, SIGTERM the group, then SIGKILL after ``grace_s``."""
    while True:
        if not group_alive(pgid):
            return 0
        if not pid_alive(owner):
            break
        time.sleep(poll_s)
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return 0
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and group_alive(pgid):
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    return 0


# ----------------------------------------------------------------------------- log files


def tail(path: str | Path, lines: int = 30, max_bytes: int = 64_000) -> str:
    """The last ``lines`` lines of a file (empty if missing)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def main(argv: list[str]) -> int:
    """The reaper: ``python -m perfgate.host.procs OWNER_PID PGID [GRACE_S]``."""
    owner, pgid = int(argv[0]), int(argv[1])
    grace = float(argv[2]) if len(argv) > 2 else 10.0
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return reap(owner, pgid, grace)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

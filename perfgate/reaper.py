"""A watchdog that kills a server's process group when the pytest process that owns it dies.

``python -m perfgate.reaper OWNER_PID PGID [GRACE_S]`` runs in its own session, so Ctrl-C in
the terminal, SIGKILL of pytest or pytest-timeout's ``os._exit`` cannot take it down before it
has done its job. It exits as soon as the group is empty.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def _alive(pid: int) -> bool:
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


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def main(argv: list[str]) -> int:
    owner, pgid = int(argv[0]), int(argv[1])
    grace = float(argv[2]) if len(argv) > 2 else 10.0
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        if not _group_alive(pgid):
            return 0
        if not _alive(owner):
            break
        time.sleep(0.5)
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return 0
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

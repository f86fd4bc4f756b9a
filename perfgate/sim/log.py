"""SGLang-shaped log lines (``[2026-11-29 12:00:00] text``), flushed one by one, thread-safe."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


class SimLog:
    """Writes timestamped lines to one stream; every line is flushed at once."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream if stream is not None else sys.stdout
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        """One log record; continuation lines (tracebacks) are written as they are."""
        stamp = time.strftime("[%Y-%m-%d %H:%M:%S]")
        self.raw(f"{stamp} {text}")

    def raw(self, text: str) -> None:
        with self._lock:
            try:
                self._stream.write(text + "\n")
                self._stream.flush()
            except (OSError, ValueError):
                pass

    def access(self, client: str, method: str, path: str, code: int, reason: str) -> None:
        """Uvicorn's access-log line."""
        self.line(f'INFO:     {client} - "{method} {path} HTTP/1.1" {code} {reason}')

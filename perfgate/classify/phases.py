"""Start-up phases a server log line marks (weights, kv-cache, cuda-graph, warmup, ready), and the log's
lines as classification reads them."""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PHASES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ready", re.compile(r"The server is fired up and ready to roll!")),
    ("cuda-graph", re.compile(r"Capture .*(?:cuda graph|CUDA graph).*(?:begin|end)|Capture cuda graph "
                              r"(?:begin|end)|Capturing batches|Capture .* (?:begin|end)\. ", re.IGNORECASE)),
    ("kv-cache", re.compile(r"KV Cache is allocated|Memory pool end|max_total_num_tokens=")),
    ("weights", re.compile(r"Load weight (?:begin|end)|Loading safetensors checkpoint shards|"
                           r"Loading pt checkpoint shards")),
    ("warmup", re.compile(r"Uvicorn running on|Application startup complete|Start of pd disaggregation warmup")),
)


def phase_of(line: str) -> str | None:
    """Start-up phase a log line marks: weights, kv-cache, cuda-graph, warmup, ready (or None)."""
    text = _ANSI.sub("", line)
    if "Initialization failed" in text or "server_args=ServerArgs(" in text:
        return None
    for name, pattern in _PHASES:
        if pattern.search(text):
            return name
    return None


def log_lines(log_text: str) -> list[str]:
    """The log's lines without ANSI colours and fixtures' ``# source:`` header lines."""
    out: list[str] = []
    for raw in re.split(r"\r\n|\r|\n", log_text):
        if raw.startswith("# source:"):
            continue
        out.append(_ANSI.sub("", raw))
    return out

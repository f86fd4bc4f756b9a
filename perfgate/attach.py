"""Attach mode: does a running server's ``/server_info`` match a config?"""

from __future__ import annotations

from perfgate.client import get_json
from perfgate.config import ServerConfig

# flags whose values SGLang rewrites during resolution; compared loosely or not at all
_LOOSE = {"speculative-algorithm"}


def _same(want: object, got: object) -> bool:
    if isinstance(want, bool):
        return bool(got) == want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)) and not isinstance(got, bool):
        return abs(float(want) - float(got)) <= 1e-9 * max(1.0, abs(float(want)))
    if isinstance(want, (list, tuple)):
        return isinstance(got, (list, tuple)) and [str(x) for x in want] == [str(x) for x in got]
    return str(want).lower() == str(got).lower()


def mismatches(url: str, config: ServerConfig) -> list[str] | None:
    """Differences between the config's flags and the server's resolved args (None: unreadable)."""
    info = get_json(url, "/server_info")
    if info is None:
        return None
    probs = []
    for flag, want in config.flag_dict.items():
        field = flag.replace("-", "_")
        if field not in info:
            if want is False:
                continue
            probs.append(f"{field} not reported by the server (want {want!r})")
            continue
        if not _same(want, info[field]):
            probs.append(f"{field}={info[field]!r} (want {want!r})")
    mp = info.get("model_path")
    if mp is not None and str(mp).rstrip("/") != config.model_path.rstrip("/"):
        probs.append(f"model_path={mp!r} (want {config.model_path!r})")
    if not config.speculative and info.get("speculative_algorithm"):
        probs.append(f"speculative_algorithm={info['speculative_algorithm']!r} (want none)")
    return probs

"""A config's flags as an SGLang command line (both engines and the preflight render flags this way)."""

from __future__ import annotations

from collections.abc import Mapping


def render_flags(flags: Mapping[str, object]) -> list[str]:
    """SGLang flag dict -> argv: ``True`` is a bare switch, ``False`` is left out, lists spread."""
    argv: list[str] = []
    for name, value in flags.items():
        opt = f"--{name}"
        if value is True:
            argv.append(opt)
        elif value is False or value is None:
            continue
        elif isinstance(value, (list, tuple)):
            argv.append(opt)
            argv.extend(str(x) for x in value)
        else:
            argv.extend([opt, str(value)])
    return argv

"""What perfgate ships besides its code: the simulated boxes, the prompt sets and the default simulated
profile (with the profile it extends and the variants file), so a test of your own in any directory runs
on the simulated seed box after a plain ``pip install perfgate``.

They live once, in the repository (:data:`SHIPPED`, paths relative to its root); building the wheel copies
them under ``perfgate/data/project/`` with the same layout (``setup.py``), which makes that directory a
small project of its own: the shipped profiles' relative paths (``fixtures/sim/...``) resolve inside it.
From a checkout (``pip install -e .``) the repository itself is that project.

This module imports nothing but the standard library: ``setup.py`` runs it to read :data:`SHIPPED`.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["SHIPPED", "DEFAULT_SIM_PROFILE", "shipped_root", "shipped_file"]

#: the files the wheel ships, as globs relative to the repository root
SHIPPED: tuple[str, ...] = (
    "fixtures/sim/*.toml",
    "fixtures/prompts/*.jsonl",
    "baselines/variants.toml",
    "baselines/sim-rtxpro6000-x8/kimi-k2.5.toml",
    "baselines/rtxpro6000-x8/kimi-k2.5.toml",  # the one the simulated profile extends
)
#: the profile a session runs when none is named and no NVIDIA GPU is visible (relative to a project root)
DEFAULT_SIM_PROFILE = "baselines/sim-rtxpro6000-x8/kimi-k2.5.toml"

_PACKAGED = Path(__file__).resolve().parents[1] / "data" / "project"  # in an installed wheel
_CHECKOUT = Path(__file__).resolve().parents[2]  # the repository, for an editable install


def shipped_root() -> Path | None:
    """The directory the shipped files are under (same layout as the repository), or None."""
    if (_PACKAGED / "baselines").is_dir():
        return _PACKAGED
    if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "baselines").is_dir():
        return _CHECKOUT
    return None


def shipped_file(relative: str | Path) -> Path | None:
    """The shipped copy of ``relative`` (a path relative to a project root, e.g. ``fixtures/sim/x.toml``),
    or None when perfgate does not ship it."""
    root = shipped_root()
    rel = Path(relative)
    if root is None or rel.is_absolute() or ".." in rel.parts:
        return None
    if not any(rel.match(g) and len(rel.parts) == len(Path(g).parts) for g in SHIPPED):
        return None
    found = root / rel
    return found if found.is_file() else None


def is_shipped_copy(path: Path) -> bool:
    """Whether ``path`` is the installed wheel's copy (not a file of the user's, nor of a checkout)."""
    try:
        return path.resolve().is_relative_to(_PACKAGED)
    except OSError:
        return False

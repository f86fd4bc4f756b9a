"""Backend fallbacks: "X is disabled / not available / falls back to NCCL" warnings. A backend that fell
back did not run, and a record must say so (:func:`fallbacks_for`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from perfgate.categories import Backend
from perfgate.classify.phases import log_lines
from perfgate.classify.rules import FALLBACK_RULES, UNSUPPORTED_ARCH, best_category


@dataclass(frozen=True, kw_only=True)
class Fallback:
    """One backend that did not run: which, why (a category) and the log line that says so.

    ``backend`` is a :class:`~perfgate.categories.Backend`, as in ``baselines/variants.toml``.
    """

    backend: Backend
    category: str
    line: str
    falls_back_to: str = "nccl"

    @property
    def evidence(self) -> str:
        """The log line (alias of ``line``)."""
        return self.line

    def describe(self) -> str:
        """E.g. ``torch_symm_mem fell back to NCCL: unsupported-arch``."""
        return f"{self.backend} fell back to {self.falls_back_to.upper()}: {self.category}"


def fallback_of(line: str) -> Fallback | None:
    """The fallback ``line`` reports, or None."""
    for rule in FALLBACK_RULES:
        m = rule.pattern.search(line)
        if m is None:
            continue
        category = rule.category
        if category is None:
            detail = m.groupdict().get("detail") or ""
            category = best_category(detail) or UNSUPPORTED_ARCH
        return Fallback(backend=rule.backend, category=category, line=line.strip())
    return None


def find_fallbacks(log_text: str) -> tuple[Fallback, ...]:
    """Every backend fallback warning in the log, in order, one per (backend, line)."""
    out: list[Fallback] = []
    seen: set[tuple[str, str]] = set()
    for line in log_lines(log_text):
        fb = fallback_of(line)
        if fb is None:
            continue
        key = (fb.backend, strip_prefix(fb.line))
        if key in seen:
            continue
        seen.add(key)
        out.append(fb)
    return tuple(out)


def strip_prefix(line: str) -> str:
    """Drop a ``[timestamp TPn]`` prefix so per-rank duplicates collapse."""
    return re.sub(r"^\[[^\]]*\]\s*", "", line)


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_BACKEND_ALIASES: dict[str, tuple[str, ...]] = {  # by Backend
    Backend.CUSTOM_AR: ("customar", "customallreduce", "customallreducev2", "customarpcie"),
    Backend.TORCH_SYMM_MEM: ("torchsymmmem", "torchsymmetricmemory", "enabletorchsymmmem"),
    Backend.MSCCLPP: ("mscclpp", "pymscclpp", "enablemscclpp", "msccl"),
    Backend.FLASHINFER_AR_FUSION: ("flashinferarfusion", "flashinferallreducefusion",
                                   "enableflashinferallreducefusion", "flashinferallreducefusionbackend"),
    Backend.PCIE_IPC: ("pcieipc", "pcieipcallreduce", "sglangenablepcieipcallreduce", "flashinferpcieipc"),
    Backend.QUICK_AR: ("quickar", "quickallreduce"),
}


def backend_matches(backend: str, keyword: str) -> bool:
    """Whether a fallback's backend is the one a keyword (variant name, flag) refers to."""
    k = _norm(keyword)
    if not k:
        return False
    names = (_norm(backend),) + _BACKEND_ALIASES.get(backend, ())
    return any(k == n or (len(k) >= 4 and (k in n or n in k)) for n in names)


def fallbacks_for(log_text: str, backend_keywords: Iterable[str]) -> tuple[Fallback, ...]:
    """The fallbacks of the backends a variant wanted, e.g. ``["torch_symm_mem"]``.

    Keywords are matched loosely (``--enable-torch-symm-mem``, ``torch_symm_mem`` and
    ``torch-symm-mem`` all find ``torch_symm_mem``). Empty when the wanted backend ran.
    """
    keys = [k for k in backend_keywords if k]
    return tuple(fb for fb in find_fallbacks(log_text) if any(backend_matches(fb.backend, k) for k in keys))

"""A cost planted in a package's version, and packages that do not import together, on the simulated box.

``PERFGATE_SIM_PACKAGE_COST`` (or ``--sim-package-cost``) lists effects, ``;``-separated; each is a condition on
the simulated stack's versions (``KEY=VERSION``, several joined with ``+``: all must hold) and what follows when it
holds, after a ``:``::

    flashinfer=0.7.3:0.97                       every step 3 % slower while flashinfer is at 0.7.3
    torch=2.10.0+nccl=2.28.3:0.95               5 % slower only with both (neither alone costs anything)
    sgl_kernel=0.4.10+torch=2.9.1:incompatible  the server does not import: sgl_kernel 0.4.10 was built
                                                against another torch than 2.9.1

The keys are the simulated stack's (``[stack]`` of the hardware file after ``--sim-stack`` /
``PERFGATE_SIM_STACK``: cuda, torch, nccl, sglang, sgl_kernel, flashinfer and any installed package). A factor
multiplies the start's speed like ``PERFGATE_SIM_SCALE`` (:mod:`perfgate.sim.variation`), one per effect that
holds. An incompatibility ends the launch in the main process with the ImportError a wheel built against
another torch raises (``undefined symbol``), which perfgate's classifier calls ``missing-dependency``. Both arms
of a paired run read the same variable; what differs between them is their stack, so the effect lands on the arm
whose versions match: a known culprit for ``perfgate bisect`` to find. Nothing here imports beyond the simulator.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from perfgate.sim.launch.tracebacks import main_fail
from perfgate.sim.plan import Failure

__all__ = ["PACKAGE_COST_ENV", "INCOMPATIBLE", "PackageEffect", "parse_package_costs", "holding",
           "package_factor", "incompatibility", "import_failure"]

PACKAGE_COST_ENV = "PERFGATE_SIM_PACKAGE_COST"
#: the effect word of a combination that does not import
INCOMPATIBLE = "incompatible"
_FIX = (f"fix: e.g. {PACKAGE_COST_ENV}='flashinfer=0.7.3:0.97;torch=2.10.0+nccl=2.28.3:0.95;"
        f"sgl_kernel=0.4.10+torch=2.9.1:{INCOMPATIBLE}' (KEY=VERSION[+KEY=VERSION...]:FACTOR or :{INCOMPATIBLE}, "
        f"a factor in (0, 10))")
_DIST = "/usr/local/lib/python3.12/dist-packages"


@dataclass(frozen=True)
class PackageEffect:
    """One effect: ``when`` (stack key, version) pairs, all of which must hold; a speed ``factor`` or
    ``incompatible``."""

    when: tuple[tuple[str, str], ...]
    factor: float = 1.0
    incompatible: bool = False

    def holds(self, stack: Mapping[str, str]) -> bool:
        """Every (key, version) of ``when`` is the stack's."""
        return all(str(stack.get(k, "")) == v for k, v in self.when)

    def text(self) -> str:
        cond = "+".join(f"{k}={v}" for k, v in self.when)
        return f"{cond}:{INCOMPATIBLE if self.incompatible else f'{self.factor:g}'}"


def parse_package_costs(text: str | None) -> tuple[PackageEffect, ...]:
    """``PERFGATE_SIM_PACKAGE_COST``'s effects (empty: none); ValueError names the variable, the item and the fix."""
    out: list[PackageEffect] = []
    for item in (text or "").split(";"):
        item = item.strip()
        if not item:
            continue
        cond, sep, effect = item.rpartition(":")
        if not sep or not cond.strip():
            raise ValueError(f"{PACKAGE_COST_ENV}: {item!r} has no ':FACTOR' or ':{INCOMPATIBLE}'; {_FIX}")
        when = []
        for part in cond.split("+"):
            key, eq, ver = part.strip().partition("=")
            if not eq or not key.strip() or not ver.strip():
                raise ValueError(f"{PACKAGE_COST_ENV}: {part.strip()!r} in {item!r} is not KEY=VERSION; {_FIX}")
            when.append((key.strip(), ver.strip()))
        effect = effect.strip()
        if effect.lower() == INCOMPATIBLE:
            if len(when) < 1:
                raise ValueError(f"{PACKAGE_COST_ENV}: {item!r}: an incompatibility names its packages; {_FIX}")
            out.append(PackageEffect(tuple(when), incompatible=True))
            continue
        try:
            factor = float(effect)
        except ValueError:
            factor = float("nan")
        if not (0.0 < factor < 10.0 and math.isfinite(factor)):
            raise ValueError(f"{PACKAGE_COST_ENV}: {item!r}: {effect!r} is not a speed factor in (0, 10) or "
                             f"{INCOMPATIBLE!r}; {_FIX}")
        out.append(PackageEffect(tuple(when), factor=factor))
    return tuple(out)


def holding(effects: tuple[PackageEffect, ...], stack: Mapping[str, str]) -> list[PackageEffect]:
    """The effects whose conditions ``stack`` meets, in their order."""
    return [e for e in effects if e.holds(stack)]


def package_factor(effects: tuple[PackageEffect, ...], stack: Mapping[str, str]) -> float:
    """The product of the speed factors that hold on ``stack`` (1.0: none)."""
    f = 1.0
    for e in holding(effects, stack):
        if not e.incompatible:
            f *= e.factor
    return f


def incompatibility(effects: tuple[PackageEffect, ...], stack: Mapping[str, str]) -> PackageEffect | None:
    """The first incompatibility that holds on ``stack``, or None."""
    return next((e for e in holding(effects, stack) if e.incompatible), None)


def import_failure(effect: PackageEffect) -> Failure:
    """The main process's ImportError of an incompatible combination: the first package's extension was built
    against the other's ABI (``undefined symbol``), as a wheel built for another torch fails."""
    (pkg, ver), rest = effect.when[0], effect.when[1:]
    other = ", ".join(f"{k} {v}" for k, v in rest) or "this environment"
    mangled = f"_ZN3c104cuda{len(pkg) + 9}{pkg}_abi_v{ver.replace('.', '_')}E"
    return main_fail(
        "missing-dependency",
        [(f"{_DIST}/sglang/srt/entrypoints/http_server.py", 62, "<module>",
          "from sglang.srt.entrypoints.engine import _launch_subprocesses"),
         (f"{_DIST}/sglang/srt/layers/activation.py", 38, "<module>", f"import {pkg}"),
         (f"{_DIST}/{pkg}/__init__.py", 19, "<module>", "from . import _C")],
        f"ImportError: {_DIST}/{pkg}/_C.abi3.so: undefined symbol: {mangled} "
        f"({pkg} {ver} was built against another ABI than {other}'s)")

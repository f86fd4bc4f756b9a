"""The real engine: ``python -m sglang.launch_server`` or ``sglang serve``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from perfgate.engines.argv import render_flags
from perfgate.profiles.config import ServerConfig
from perfgate.profiles.variants import Spelling, spell_flags


def importable(module: str, python: str = "") -> bool:
    """Whether ``python`` (default: this interpreter) finds ``module`` (its spec; nothing is imported)."""
    if not python or python == sys.executable:
        import importlib.util

        try:
            return importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            return False
    code = "import importlib.util as u, sys; sys.exit(0 if u.find_spec(sys.argv[1]) else 1)"
    try:
        return subprocess.run([python, "-c", code, module], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def installed_sglang_version(python: str = "") -> str | None:
    """SGLang's version in the interpreter that will run the server (None if absent)."""
    if not python or python == sys.executable:
        from importlib import metadata

        try:
            return metadata.version("sglang")
        except metadata.PackageNotFoundError:
            return None
    try:
        out = subprocess.run(
            [python, "-c", "import importlib.metadata as m; print(m.version('sglang'))"],
            capture_output=True, text=True, timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


@dataclass(kw_only=True)
class SGLangEngine:
    """Launches real SGLang; flag names are spelled for the installed SGLang version."""

    python: str = ""
    launcher: str = "launch_server"  # or "serve"
    sglang_version: str = ""
    spellings: tuple[Spelling, ...] = ()
    teardown_grace_s: float = 30.0
    name: str = field(default="sglang", init=False)

    def version(self) -> str | None:
        return self.sglang_version or installed_sglang_version(self.python)

    def argv_flags(self, config: ServerConfig) -> list[str]:
        """The SGLang flags of ``config`` as argv, spelled for the target version."""
        return render_flags(spell_flags(config.flag_dict, self.spellings, self.version()))

    def command(self, config: ServerConfig, *, host: str, port: int) -> list[str]:
        py = self.python or sys.executable
        if self.launcher == "serve":
            from pathlib import Path

            exe = str(Path(py).with_name("sglang"))
            head = [exe, "serve"]
        else:
            head = [py, "-m", "sglang.launch_server"]
        return [*head, "--model-path", config.model_path, *self.argv_flags(config), "--host", host, "--port", str(port)]

    def environment(self, config: ServerConfig, base: Mapping[str, str]) -> dict[str, str]:
        # the server inherits perfgate's environment (a shared host's NCCL_NVLS_ENABLE=0, say) and the
        # config's on top: what the profile and variant set is what the server sees
        env = dict(base)
        env.update(config.env_dict)
        return env

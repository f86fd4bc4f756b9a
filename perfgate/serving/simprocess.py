"""Helpers to run the simulated server as a real subprocess in tests (127.0.0.1 only).

    with SimProcess.start(["--tp-size", "8"], log_path=tmp_path / "sim.log") as sim:
        sim.wait_ready()
        sim.get("/server_info")

Every wait is bounded; :meth:`SimProcess.close` SIGTERMs the process (then SIGKILLs it) and
always reaps it.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfgate.host.procs import free_port, lost_port_race
from perfgate.profiles.shipped import shipped_root

if TYPE_CHECKING:
    from perfgate.profiles import Profile

#: the simulated boxes perfgate ships (perfgate.profiles.shipped)
FIXTURES = (shipped_root() or Path.cwd()) / "fixtures" / "sim"
SEED_BOX = FIXTURES / "rtxpro6000-x8-pcie.toml"
H100_BOX = FIXTURES / "h100-x8-nvlink.toml"
_SIM_ENV = ("PERFGATE_SIM_STACK", "PERFGATE_SIM_FAULT", "PERFGATE_SIM_MACHINE", "PERFGATE_SIM_SCALE",
            "PERFGATE_SIM_START_SEED", "SGLANG_SIMULATE_ACC_LEN", "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE")


@dataclass
class SimProcess:
    """One ``python -m perfgate.sim`` subprocess with its log file."""

    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @classmethod
    def start(cls, args: Sequence[str], *, log_path: Path, hardware: Path | str = SEED_BOX,
              startup_s: float = 0.2, env: Mapping[str, str] | None = None, model_path: str = "/models/sim",
              port: int | None = None) -> SimProcess:
        full_env = {k: v for k, v in os.environ.items() if k not in _SIM_ENV and not k.startswith("NCCL_")}
        full_env.update(env or {})
        for _attempt in range(3):
            chosen = free_port() if port is None else port
            cmd = [sys.executable, "-m", "perfgate.sim", "--model-path", model_path, *args,
                   "--host", "127.0.0.1", "--port", str(chosen), "--sim-hardware", str(hardware),
                   "--sim-startup-s", str(startup_s)]
            with open(log_path, "wb") as fh:
                proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=full_env,
                                        start_new_session=True)
            sim = cls(proc=proc, port=chosen, log_path=log_path)
            if port is not None or not sim._lost_port_race():
                return sim
        return sim

    @classmethod
    def for_mode(cls, profile: Profile, mode: str, *, log_path: Path, start_seed: str,
                 speedup: float | None = None) -> SimProcess:
        """The simulated server of one mode of a simulated profile, as perfgate launches it (the mode's flags, the
        profile's simulated box), with one start seed (reproducible starts) and a speed-up (default: the
        simulator's own)."""
        from perfgate.engines.argv import render_flags

        if profile.engine.sim_hardware is None:
            raise ValueError(f"{profile.path}: not a simulated profile ([engine] sim_hardware is not set)")
        config = profile.config(mode)
        flags = render_flags({k: v for k, v in config.flag_dict.items() if k != "model-path"})
        flags += ["--sim-start-seed", start_seed]
        if speedup is not None:
            flags += ["--sim-speedup", f"{speedup:g}"]
        return cls.start(flags, log_path=log_path, hardware=profile.engine.sim_hardware, model_path=config.model_path)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _lost_port_race(self, timeout: float = 30.0) -> bool:
        """Wait until the server bound its port (or exited); True if someone else took the port."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return self.proc.returncode == 1 and lost_port_race(self.log())
            if "server_args=" in self.log():
                return False
            time.sleep(0.02)
        return False

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ process
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_exit(self, timeout: float = 20.0) -> int:
        return self.proc.wait(timeout=timeout)

    def close(self, timeout: float = 5.0) -> int:
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)
        return int(self.proc.returncode)

    def wait_ready(self, timeout: float = 30.0, path: str = "/health_generate") -> None:
        """Poll ``path`` until 200; raise if the process exits or the deadline passes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sim exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            try:
                status, _ = self.request("GET", path, timeout=2.0)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"sim not ready after {timeout} s:\n{self.log()[-3000:]}")

    # ------------------------------------------------------------------ HTTP
    def connection(self, timeout: float = 30.0) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method: str, path: str, body: Any = None, *, timeout: float = 30.0) -> tuple[int, bytes]:
        conn = self.connection(timeout)
        try:
            data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def get(self, path: str, **kw: Any) -> Any:
        status, body = self.request("GET", path, **kw)
        assert status == 200, (status, body)
        return json.loads(body)

    def post(self, path: str, body: Any, **kw: Any) -> tuple[int, Any]:
        status, raw = self.request("POST", path, body, **kw)
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode(errors="replace")

    def stream(self, body: Mapping[str, Any], path: str = "/generate", *, timeout: float = 30.0) -> Iterator[str]:
        """Yield the SSE ``data:`` payloads of a streaming request, raw (not parsed)."""
        conn = self.connection(timeout)
        try:
            conn.request("POST", path, body=json.dumps({**body, "stream": True}).encode(),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}: {resp.read()!r}")
            buf = b""
            while True:
                piece = resp.read1(65536)
                if not piece:
                    return
                buf += piece
                while b"\n\n" in buf:
                    event, buf = buf.split(b"\n\n", 1)
                    for line in event.split(b"\n"):
                        if line.startswith(b"data: "):
                            yield line[6:].decode()
        finally:
            conn.close()

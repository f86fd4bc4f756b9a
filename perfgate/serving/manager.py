"""Which server runs: at most one live server per process (``resident`` of them for co-resident arms), each distinct
config started once.

A failed start raises its ServerError; which configs failed is the session's server pool's to remember
(perfgate.serving.pool), which never asks for a failed config again. A failed start whose GPU memory was not
released blocks every later launch until NVML shows the memory free.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from perfgate.engines import Engine
from perfgate.errors import GpuMemoryNotReleased, ServerError
from perfgate.profiles.config import ServerConfig
from perfgate.serving.server import ProgressFn, Server


@dataclass
class ServerManager:
    """At most ``resident`` live servers per process (1 unless arms run side by side: ``--perfgate-co-resident``);
    ``current`` is the latest asked for, ``others`` the ones kept running beside it."""

    engine_for: Callable[[ServerConfig], Engine]
    log_dir: Path
    startup_timeout_s: Callable[[ServerConfig], float] = lambda c: 1200.0
    on_progress: ProgressFn | None = None
    progress_every_s: float = 15.0
    current: Server | None = None
    starts: int = 0
    started_configs: list[str] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)
    #: a failed start whose GPU memory was not released: no later launch until NVML shows it free
    gpu_blocked: GpuMemoryNotReleased | None = None
    #: how many servers may run at once (co-resident arms: 2)
    resident: int = 1
    #: the servers kept running beside ``current`` (oldest first; at most ``resident - 1``)
    others: list[Server] = field(default_factory=list)
    #: the CPUs every launched server may run on (``--perfgate-server-cpus``; None: any)
    cpus: frozenset[int] | None = None

    def ensure(self, config: ServerConfig) -> Server:
        """The running server for ``config``, starting it if needed: another one is stopped, or with ``resident`` > 1
        kept running beside it (the oldest stopped beyond ``resident``)."""
        kept = next((s for s in self.others if s.config.key == config.key), None)
        if kept is not None:  # resident beside the current one: it becomes the current one
            self.others.remove(kept)
            if self.current is not None:
                self.others.append(self.current)
            self.current = kept
        if self.current is not None and self.current.config.key == config.key:
            if self.current.alive():
                return self.current
            err = self.current._exited_error("while serving")
            self.stop()
            raise err
        if self.resident > 1 and self.current is not None:
            self.others.append(self.current)
            self.current = None
            while len(self.others) >= self.resident:
                self.others.pop(0).stop()
        self.stop_current()
        self._check_gpu_released()
        server = Server(config, engine=self.engine_for(config), log_dir=self.log_dir,
                        startup_timeout_s=self.startup_timeout_s(config), on_progress=self.on_progress,
                        progress_every_s=self.progress_every_s, cpus=self.cpus_for(config))
        self.starts += 1
        self.started_configs.append(config.key)
        try:
            server.launch()
        except ServerError:
            try:
                server.stop()
            except GpuMemoryNotReleased as g:
                self.gpu_blocked = g  # the next launch would only run out of memory: say why instead
            except ServerError:
                pass
            raise
        except BaseException:
            with contextlib.suppress(BaseException):
                server.stop()
            raise
        finally:  # the log is kept whatever ended the launch: ready, failed, or interrupted during a long load
            if server.log_path:
                self.logs[config.key] = str(server.log_path)
        self.current = server
        return server

    def cpus_for(self, config: ServerConfig) -> frozenset[int] | None:
        """Where ``config``'s server may run: its own CPUs (a stack-pair candidate's ``cpus=``, in its engine
        options) over every server's (``--perfgate-server-cpus``)."""
        own = str(dict(config.engine_options).get("cpus") or "")
        if not own:
            return self.cpus
        from perfgate.host.affinity import parse_cpus

        return parse_cpus(own)

    def _check_gpu_released(self) -> None:
        err, self.gpu_blocked = self.gpu_blocked, None
        if err is None:
            return
        from perfgate.host import gpu
        if gpu.holders(err.pids):
            self.gpu_blocked = err
            raise err

    def number(self, key: str) -> int:
        """The latest start number (1, 2, ...) of the config ``key``; 0 if it never started."""
        return max((i + 1 for i, k in enumerate(self.started_configs) if k == key), default=0)

    def running(self) -> list[Server]:
        """Every server running now: those kept beside the current one, then the current one."""
        return [*self.others, *([self.current] if self.current is not None else [])]

    def stop_current(self) -> None:
        """Tear down the current server, if any (those kept beside it go on)."""
        server, self.current = self.current, None
        if server is not None:
            server.stop()

    def stop(self) -> None:
        """Tear down every running server."""
        others, self.others = self.others, []
        try:
            self.stop_current()
        finally:
            for server in others:
                server.stop()

"""Server lifecycle: one subprocess in its own process group, a log file, readiness, teardown.

    with Server(config, engine=engine, log_dir=logs) as s:
        ... s.url ...

Start-up picks a free port (refusing one that already answers), starts the engine's command
in a new session with stdout+stderr appended to a per-config log file (every start of a config
writes its own section, after a ``# perfgate: ... starting`` header), and polls ``/health_generate``
against a deadline while checking that the process is alive: a dead process fails at once,
classified, with the log tail in the error. Progress and the classification of a start read only
that start's section (from :attr:`Server.log_offset`), never an earlier start's lines; ``ready`` is
said when the server answers ``/health_generate``, never from a log line. Teardown sends SIGTERM
to the whole group, then SIGKILL after the engine's grace period, waits until no process of the group is left and,
on GPU boxes, until NVML shows the GPU memory released. A reaper process kills the group if
the owning pytest dies without tearing down (SIGKILL, ``os._exit`` of pytest-timeout): see
:mod:`perfgate.host.procs`. :class:`perfgate.serving.manager.ServerManager` decides which server runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import requests

from perfgate.classify.phases import phase_of
from perfgate.engines import Engine
from perfgate.errors import (
    GpuMemoryNotReleased,
    PortInUse,
    ServerError,
    ServerExitedError,
    ServerStartTimeout,
)
from perfgate.host.affinity import cpus_text, launched_on
from perfgate.host.procs import free_port, group_pids, lost_port_race, port_answers, signal_group, start_reaper, tail
from perfgate.profiles.config import ServerConfig

ProgressFn = Callable[["Progress"], None]
#: how many ports a start tries when another process takes the port perfgate chose before the server binds it
PORT_ATTEMPTS = 3
#: start-up phases in the order a server goes through them; progress never steps back
PHASE_ORDER = ("launching", "weights", "kv-cache", "cuda-graph", "warmup", "ready")


@dataclass(frozen=True, kw_only=True)
class Progress:
    """What a starting server is doing (for a progress line during long loads)."""

    config: str
    phase: str  # "launching" | "weights" | "kv-cache" | "cuda-graph" | "warmup" | "ready" | ...
    elapsed_s: float
    line: str = ""
    log_path: str = ""


@dataclass
class Server:
    """One server process for one config (a context manager)."""

    config: ServerConfig
    engine: Engine
    log_dir: Path
    host: str = "127.0.0.1"
    port: int | None = None
    startup_timeout_s: float = 1200.0
    poll_interval_s: float = 0.5
    on_progress: ProgressFn | None = None
    progress_every_s: float = 15.0
    gpu_release_timeout_s: float = 120.0
    #: the CPUs the server and every process it starts may run on (``--perfgate-server-cpus``; None: any)
    cpus: frozenset[int] | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)
    log_path: Path | None = field(default=None, init=False)
    #: where this start's section of the (appended) log begins: its header, then the process's output
    log_offset: int = field(default=0, init=False)
    startup_s: float | None = field(default=None, init=False)
    pgid: int | None = field(default=None, init=False)
    _reaper: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _seen_pids: set[int] = field(default_factory=set, init=False)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> Server:
        try:
            self.launch()
        except BaseException:
            self.stop()
            raise
        return self

    def launch(self) -> None:
        """:meth:`start` and :meth:`wait_ready`; when the port was perfgate's choice and another process took it
        before the server bound it (the server exits saying the address is in use, or someone else answers
        there), the start is torn down and made again on another port, up to :data:`PORT_ATTEMPTS` ports, each
        said in the log. A port given by the user is never swapped."""
        chosen = self.port is None
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                self.start()
                self.wait_ready()
                return
            except (PortInUse, ServerExitedError) as e:
                lost = isinstance(e, PortInUse) or lost_port_race(self.own_log())
                if not (chosen and lost and attempt < PORT_ATTEMPTS):
                    raise
                self.stop()
                assert self.log_path is not None
                with open(self.log_path, "ab") as log:
                    log.write(f"# perfgate: {time.strftime('%Y-%m-%d %H:%M:%S')} port {self.port} was taken by "
                              f"another process before the server bound it; starting again on another port "
                              f"({attempt + 1} of {PORT_ATTEMPTS})\n".encode())
                self.port = None

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        """Launch the process (does not wait for readiness)."""
        if self.port is None:
            self.port = free_port(self.host)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.log_dir / f"{self.config.slug}.log"
        if port_answers(self.host, self.port):  # a chosen port can be taken between choice and launch, too
            msg = (f"port {self.host}:{self.port} already answers before the server for {self.config.name} was "
                   f"launched: another process listens there (see `ss -ltnp 'sport = :{self.port}'`); stop it, "
                   f"or let perfgate choose another port [config-error]")
            with open(self.log_path, "ab") as log:
                log.write(f"# perfgate: {time.strftime('%Y-%m-%d %H:%M:%S')} not launched: {msg}\n".encode())
            raise PortInUse(msg, log_path=self.log_path, log_tail=tail(self.log_path, 5), category="config-error")
        argv = self.engine.command(self.config, host=self.host, port=self.port)
        env = self.engine.environment(self.config, os.environ)
        with open(self.log_path, "ab") as log:
            self.log_offset = log.tell()  # an earlier start's lines lie before it
            header = (
                f"# perfgate: {time.strftime('%Y-%m-%d %H:%M:%S')} starting {self.config.engine} server "
                f"for {self.config.profile} {self.config.name}\n# command: {' '.join(argv)}\n"
                f"# env: {' '.join(f'{k}={v}' for k, v in self.config.env)}\n"
                + (f"# cpus: {cpus_text(self.cpus)}\n" if self.cpus else "")
            )
            log.write(header.encode())
            log.flush()
            self._t0 = time.monotonic()
            try:
                with launched_on(self.cpus):
                    self.proc = subprocess.Popen(
                        argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                        start_new_session=True,
                    )
            except OSError as e:
                raise ServerExitedError(f"cannot start {argv[0]}: {e}", log_path=self.log_path,
                                        category="missing-dependency") from e
        self.pgid = self.proc.pid  # start_new_session: the leader's pid is the group id
        self._seen_pids.add(self.proc.pid)
        with open(self.log_path, "ab") as log:  # lets anyone check afterwards that the group is gone
            log.write(f"# pgid: {self.pgid}\n".encode())
        self._reaper = start_reaper(self.pgid, self.engine.teardown_grace_s)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _exited_error(self, during: str) -> ServerExitedError:
        from perfgate.classify import classify

        assert self.proc is not None and self.log_path is not None
        rc = self.proc.returncode
        text = self.own_log()
        cls = classify(rc, text)
        cat = cls.category or "crash"
        what = f"server for {self.config.name} exited with code {rc} {during} [{cat}]"
        if cls.evidence:
            what += f": {cls.evidence.strip()[:300]}"
        return ServerExitedError(what, log_path=self.log_path, log_tail=tail(self.log_path), category=cat,
                                 returncode=rc)

    def own_log(self) -> str:
        """This start's section of the log (its header and the process's output), not an earlier start's."""
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def wait_ready(self) -> None:
        """Poll ``/health_generate`` until 200, the process dies, or the deadline passes.

        Progress comes from this start's own output (the log from :attr:`log_offset`; perfgate's ``# ``
        header lines skipped), its phases only forward; ``ready`` only once ``/health_generate`` answers
        200 from this server's group (the log's own ready line, if it came first, is said with it)."""
        assert self.proc is not None and self.log_path is not None
        deadline = self._t0 + self.startup_timeout_s
        phase, ready_line = "launching", ""
        self._progress(phase, "")
        last_report = time.monotonic()
        log_pos = self.log_offset
        sess = requests.Session()
        try:
            while True:
                now = time.monotonic()
                if self.proc.poll() is not None:
                    raise self._exited_error("during start-up")
                # progress from the log
                try:
                    with open(self.log_path, "rb") as f:
                        f.seek(log_pos)
                        chunk = f.read()
                    nl = chunk.rfind(b"\n")
                    if nl >= 0:
                        log_pos += nl + 1
                        for raw in chunk[: nl + 1].decode("utf-8", "replace").splitlines():
                            if raw.startswith("# "):  # perfgate's own header lines, not the server's
                                continue
                            ph = phase_of(raw)
                            if ph == "ready":  # said when the server answers, below
                                ready_line = ready_line or raw
                                continue
                            # a later line can match an earlier phase (max_total_num_tokens= after capture)
                            if ph in PHASE_ORDER and PHASE_ORDER.index(ph) > PHASE_ORDER.index(phase):
                                phase = ph
                                self._progress(phase, raw)
                                last_report = now
                except OSError:
                    pass
                if now - last_report >= self.progress_every_s:
                    self._progress(phase, "")
                    last_report = now
                try:
                    r = sess.get(f"{self.url}/health_generate", timeout=5)
                    if r.status_code == 200:
                        if not self._listens_on_port():
                            raise PortInUse(
                                f"port {self.host}:{self.port} answers /health_generate, but not from the server "
                                f"perfgate started for {self.config.name} (pgid {self.pgid}): another process took "
                                f"the port; stop it, or let perfgate choose another port [config-error]",
                                log_path=self.log_path, log_tail=tail(self.log_path), category="config-error")
                        self.startup_s = time.monotonic() - self._t0
                        self._progress("ready", ready_line)
                        return
                except requests.RequestException:
                    pass
                if time.monotonic() >= deadline:
                    raise ServerStartTimeout(
                        f"server for {self.config.name} not ready after {self.startup_timeout_s:.0f} s "
                        f"(last phase: {phase}) [startup-timeout]",
                        log_path=self.log_path, log_tail=tail(self.log_path), category="startup-timeout",
                    )
                time.sleep(self.poll_interval_s)
        finally:
            sess.close()

    def _listens_on_port(self) -> bool:
        """Whether a process of this server's group listens on the port (True when it cannot be told)."""
        import psutil

        if self.pgid is None:
            return True
        for pid in group_pids(self.pgid):
            try:
                proc = psutil.Process(pid)
                conns = proc.net_connections(kind="tcp") if hasattr(proc, "net_connections") else proc.connections()
            except psutil.Error:
                return True
            if any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == self.port for c in conns):
                return True
        return False

    def _progress(self, phase: str, line: str) -> None:
        if self.on_progress is not None:
            self.on_progress(Progress(config=self.config.name, phase=phase, elapsed_s=time.monotonic() - self._t0,
                                      line=line.strip(), log_path=str(self.log_path)))

    # ------------------------------------------------------------------ stop

    def stop(self) -> None:
        """Kill the whole process group, wait for it, then for the GPU memory it held."""
        if self.proc is None or self.pgid is None:
            return
        with contextlib.suppress(Exception):
            self._seen_pids.update(group_pids(self.pgid))
        grace = self.engine.teardown_grace_s
        signal_group(self.pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if self.proc.poll() is not None and not group_pids(self.pgid):
                break
            time.sleep(0.1)
        signal_group(self.pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while group_pids(self.pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if self._reaper is not None:
            with contextlib.suppress(Exception):
                self._reaper.kill()
                self._reaper.wait(timeout=5)
            self._reaper = None
        pgid, self.pgid = self.pgid, None
        left = group_pids(pgid)
        if left:
            raise ServerError(f"processes {left} of server group {pgid} survived SIGKILL", log_path=self.log_path)
        self._wait_gpu_release()

    def _wait_gpu_release(self) -> None:
        from perfgate.host import gpu
        if not gpu.available():
            return
        deadline = time.monotonic() + self.gpu_release_timeout_s
        while True:
            holders = gpu.holders(self._seen_pids)
            if not holders:
                return
            if time.monotonic() >= deadline:
                raise GpuMemoryNotReleased(
                    f"GPU memory still held {self.gpu_release_timeout_s:.0f} s after the server group was killed "
                    f"by PIDs {sorted(holders)}; kill them (kill -9 {' '.join(map(str, sorted(holders)))}) before "
                    f"the next run",
                    pids=sorted(holders), log_path=self.log_path,
                )
            time.sleep(1.0)

"""The measuring procedure: what perfgate sends a running server and in which order, outside pytest.

Given a server's URL and a resolved :class:`perfgate.profiles.Workload` (and, under load, the mode's
:class:`perfgate.profiles.slo.Slo`), it runs

- :func:`perfgate.procedure.closed.run_trials`: the closed-loop trials of one config (the prefix cache
  flushed, the warm-up, each trial on unseen prompts after its own flush), summarized into a
  :class:`perfgate.measuring.metrics.Measurement`;
- :func:`perfgate.procedure.closed.run_side_by_side`: the same trials on two co-resident servers, interleaved;
- :func:`perfgate.procedure.closed.run_sweep`: the concurrency sweep on the same server;
- :class:`perfgate.procedure.openloop.OpenLoop`: the trials of one open-loop rate (each on its own seeded
  schedule after a warm-up at that rate, the simulator at speed-up 1 while it runs), and one level judged with
  its top-ups; a goodput search (:func:`perfgate.measuring.goodput.search`) calls it;
- :mod:`perfgate.procedure.sglang_bench`: SGLang's own one-batch benchmark on the same server (its command line,
  its JSONL result read back) and its figures compared with perfgate's (``perf_crosscheck``'s record).

Nothing here knows pytest, the session or the server pool: the caller resolves the workload (the
precedence is :class:`perfgate.profiles.settings.Settings`'), starts the server and hands in what it needs,
and a callback where a failed request may mean the server died. The pytest layer (perfgate.plugin.runner,
perfgate.plugin.loadrun) and the benchmarks (benchmarks/after_load.py, benchmarks/goodput_level.py) call it.
"""

from perfgate.procedure.closed import Arm, TrialsRun, run_side_by_side, run_sweep, run_trials
from perfgate.procedure.openloop import PROMPT_BASE, OpenLoop, real_time, time_scale, warmed_offsets

__all__ = ["run_trials", "run_side_by_side", "Arm", "run_sweep", "TrialsRun", "OpenLoop", "PROMPT_BASE",
           "real_time", "time_scale", "warmed_offsets"]

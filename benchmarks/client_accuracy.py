"""How accurate is perfgate's client? Measure the simulated server, whose true token rate is known.

    python benchmarks/client_accuracy.py                 # concurrency 1, 8, 64; 256 new tokens
    python benchmarks/client_accuracy.py --levels 1,8 --max-new-tokens 128 --json out.json

Starts perfgate's simulated SGLang server for the seed box's baseline (the simulated profile
``baselines/sim-rtxpro6000-x8/kimi-k2.5.toml``) the way the suite does (:class:`perfgate.server.Server`),
then, per concurrency level c, sends max(4, 2c) streaming requests with perfgate's client
(:func:`perfgate.client.run_batch`) and prints:

- the true rate: 1000 / the decode step time the simulator's cost model gives for a batch of c
  (:meth:`perfgate.sim.behavior.LaunchPlan.decode_step_ms`), i.e. one request's steady-state decode tok/s;
- the measured decode tok/s per request (perfgate's metric: tokens after the first chunk over the
  time after the first chunk, averaged over requests) and the error against the true rate;
- the measured output tok/s (all completion tokens / wall time, prefill and ramp included) next to
  the true steady-state aggregate (c x the true rate);
- the client's CPU time per received token (``time.process_time`` of this process, which runs only
  the client; the simulator is a separate process).

Not a unit test: it takes about a minute and its figures depend on the machine (docs/measurement.md).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfgate.client import GenRequest, run_batch  # noqa: E402
from perfgate.engines import get_engine  # noqa: E402
from perfgate.profiles import load_profile  # noqa: E402
from perfgate.server import Server  # noqa: E402
from perfgate.sim.behavior import simulate_launch  # noqa: E402
from perfgate.workload import load_prompts  # noqa: E402

PROFILE = ROOT / "baselines" / "sim-rtxpro6000-x8" / "kimi-k2.5.toml"


@dataclass(frozen=True, kw_only=True)
class Row:
    """One concurrency level: true rates from the cost model, measured rates, client cost."""

    concurrency: int
    requests: int
    true_tok_s: float  # one request's steady-state decode tok/s at batch c
    true_aggregate_tok_s: float
    decode_tok_s: float  # measured, mean per request
    output_tok_s: float  # measured, all tokens / wall
    error_pct: float  # decode_tok_s vs true_tok_s
    cpu_us_per_token: float
    failures: int


def measure(url: str, c: int, prompts: list[tuple[int, ...]], max_new_tokens: int, true_tok_s: float) -> Row:
    n = max(4, 2 * c)
    reqs = [GenRequest(input_ids=prompts[i % len(prompts)], max_new_tokens=max_new_tokens) for i in range(n)]
    cpu0 = time.process_time()
    outs, wall = run_batch(url, reqs, concurrency=c, timeout_s=600)
    cpu = time.process_time() - cpu0
    ok = [o for o in outs if o.success]
    rates = [r for r in (o.decode_tok_s for o in ok) if r is not None]
    tokens = sum(o.completion_tokens for o in ok)
    decode = statistics.fmean(rates) if rates else float("nan")
    return Row(concurrency=c, requests=n, true_tok_s=true_tok_s, true_aggregate_tok_s=true_tok_s * c,
               decode_tok_s=decode, output_tok_s=tokens / wall if wall > 0 else float("nan"),
               error_pct=(decode - true_tok_s) / true_tok_s * 100, cpu_us_per_token=cpu / max(1, tokens) * 1e6,
               failures=len(outs) - len(ok))


def table(rows: list[Row]) -> str:
    head = ("| concurrency | requests | true decode tok/s per request (aggregate) | measured decode tok/s per request "
            "| measured output tok/s | error % | client CPU µs/token |")
    out = [head, "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r.concurrency} | {r.requests} | {r.true_tok_s:.2f} ({r.true_aggregate_tok_s:.0f}) "
                   f"| {r.decode_tok_s:.2f} | {r.output_tok_s:.1f} | {r.error_pct:+.2f} | {r.cpu_us_per_token:.0f} |"
                   + (f" {r.failures} failed" if r.failures else ""))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,8,64", help="concurrency levels (default 1,8,64)")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--json", default=None, metavar="PATH", help="also write the rows as JSON")
    a = ap.parse_args(argv)
    levels = [int(x) for x in a.levels.split(",") if x.strip()]

    prof = load_profile(PROFILE)
    config = prof.config(prof.baseline_mode())
    assert prof.engine.sim_hardware is not None
    plan = simulate_launch(prof.engine.sim_hardware, {"model-path": config.model_path, **config.flag_dict},
                           config.env_dict)
    prompts = load_prompts(prof.workload.prompts)
    rows = []
    with tempfile.TemporaryDirectory() as logs, \
            Server(config, engine=get_engine("sim"), log_dir=Path(logs), startup_timeout_s=120) as server:
        # one warm-up request, so the first level does not pay for the first connection
        run_batch(server.url, [GenRequest(input_ids=prompts[0], max_new_tokens=8)], concurrency=1)
        for c in levels:
            true = 1000.0 / plan.decode_step_ms(c)
            rows.append(measure(server.url, c, prompts, a.max_new_tokens, true))
            print(f"concurrency {c}: done", file=sys.stderr)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"perfgate client accuracy vs the simulated seed box ({PROFILE.relative_to(ROOT)}, mode "
          f"{config.mode}), {a.max_new_tokens} new tokens per request, 128-token prompts")
    print(f"{stamp}; {platform.node()}: {os.cpu_count()} CPU cores, {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}; client and simulator on the same machine")
    print()
    print(table(rows))
    if a.json:
        Path(a.json).write_text(json.dumps([asdict(r) for r in rows], indent=2))
    return 1 if any(r.failures for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

"""How accurate is perfgate's client? Measure the simulated server, whose true token rate is known.

    python benchmarks/client_accuracy.py                 # concurrency 1, 8, 64; 256 new tokens
    python benchmarks/client_accuracy.py --levels 1,8 --max-new-tokens 128 --json out.json

Starts perfgate's simulated SGLang server for the seed box's baseline (the simulated profile
``baselines/sim-rtxpro6000-x8/kimi-k2.5.toml``) the way the suite does (:class:`perfgate.serving.server.Server`),
then, per concurrency level c, sends max(4, 2c) streaming requests with perfgate's client
(:func:`perfgate.client.run_batch`) and prints, per level:

- the cost model's rate: 1000 / the decode step time the simulator's cost model gives for a batch of
  c (:meth:`perfgate.sim.behavior.LaunchPlan.decode_step_ms`), one request's steady-state decode tok/s;
- the server's own rate: each request's decode tok/s as the server reports it (``--enable-metrics``:
  ``meta_info.decode_throughput``, first token to last, on the server's clock), averaged, and its gap
  to the cost model (newcomers' prefill steps land inside running requests' decode windows: that gap
  is the workload, not the client);
- the client's rate (perfgate's metric: tokens after the first chunk over the time from the first to
  the last token-bearing chunk, averaged over requests) against the server's own rate request by
  request — the client's accuracy — and against the cost model;
- the last-token lag: when the client saw the last token minus the server's e2e latency, the median
  over requests (what the client adds to a request's end);
- the output tok/s (all completion tokens / wall time, prefill and ramp included);
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
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfgate.client import GenRequest, run_batch  # noqa: E402
from perfgate.engines import get_engine  # noqa: E402
from perfgate.measuring.workload import load_prompts  # noqa: E402
from perfgate.profiles.load import load_profile  # noqa: E402
from perfgate.serving.server import Server  # noqa: E402
from perfgate.sim.behavior import simulate_launch  # noqa: E402

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
    server_tok_s: float = float("nan")  # the server's own per-request decode rate (meta_info.decode_throughput)
    client_error_pct: float = float("nan")  # the client against the server's own rate, request by request
    model_gap_pct: float = float("nan")  # the server's rate against the cost model's steady state
    lag_ms: float = float("nan")  # median: client's arrival of the last token - the server's e2e latency


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
    # the server's own figures (--enable-metrics): its decode rate per request, and when it sent the last token
    pairs = [(o.decode_tok_s, float(o.meta_info["decode_throughput"])) for o in ok
             if o.decode_tok_s and o.meta_info.get("decode_throughput")]
    server = statistics.fmean(s for _, s in pairs) if pairs else float("nan")
    client_err = statistics.fmean((c_ - s) / s * 100 for c_, s in pairs) if pairs else float("nan")
    lags = [(o.last_token_s - float(o.meta_info["e2e_latency"])) * 1000 for o in ok
            if o.last_token_s is not None and o.meta_info.get("e2e_latency") is not None]
    return Row(concurrency=c, requests=n, true_tok_s=true_tok_s, true_aggregate_tok_s=true_tok_s * c,
               decode_tok_s=decode, output_tok_s=tokens / wall if wall > 0 else float("nan"),
               error_pct=(decode - true_tok_s) / true_tok_s * 100, cpu_us_per_token=cpu / max(1, tokens) * 1e6,
               failures=len(outs) - len(ok), server_tok_s=server, client_error_pct=client_err,
               model_gap_pct=(server - true_tok_s) / true_tok_s * 100,
               lag_ms=statistics.median(lags) if lags else float("nan"))


def table(rows: list[Row]) -> str:
    head = ("| concurrency | requests | cost model tok/s per request | server's own tok/s (model gap) "
            "| client tok/s | client vs server % | client vs model % | last-token lag ms | output tok/s "
            "| client CPU µs/token |")
    out = [head, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r.concurrency} | {r.requests} | {r.true_tok_s:.2f} "
                   f"| {r.server_tok_s:.2f} ({r.model_gap_pct:+.2f} %) | {r.decode_tok_s:.2f} "
                   f"| {r.client_error_pct:+.3f} | {r.error_pct:+.2f} | {r.lag_ms:.2f} "
                   f"| {r.output_tok_s:.1f} | {r.cpu_us_per_token:.0f} |"
                   + (f" {r.failures} failed" if r.failures else ""))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,8,64", help="concurrency levels (default 1,8,64)")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--json", default=None, metavar="PATH", help="also write the rows as JSON")
    ap.add_argument("--sim-speedup", type=float, default=1.0,
                    help="run the simulator this many times faster (the client adds its clock lead back; default 1)")
    a = ap.parse_args(argv)
    os.environ["PERFGATE_SIM_SPEEDUP"] = f"{a.sim_speedup:g}"  # read by the sim engine when it starts the server
    levels = [int(x) for x in a.levels.split(",") if x.strip()]

    prof = load_profile(PROFILE)
    config = prof.config(prof.baseline_mode())
    # the server reports its own per-request decode rate and latency, as SGLang does with --enable-metrics
    config = replace(config, flags=tuple(sorted({**config.flag_dict, "enable-metrics": True}.items())))
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
            true = 1000.0 / plan.decode_step_ms(c)  # simulated time: the client and server both scale back
            rows.append(measure(server.url, c, prompts, a.max_new_tokens, true))
            print(f"concurrency {c}: done", file=sys.stderr)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"perfgate client accuracy vs the simulated seed box ({PROFILE.relative_to(ROOT)}, mode "
          f"{config.mode}), {a.max_new_tokens} new tokens per request, 128-token prompts, "
          f"sim speedup {a.sim_speedup:g}")
    print(f"{stamp}; {platform.node()}: {os.cpu_count()} CPU cores, {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}; client and simulator on the same machine")
    print()
    print(table(rows))
    if a.json:
        Path(a.json).write_text(json.dumps([asdict(r) for r in rows], indent=2))
    return 1 if any(r.failures for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

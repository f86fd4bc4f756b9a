"""Where is the open-loop client's limit on this machine? Send Poisson arrivals at rising rates and measure
how late each request leaves against its schedule.

    python benchmarks/open_loop_lag.py                          # 16 .. 1024 req/s, 5 s each, 16 tokens
    python benchmarks/open_loop_lag.py --rates 50,100 --seconds 10 --json out.json

Starts perfgate's simulated SGLang server for the simulated H100 box (its decode step is 5 ms, so the server
keeps up at every rate) in real time (``--sim-speedup 1``: lags are wall-clock), then per rate sends
``rate x seconds`` requests on a seeded Poisson schedule with :func:`perfgate.client.run_open_loop` and
prints the send lag's median, p99 and maximum (ms), the rate achieved (requests over the send times' span),
failed requests, and the client's CPU time per request (``time.process_time`` of this process, which runs
only the client). A rate whose lag p99 exceeds the records' default bound (10 ms, or a tenth of the mean
gap) is where the client, not the server, decides the numbers: a goodput record there is inconclusive.

Not a unit test: it takes about a minute and its figures depend on the machine (docs/load.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfgate.client import GenRequest, Schedule, run_open_loop  # noqa: E402
from perfgate.measuring.goodput import Slo, max_lag_ms  # noqa: E402
from perfgate.measuring.metrics import percentile  # noqa: E402
from perfgate.serving.simprocess import H100_BOX, SimProcess  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="16,32,64,128,256,512,1024")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--json", default="")
    a = ap.parse_args(argv)
    rates = [float(x) for x in a.rates.split(",")]
    slo = Slo(bounds=())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        flags = ["--tp-size", "8", "--cuda-graph-max-bs-decode", "128", "--skip-tokenizer-init", "--sim-speedup", "1",
                 "--max-running-requests", "4096"]
        with SimProcess.start(flags, log_path=Path(tmp) / "sim.log", hardware=H100_BOX,
                              model_path="Qwen/Qwen3-235B-A22B-Instruct-2507-FP8") as sim:
            sim.wait_ready()
            url = f"http://127.0.0.1:{sim.port}"
            for k, rate in enumerate(rates):
                n = max(2, int(rate * a.seconds))
                offsets = Schedule(rate=rate, requests=n, arrival="poisson", seed=k).offsets()
                reqs = [GenRequest(input_ids=(1000 + i % 5000, 3 + i // 5000, 7, 9), max_new_tokens=a.max_new_tokens)
                        for i in range(n)]
                cpu0 = time.process_time()
                outs, wall = run_open_loop(url, reqs, offsets, timeout_s=60)
                cpu = time.process_time() - cpu0
                lags = [o.send_lag_s * 1000 for o in outs if o.send_lag_s is not None]
                sent = sorted(o.sent_s for o in outs if o.sent_s is not None)
                row = {"rate": rate, "requests": n, "lag_ms_p50": statistics.median(lags),
                       "lag_ms_p99": percentile(lags, 99), "lag_ms_max": max(lags),
                       "achieved_rps": (len(sent) - 1) / (sent[-1] - sent[0]),
                       "failed": sum(not o.success for o in outs),
                       "cpu_ms_per_request": 1000 * cpu / n, "bound_ms": max_lag_ms(slo, rate), "wall_s": wall}
                row["behind"] = row["lag_ms_p99"] > row["bound_ms"]
                rows.append(row)
                print(f"{rate:7g} req/s  n={n:5d}  lag p50 {row['lag_ms_p50']:7.2f}  p99 {row['lag_ms_p99']:8.2f}  "
                      f"max {row['lag_ms_max']:8.2f} ms  achieved {row['achieved_rps']:7.1f} req/s  "
                      f"failed {row['failed']}  client {row['cpu_ms_per_request']:.2f} ms CPU/request"
                      + ("  BEHIND" if row["behind"] else ""), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps({"cpus": os.cpu_count(), "seconds": a.seconds,
                                            "max_new_tokens": a.max_new_tokens, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

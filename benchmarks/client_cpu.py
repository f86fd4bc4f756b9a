"""perfgate's client against SGLang's own `bench_serving` client: CPU per streamed token, same server.

    PYTHONPATH=.sglang-parsers/sglang-0.5.17 python benchmarks/client_cpu.py        # levels 1, 8, 64; 3 runs
    python benchmarks/client_cpu.py --levels 1,8 --runs 5 --output-len 128 --sglang-path DIR --json out.json

Both clients stream the same workload (128-token prompts as token ids, ``--output-len`` tokens each, N =
max(16, 2c) requests, at most c in flight) from one simulated SGLang server (the seed box's baseline at real
time; it detokenizes, since SGLang's client counts the ``text`` of each chunk). Each measurement is one
subprocess running one client, which

1. imports its client: perfgate's :func:`perfgate.client.run_batch`, or SGLang 0.5.17's
   ``sglang.benchmark.serving.async_request_sglang_generate`` driven the way its ``benchmark()`` drives it
   (one task per request, an ``asyncio.Semaphore(c)``, ``asyncio.run``);
2. makes the same warm-up with it (one streamed request of 8 tokens);
3. measures ``time.process_time()`` (its own CPU, every thread) around the N measured requests only,
   and reports that CPU and the tokens received.

So imports, the interpreter's start and the warm-up are outside both figures (SGLang's client spends 6-7 s
of CPU importing, which varies by up to a second between runs: the previous method, a 256-token run's
whole-process CPU minus a 1-token run's, let that noise into the figure). The runs are interleaved
(run 1 of every level and client, then run 2, ...; the order of the two clients alternates) and each cell
prints its median and range. Not a unit test: its figures depend on the machine (docs/measurement.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfgate.serving.simprocess import SimProcess  # noqa: E402

FLAGS = ["--tp-size", "8", "--cuda-graph-max-bs-decode", "128", "--random-seed", "7"]
WARMUP_TOKENS = 8

# argv: url n c out_len warmup_tokens; prints {"cpu_s", "tokens", "failed", "wall_s"} of the measured requests only
_COMMON = """
import json, sys, time
url, n, c, out_len, warm_len = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
prompts = [list(range(1000 + i * 200, 1128 + i * 200)) for i in range(n)]
warm = list(range(500, 628))
"""

PERFGATE_CLIENT = _COMMON + """
from perfgate.client import GenRequest, run_batch
run_batch(url, [GenRequest(input_ids=tuple(warm), max_new_tokens=warm_len)], concurrency=1, timeout_s=600)
reqs = [GenRequest(input_ids=tuple(p), max_new_tokens=out_len) for p in prompts]
cpu0, t0 = time.process_time(), time.perf_counter()
outs, _ = run_batch(url, reqs, concurrency=c, timeout_s=600)
cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
print(json.dumps({"cpu_s": cpu, "wall_s": wall, "tokens": sum(o.completion_tokens for o in outs if o.success),
                  "failed": sum(not o.success for o in outs)}))
"""

# SGLang 0.5.17's bench_serving request function for --backend sglang, with the globals its CLI would set
# (its defaults: greedy, ignore_eos, streaming, no logprobs), driven as its benchmark() drives it
SGLANG_CLIENT = _COMMON + """
import argparse, asyncio, warnings
warnings.simplefilter("ignore")
from sglang.benchmark import serving as bs
bs.set_global_args(argparse.Namespace(
    temperature=0.0, disable_ignore_eos=False, top_p=1.0, disable_stream=False, return_logprob=False,
    return_routed_experts=False, logprob_start_len=-1, top_logprobs_num=0, token_ids_logprob=None, header=None,
    cache_report=False))
api = url + "/generate"
def inp(p, k):
    return bs.RequestFuncInput(prompt=p, api_url=api, prompt_len=len(p), output_len=k, model="", lora_name=None,
                               image_data=None, extra_request_body={})
async def batch(ps, k, limit):
    sem = asyncio.Semaphore(limit)
    async def one(p):
        async with sem:
            return await bs.async_request_sglang_generate(request_func_input=inp(p, k), pbar=None)
    return await asyncio.gather(*[asyncio.create_task(one(p)) for p in ps])
asyncio.run(batch([warm], warm_len, 1))
cpu0, t0 = time.process_time(), time.perf_counter()
outs = asyncio.run(batch(prompts, out_len, c))
cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
print(json.dumps({"cpu_s": cpu, "wall_s": wall, "tokens": sum(o.output_len for o in outs if o.success),
                  "failed": sum(not o.success for o in outs)}))
"""

CLIENTS = {"perfgate": PERFGATE_CLIENT, "sglang": SGLANG_CLIENT}


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One client at one level: µs of its CPU per token, one value per run."""

    client: str
    concurrency: int
    us_per_token: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.us_per_token)


def measure(client: str, url: str, n: int, c: int, out_len: int, env: dict[str, str]) -> float:
    """One subprocess, one client: µs of its own CPU per token over the measured requests."""
    argv = [sys.executable, "-c", CLIENTS[client], url, str(n), str(c), str(out_len), str(WARMUP_TOKENS)]
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"the {client} client failed ({r.returncode}):\n{r.stderr[-3000:]}")
    got = json.loads(r.stdout.strip().splitlines()[-1])
    if got["failed"] or not got["tokens"]:
        raise SystemExit(f"the {client} client: {got['failed']} request(s) failed, {got['tokens']} tokens")
    return float(got["cpu_s"]) / int(got["tokens"]) * 1e6


def table(cells: dict[tuple[str, int], Cell], levels: list[int]) -> str:
    out = ["| streams | perfgate µs/token, median (range) | SGLang bench_serving µs/token, median (range) "
           "| perfgate / SGLang, median (range over runs) |", "|---:|---:|---:|---:|"]
    for c in levels:
        p, s = cells[("perfgate", c)], cells[("sglang", c)]
        ratios = [a / b for a, b in zip(p.us_per_token, s.us_per_token)]
        out.append(f"| {c} | {p.median:.0f} ({min(p.us_per_token):.0f}-{max(p.us_per_token):.0f}) "
                   f"| {s.median:.0f} ({min(s.us_per_token):.0f}-{max(s.us_per_token):.0f}) "
                   f"| {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,8,64")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--sglang-path", default=os.environ.get("PERFGATE_SGLANG_PARSERS", "") and
                    str(Path(os.environ["PERFGATE_SGLANG_PARSERS"]) / "sglang-0.5.17"),
                    help="a folder holding SGLang's Python package (default: what PYTHONPATH gives)")
    ap.add_argument("--json", default=None, metavar="PATH")
    a = ap.parse_args(argv)
    levels = [int(x) for x in a.levels.split(",") if x.strip()]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (a.sglang_path, str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONWARNINGS"] = "ignore"
    values: dict[tuple[str, int], list[float]] = {(name, c): [] for name in CLIENTS for c in levels}
    with tempfile.TemporaryDirectory() as tmp, SimProcess.start(FLAGS, log_path=Path(tmp) / "sim.log") as sim:
        sim.wait_ready()
        url = f"http://127.0.0.1:{sim.port}"
        for run in range(a.runs):  # interleaved: every level and client once per run
            for c in levels:
                order = list(CLIENTS) if run % 2 == 0 else list(reversed(CLIENTS))
                for name in order:
                    values[(name, c)].append(measure(name, url, max(16, 2 * c), c, a.output_len, env))
                print(f"run {run + 1}, {c} streams: " + ", ".join(
                    f"{name} {values[(name, c)][-1]:.0f} µs/token" for name in CLIENTS), file=sys.stderr)
    cells = {k: Cell(client=k[0], concurrency=k[1], us_per_token=tuple(v)) for k, v in values.items()}
    print(f"CPU per streamed token, each client in its own process over the measured requests only; {a.runs} "
          f"interleaved runs; {a.output_len} tokens per request, N = max(16, 2c); {platform.node()}: "
          f"{os.cpu_count()} CPU cores, Python {platform.python_version()}; client and simulator on one machine")
    print()
    print(table(cells, levels))
    if a.json:
        Path(a.json).write_text(json.dumps([asdict(c) for c in cells.values()], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

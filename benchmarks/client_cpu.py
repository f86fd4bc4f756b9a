"""perfgate's client against SGLang's own `bench_serving` client: CPU per streamed token, same server.

    PYTHONPATH=.sglang-parsers/sglang-0.5.17 python benchmarks/client_cpu.py        # levels 1, 8, 64
    python benchmarks/client_cpu.py --levels 1,8 --output-len 128 --sglang-path DIR --json out.json

Both clients stream the same workload (128-token random-id prompts, ``--output-len`` tokens each,
N = max(16, 2c) requests, ``--max-concurrency c``) from one simulated SGLang server (the seed box's
baseline, with a tokenizer: SGLang's client counts text). Each runs in its own subprocess twice: the
workload, and the same N requests for one token each. The difference of their CPU
(``getrusage(RUSAGE_CHILDREN)``) over the difference of their tokens is the client's CPU per token of
the streaming phase: start-up (imports, connections, the dataset) and per-request costs cancel.
SGLang's client is ``python -m sglang.benchmark.serving --backend sglang --dataset-name random-ids``
(its installed client-side imports suffice: no GPU). Not a unit test: its figures depend on the machine
(docs/measurement.md).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfgate.crosscheck import make_tokenizer  # noqa: E402
from perfgate.sim.testing import SimProcess  # noqa: E402

FLAGS = ["--tp-size", "8", "--cuda-graph-max-bs-decode", "128", "--random-seed", "7"]

PERFGATE_CLIENT = """
import json, sys
from perfgate.client import GenRequest, run_batch
url, n, c, out_len = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
reqs = [GenRequest(input_ids=tuple(range(1000 + i * 200, 1128 + i * 200)), max_new_tokens=out_len) for i in range(n)]
outs, wall = run_batch(url, reqs, concurrency=c, timeout_s=600)
print(json.dumps({"tokens": sum(o.completion_tokens for o in outs if o.success),
                  "failed": sum(not o.success for o in outs)}))
"""


@dataclass(frozen=True)
class Row:
    concurrency: int
    perfgate_us_per_token: float
    sglang_us_per_token: float

    @property
    def ratio(self) -> float:
        return self.perfgate_us_per_token / self.sglang_us_per_token


def _child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    cpu0 = _child_cpu()
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"{argv[:4]}... failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return _child_cpu() - cpu0, r.stdout


def perfgate_run(url: str, n: int, c: int, out_len: int, env: dict[str, str]) -> tuple[float, int]:
    cpu, out = _run([sys.executable, "-c", PERFGATE_CLIENT, url, str(n), str(c), str(out_len)], env)
    got = json.loads(out.strip().splitlines()[-1])
    if got["failed"]:
        raise SystemExit(f"perfgate client: {got['failed']} request(s) failed")
    return cpu, int(got["tokens"])


def sglang_run(url: str, n: int, c: int, out_len: int, tokenizer: Path, env: dict[str, str],
               work: Path) -> tuple[float, int]:
    result = work / f"sglang-{c}-{n}.jsonl"
    argv = [sys.executable, "-m", "sglang.benchmark.serving", "--backend", "sglang", "--base-url", url,
            "--dataset-name", "random-ids", "--tokenizer", str(tokenizer), "--random-input-len", "128",
            "--random-output-len", str(out_len), "--random-range-ratio", "1", "--num-prompts", str(n),
            "--max-concurrency", str(c), "--request-rate", "inf", "--disable-tqdm", "--output-file", str(result)]
    cpu, _ = _run(argv, env)
    line = result.read_text().strip().splitlines()[-1]
    stats = json.loads(line)
    return cpu, int(stats["total_output_tokens"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,8,64")
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--sglang-path", default=os.environ.get("PERFGATE_SGLANG_PARSERS", "") and
                    str(Path(os.environ["PERFGATE_SGLANG_PARSERS"]) / "sglang-0.5.17"),
                    help="a folder holding SGLang's Python package (default: what PYTHONPATH gives)")
    ap.add_argument("--json", default=None, metavar="PATH")
    a = ap.parse_args(argv)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (a.sglang_path, str(ROOT), env.get("PYTHONPATH", "")) if p)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tokenizer = make_tokenizer(sys.executable, "moonshotai/Kimi-K2.5", work)
        with SimProcess.start(FLAGS, log_path=work / "sim.log") as sim:
            sim.wait_ready()
            url = f"http://127.0.0.1:{sim.port}"
            runs = {"perfgate": lambda n, c, t: perfgate_run(url, n, c, t, env),
                    "sglang": lambda n, c, t: sglang_run(url, n, c, t, tokenizer, env, work)}
            for c in (int(x) for x in a.levels.split(",")):
                per = {}
                n = max(16, 2 * c)
                for name, run in runs.items():
                    cpu, tokens = run(n, c, a.output_len)
                    cpu1, tokens1 = run(n, c, 1)
                    per[name] = (cpu - cpu1) / max(1, tokens - tokens1) * 1e6
                rows.append(Row(c, per["perfgate"], per["sglang"]))
                print(f"concurrency {c}: done", file=sys.stderr)
    print("| concurrency | perfgate client CPU µs/token | SGLang bench_serving CPU µs/token | perfgate / SGLang |")
    print("|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r.concurrency} | {r.perfgate_us_per_token:.0f} | {r.sglang_us_per_token:.0f} | {r.ratio:.2f}x |")
    if a.json:
        Path(a.json).write_text(json.dumps([{**asdict(r), "ratio": r.ratio} for r in rows], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

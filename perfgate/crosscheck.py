"""Cross-check perfgate's numbers with SGLang's own benchmark, on the very server perfgate measured.

``python -m sglang.bench_one_batch_server --model None --base-url URL --batch-size 1 --input-len I
--output-len O --dataset-name random-ids`` runs against the live server, and its JSONL result is read
back (never parsed from stdout). The two tools count differently: SGLang's ``output_throughput`` is
``output_len / (latency - ttft)`` (every token, including the first, over the time after the first),
perfgate's ``tok_s`` is ``(completion_tokens - first_chunk_tokens) / (latency - ttft)``; so SGLang's
figure is expected higher by a factor ``O / (O - 1)`` (0.4 % at 256 tokens). The comparison is made
after that correction.

SGLang's benchmark needs a tokenizer; dummy-weight runs ship only ``config.json``, so a word-level
tokenizer with the model's vocabulary size (``t0`` … ``tN``) is written to a temporary folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

MAKE_TOKENIZER = r"""
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
out, vocab = sys.argv[1], int(sys.argv[2])
tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t0"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0").save_pretrained(out)
print(out)
"""


@dataclass(frozen=True, kw_only=True)
class BenchResult:
    """What SGLang's bench_one_batch_server reported (from its JSONL result file)."""

    output_throughput: float
    latency_s: float
    last_ttft_s: float
    acc_length: float | None
    output_len: int
    raw: dict[str, object]

    @property
    def comparable_tok_s(self) -> float:
        """SGLang's figure on perfgate's definition (tokens after the first)."""
        return self.output_throughput * (self.output_len - 1) / self.output_len


def sglang_bench_problem(python: str) -> str | None:
    """None if ``sglang.bench_one_batch_server`` imports in ``python``, else the error's last line."""
    try:
        r = subprocess.run([python, "-c", "import sglang.bench_one_batch_server"], capture_output=True, text=True,
                           timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{type(e).__name__}: {e}"
    if r.returncode == 0:
        return None
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit code {r.returncode}"


def make_tokenizer(python: str, model_path: str, workdir: Path) -> Path:
    """The model's own tokenizer if it has one, else a word-level stand-in of its vocabulary size."""
    mp = Path(model_path)
    if any((mp / f).exists() for f in ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")):
        return mp
    vocab = int(json.loads((mp / "config.json").read_text()).get("vocab_size", 32000))
    out = workdir / f"tokenizer-{vocab}"
    if not (out / "tokenizer.json").exists():
        subprocess.run([python, "-c", MAKE_TOKENIZER, str(out), str(vocab)], check=True, capture_output=True,
                       timeout=300)
    return out


def run_bench(*, python: str, url: str, tokenizer: Path, input_len: int, output_len: int, log_path: Path,
              timeout_s: float = 600) -> BenchResult:
    """Run SGLang's one-batch benchmark (batch 1) against ``url`` and read its JSONL result."""
    with tempfile.TemporaryDirectory(prefix="perfgate-bench-") as tmp:
        result = Path(tmp) / "result.jsonl"
        argv = [python, "-m", "sglang.bench_one_batch_server", "--model", "None", "--base-url", url,
                "--batch-size", "1", "--input-len", str(input_len), "--output-len", str(output_len),
                "--dataset-name", "random-ids", "--local-tokenizer-path", str(tokenizer),
                "--result-filename", str(result)]  # (0.5.17 has no --skip-token-capacity-check)
        with open(log_path, "ab") as log:
            log.write(f"# perfgate crosscheck: {' '.join(argv)}\n".encode())
            log.flush()
            proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s,
                                  env={**os.environ, "PYTHONUNBUFFERED": "1"})
        if proc.returncode != 0 or not result.exists():
            raise RuntimeError(f"sglang.bench_one_batch_server exited {proc.returncode}; see {log_path}")
        rows = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
    row = rows[-1]
    acc = row.get("acc_length")
    return BenchResult(
        output_throughput=float(row["output_throughput"]),
        latency_s=float(row["latency"]),
        last_ttft_s=float(row["last_ttft"]),
        acc_length=float(acc) if acc is not None and float(acc) > 0 else None,
        output_len=int(row.get("output_len", output_len)),
        raw=row,
    )


if __name__ == "__main__":  # pragma: no cover - manual use
    print(sglang_bench_problem(sys.executable) or "importable")

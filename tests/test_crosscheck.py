"""The cross-check plumbing against SGLang's real bench_one_batch_server (0.5.17), on the simulated server.

On the GPU box the cross-check runs against real SGLang; here SGLang's benchmark client (the real one,
from the 0.5.17 wheel that `ci/install-sglang-parsers.sh` unpacks, plus its client-side imports that
.ci/run installs) measures perfgate's simulated server, so the command line, the stand-in tokenizer,
the JSONL result and the token-count correction are exercised without a GPU. Skipped where those are
not installed.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from perfgate import crosscheck as cc
from perfgate.client import GenRequest, run_batch
from perfgate.sim.testing import SimProcess

PARSERS = os.environ.get("PERFGATE_SGLANG_PARSERS")
SGL = Path(PARSERS) / "sglang-0.5.17" if PARSERS else None


def _bench_env() -> dict[str, str]:
    assert SGL is not None
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SGL), os.environ.get("PYTHONPATH")]))}


def _importable() -> str | None:
    if SGL is None:
        return "set PERFGATE_SGLANG_PARSERS=DIR after `ci/install-sglang-parsers.sh DIR` (.ci/run does)"
    r = subprocess.run([sys.executable, "-c", "import sglang.bench_one_batch_server"], env=_bench_env(),
                       capture_output=True, text=True, timeout=300)
    if r.returncode:
        return "SGLang's benchmark does not import here: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    return None


def test_word_level_stand_in_tokenizer_has_the_vocabulary(tmp_path):
    pytest.importorskip("transformers")
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"vocab_size": 1000}))
    tok = cc.make_tokenizer(sys.executable, str(model), tmp_path)
    from transformers import AutoTokenizer

    t = AutoTokenizer.from_pretrained(str(tok))
    assert t.vocab_size == 1000 and t.decode([5, 7]) == "t5 t7"


def test_sglang_bench_agrees_with_perfgate_on_the_simulated_server(tmp_path, monkeypatch):
    why = _importable()
    if why:
        pytest.skip(why)
    for k, v in _bench_env().items():
        monkeypatch.setenv(k, v)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"vocab_size": 163840}))
    sim = SimProcess.start(["--tp-size", "8", "--cuda-graph-max-bs-decode", "128", "--skip-tokenizer-init"],
                           log_path=tmp_path / "sim.log")
    url = f"http://127.0.0.1:{sim.port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(url + "/health_generate", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.2)
        tok = cc.make_tokenizer(sys.executable, str(model), tmp_path)
        outs, _ = run_batch(url, [GenRequest(input_ids=tuple(range(1000, 1128)), max_new_tokens=128)] * 2)
        ours = sorted(o.decode_tok_s for o in outs)[-1]
        bench = cc.run_bench(python=sys.executable, url=url, tokenizer=tok, input_len=128, output_len=128,
                             log_path=tmp_path / "bench.log")
    finally:
        sim.proc.kill()
        sim.proc.wait()
    assert bench.output_len == 128 and bench.output_throughput > 0
    assert bench.comparable_tok_s == pytest.approx(bench.output_throughput * 127 / 128)
    # both clients measure the same simulated server (true rate 89.5 tok/s); loose, it is a shared 2-core box
    assert 0.9 < ours / bench.comparable_tok_s < 1.1, (ours, bench.raw)

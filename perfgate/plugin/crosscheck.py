"""``perf_crosscheck``: the pytest adapter of SGLang's own benchmark (:mod:`perfgate.procedure.sglang_bench`).

It measures the mode's workload as ``perf_check``'s records are, runs SGLang's ``bench_one_batch_server`` on the
same live server, records the figures and concludes the test on the comparison's verdict; what runs, what is
parsed and how the two are compared is :mod:`perfgate.procedure.sglang_bench`, pytest-free.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from perfgate.procedure.sglang_bench import (
    agreement,
    agreement_properties,
    bench_properties,
    make_tokenizer,
    run_bench,
    sglang_bench_module,
)

if TYPE_CHECKING:
    from perfgate.plugin.api import PerfServer
    from perfgate.plugin.runner import PerfRun

__all__ = ["Crosscheck"]


class Crosscheck:
    """``perf_crosscheck(server)``: conclude this test's record on SGLang's own benchmark against perfgate's, on
    the same live server.

    First whether SGLang's one-batch benchmark imports in the engine's interpreter (``[engine] python``): not
    importable, the test skips saying why, before anything is measured or started. Then the mode's workload
    measured as ``perf_check``'s records are (the session's measurement of the config, recorded on the test), then
    ``bench_one_batch_server`` against the server's URL, once per trial (``--batch-size 1 1 1 ...``), with the
    workload's input and output lengths; its JSONL result is read back. Recorded: ``sglang_bench_*``,
    ``vs_sglang_bench`` and, where both sides report an acceptance length, the per-cycle figures; the verdict is
    :attr:`perfgate.procedure.sglang_bench.Agreement.outcome` (pass within 1 %, inconclusive while the CI reaches
    it, else ``measurement-mismatch``). Ends the test: call it last.
    """

    def __init__(self, perf: PerfRun) -> None:
        self._perf = perf

    def __call__(self, server: PerfServer) -> None:
        from perfgate.measuring.workload import load_prompts
        from perfgate.plugin.api import PerfServer

        if not isinstance(server, PerfServer):
            raise TypeError(f"perf_crosscheck(): expected the test's perf_server, got {type(server).__name__}; "
                            f"call perf_crosscheck(perf_server)")
        perf, case = self._perf, server.case
        st = perf.state
        p = st.profile
        py = p.engine.python or sys.executable
        module, problem = sglang_bench_module(py)
        if module is None:
            import pytest

            pytest.skip(f"SGLang's one-batch benchmark does not import in {py}: {problem}")
        m = perf.measure(case)
        w = st.settings.workload(p.workload_for(case.mode))  # --perfgate-trials too (perfgate.profiles.settings)
        input_len = len(load_prompts(w.prompts)[0])
        tok = make_tokenizer(py, p.model.path, st.log_dir)
        log = Path(st.log_dir) / f"{server.config.slug}.sglang-bench.log"
        bench = run_bench(python=py, url=server.url, tokenizer=tok, input_len=input_len,
                          output_len=w.max_new_tokens, log_path=log, repeats=w.trials, module=module)
        for k, val in bench_properties(module, bench, log).items():
            perf.record(k, val)
        assert m.tok_s is not None
        ag = agreement([(t.tok_s, t.accept_len) for t in m.trials if t.tok_s is not None], bench,
                       tok_s=m.tok_s.median, accept_len=m.accept_len)
        for k, val in agreement_properties(ag).items():
            perf.record(k, val)
        perf.conclude(case, ag.verdict(log))

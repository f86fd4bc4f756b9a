"""What a run exercised, from NCCL's and SGLang's own log lines (perfgate.serving.evidence).

The fixtures are real server logs from perfgate's tp-2 run on 2x H200 (SGLang 0.5.17, NCCL 2.28,
``NCCL_DEBUG=INFO``, ``NCCL_DEBUG_SUBSYS=INIT,ENV,COLL``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from perfgate.serving.evidence import TINY_BYTES, not_exercised, parse_evidence, read_evidence, summarize

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"


def test_custom_all_reduce_leaves_nccl_only_the_logits_all_gather() -> None:
    # NCCL settings with SGLang's custom all-reduce on: NCCL reads them, but carries no all-reduce
    ev = read_evidence(LOGS / "sglang-0.5.17-h200x2-tp2-nccl-env-custom-ar.log")
    assert ev.coll_logging and ev.device == "0"
    assert ev.nccl_allreduces == 0
    assert ev.count("AllReduce") == 1  # one 4-byte barrier
    assert ev.count("AllGather") == 18  # vocab-parallel logits
    assert ("NCCL_MAX_NCHANNELS", "2") in ev.env and ("NCCL_MIN_NCHANNELS", "1") in ev.env
    why = not_exercised("nccl", ev)
    assert why is not None and "NCCL carried no all-reduce" in why
    assert summarize(ev)["nccl_allreduce_calls"] == 0


def test_custom_all_reduce_off_puts_every_all_reduce_on_nccl() -> None:
    ev = read_evidence(LOGS / "sglang-0.5.17-h200x2-tp2-custom-ar-off-nccl.log")
    sizes = {b for (op, b) in ev.calls if op == "AllReduce"}
    # decode at batch 1, 2, 4 (4096 bf16 per token) and a 128-token prefill, each on NCCL
    assert {8 << 10, 16 << 10, 32 << 10, 1 << 20} <= sizes
    assert ev.nccl_allreduces > 0
    assert not_exercised("nccl", ev) is None
    exercised = summarize(ev)["exercised"]
    assert isinstance(exercised, str) and exercised.startswith("NCCL carried all-reduces (")


def test_forced_tree_names_the_collective_it_cannot_run() -> None:
    # NCCL_ALGO=Tree applies to every collective; all-gather has no Tree algorithm
    ev = read_evidence(LOGS / "sglang-0.5.17-h200x2-tp2-nccl-tree-allgather.log")
    assert ("NCCL_ALGO", "Tree") in ev.env
    assert "no algorithm/protocol available for function AllGather" in ev.warning
    warning = summarize(ev)["nccl_warning"]
    assert isinstance(warning, str) and "NCCL_ALGO was set to Tree" in warning


def test_sglang_says_which_backend_is_in_service() -> None:
    ev = read_evidence(LOGS / "sglang-0.5.17-h200x2-tp2-flashinfer-ar-fusion.log")
    assert ev.backends == ("flashinfer_ar_fusion (trtllm)",)
    assert "flashinfer_ar_fusion (trtllm) in service" in ev.describe()
    assert not_exercised("flashinfer_ar_fusion", ev) is None  # absence of a line is never proof


def test_no_nccl_lines_means_unknown_never_not_exercised() -> None:
    ev = read_evidence(LOGS / "sglang-0.5.17-h200-baseline-start.log")
    assert not ev.nccl_logging and not ev.coll_logging
    assert not_exercised("nccl", ev) is None
    assert "unknown" in ev.describe() and "NCCL_DEBUG=INFO" in ev.describe()
    assert read_evidence(LOGS / "no-such-file.log") == parse_evidence("")


def test_env_values_lose_nccl_s_trailing_period() -> None:
    ev = parse_evidence("h:1:1 [0] NCCL INFO NCCL_BUFFSIZE set by environment to 1048576.\n"
                        "h:1:1 [0] NCCL INFO NCCL_ALGO set by environment to allreduce:tree\n")
    assert ev.env == (("NCCL_ALGO", "allreduce:tree"), ("NCCL_BUFFSIZE", "1048576"))


_OPS = st.sampled_from(["AllReduce", "AllGather", "ReduceScatter", "Broadcast"])
_DTYPES = st.sampled_from([(7, 4), (9, 2), (6, 2), (0, 1)])  # (ncclDataType_t, bytes): fp32, bf16, fp16, int8


@given(calls=st.lists(st.tuples(st.sampled_from(["0", "1"]), _OPS, st.integers(1, 1 << 20), _DTYPES), max_size=60),
       noise=st.lists(st.text(max_size=40), max_size=10))
def test_counts_are_the_lines_of_the_first_device(calls, noise) -> None:
    lines = [f"vm:1:1 [{dev}] NCCL INFO {op}: opCount {i:x} sendbuff 0x1 recvbuff 0x2 count {n} datatype {dt} op 0 "
             f"root 0 comm 0x3 [nranks=2] stream 0x4" for i, (dev, op, n, (dt, _)) in enumerate(calls)]
    ev = parse_evidence("\n".join([*noise, *lines]))
    devs = sorted({d for d, *_ in calls}, key=int)
    want = Counter((op, n * size) for d, op, n, (_, size) in calls if devs and d == devs[0])
    assert ev.calls == want
    assert ev.nccl_allreduces == sum(c for (op, b), c in want.items() if op == "AllReduce" and b > TINY_BYTES)
    assert ev.coll_logging == bool(calls)

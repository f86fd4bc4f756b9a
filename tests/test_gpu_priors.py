"""Each GPU kind judged on its own priors (perfgate.profiles.noise.GPU_PRIORS): an H100's decode starts moved five
times what the H200's did, and judged on the H200's priors identical arms on its noise were called regressed in 2.5 %
of paired runs (benchmarks/sequential_power.py --gpu H200 on the H100's run; docs/gate.md "Each GPU its own priors").
A GPU of no measured kind takes the widest of all; every kind's prior is at least what its own runs measured."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfgate.profiles import Floor
from perfgate.profiles.noise import (
    GPU_PRIORS,
    PRIORS,
    REAL_MEASURED_ON,
    MetricClass,
    gpu_kind,
    limit_tolerance,
    metric_class,
    prior_cv,
)

H100_RUN = Path(__file__).parents[1] / "evidence/h100-x1/upgrade-bisect-2026-12-05/paired-baseline/junit.xml"
METRIC_OF = {MetricClass.THROUGHPUT: "tok_s", MetricClass.OUTPUT: "output_tok_s", MetricClass.STEP: "itl_ms",
             MetricClass.FIRST_TOKEN: "ttft_ms", MetricClass.TTFT_LEG: "ttft_part.prefill_ms",
             MetricClass.PREFILL_GPU: "ttft_part.prefill_gpu_ms",
             MetricClass.TAIL: "itl_ms_p99", MetricClass.GOODPUT: "goodput_rps", MetricClass.ACCEPTANCE: "accept_len"}
LEVELS = ("starts", "side-by-side", "machines")


@pytest.mark.parametrize(("name", "kind"), [
    ("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA H100 NVL", "H100"), ("H100-SXM5-80GB", "H100"), ("H100", "H100"),
    ("NVIDIA H200", "H200"), ("nvidia h200", "H200"),
    ("NVIDIA GH200 480GB", None), ("NVIDIA A100-SXM4-80GB", None), ("NVIDIA B200", None), ("unknown", None), ("", None),
    (None, None),
])
def test_a_gpu_name_names_its_kind_as_a_word(name: str | None, kind: str | None) -> None:
    assert gpu_kind(name) == kind


def test_each_kind_takes_its_own_priors_and_the_real_column_where_it_has_none() -> None:
    h100, h200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
    assert REAL_MEASURED_ON == ("H200",)
    assert prior_cv("tok_s", "starts", gpu=h200) == PRIORS[MetricClass.THROUGHPUT][("starts", "real")] == 0.001
    assert prior_cv("tok_s", "starts", gpu=h100) == 0.005
    assert prior_cv("itl_ms_p99", "starts", gpu=h100) == 0.18 > prior_cv("itl_ms_p99", "starts", gpu=h200) == 0.08
    assert prior_cv("ttft_ms", "starts", gpu=h100) == prior_cv("ttft_ms", "starts", gpu=h200) == 0.16  # none own
    assert prior_cv("tok_s", "machines", gpu=h100) == 0.016  # the machines level: the real column's
    assert prior_cv("tok_s", "side-by-side", gpu=h100) == 0.005  # none apart: the kind's own starts
    assert prior_cv("ttft_ms", "side-by-side", gpu=h100) == 0.20  # the real column's side-by-side
    # the simulator's own, whatever GPU its box pretends to be
    assert prior_cv("tok_s", "starts", simulated=True, gpu=h100) == PRIORS[MetricClass.THROUGHPUT][("starts", "sim")]


@given(cls=st.sampled_from(list(MetricClass)), level=st.sampled_from(LEVELS),
       gpu=st.sampled_from([None, "unknown", "NVIDIA A100-SXM4-80GB", "NVIDIA B200", "NVIDIA GH200 480GB"]))
def test_a_gpu_of_no_measured_kind_takes_the_widest_prior_of_all(cls: MetricClass, level: str, gpu: str | None) -> None:
    metric = METRIC_OF[cls]
    kinds = [prior_cv(metric, level, gpu=k) for k in (*REAL_MEASURED_ON, *GPU_PRIORS)]
    assert prior_cv(metric, level, gpu=gpu) == max(kinds)
    assert limit_tolerance(metric, gpu=gpu) >= max(limit_tolerance(metric, gpu=k) for k in (*REAL_MEASURED_ON,
                                                                                            *GPU_PRIORS))


def test_a_floor_takes_its_profile_gpus_priors() -> None:
    on = {gpu: Floor(mode="baseline", gpu=gpu) for gpu in ("H100", "H200", "")}
    assert on["H100"].tolerance_for("itl_ms_p99") == limit_tolerance("itl_ms_p99", gpu="H100") > \
        on["H200"].tolerance_for("itl_ms_p99") == limit_tolerance("itl_ms_p99", gpu="H200")
    assert on[""].tolerance_for("itl_ms_p99") == on["H100"].tolerance_for("itl_ms_p99")  # no GPU named: the widest


def test_the_h100_priors_are_at_least_what_its_own_run_measured() -> None:
    """Each of the H100's own priors holds the widest spread of one arm's starts in its real paired run (4 starts of
    SGLang 0.5.16 and of 0.5.17, 2026-12-05): a prior never claims more calm than was seen; and a class it does not
    name was within the real column's prior there."""
    from perfgate.report.junit_read import read_reports

    (record,) = [r for rep in read_reports([str(H100_RUN)]) for r in rep.records if r.kind == "stack-pair"]
    assert "H100" in record.gpu
    widest: dict[MetricClass, float] = {}
    for metric in ("tok_s", "output_tok_s", "itl_ms", "itl_ms_p99", "ttft_ms", "ttft_part.prefill_ms",
                   "ttft_part.to_forward_ms", "ttft_part.dispatch_ms", "ttft_part.rest_ms"):
        for arm in ("", "candidate."):
            v = [float(x) for x in record.prop(f"{arm}start_values.{metric}").split(",")]
            assert len(v) == 4, (arm, metric)
            cls = metric_class(metric)
            widest[cls] = max(widest.get(cls, 0.0), statistics.stdev(v) / statistics.fmean(v))
    for cls, spread in widest.items():
        assert prior_cv(METRIC_OF[cls], "starts", gpu=record.gpu) >= spread, (cls, spread)
    assert widest[MetricClass.THROUGHPUT] > PRIORS[MetricClass.THROUGHPUT][("starts", "real")]  # why it has its own



def test_a_real_sessions_banner_says_whose_priors_judge_it() -> None:
    from types import SimpleNamespace

    from perfgate.plugin.terminal import banner

    def state(gpu: str, simulated: bool = False) -> SimpleNamespace:
        profile = SimpleNamespace(path="p.toml", engine=SimpleNamespace(name="sim" if simulated else "sglang"),
                                  simulated=simulated, hardware=SimpleNamespace(count=1, gpu="H100", interconnect="pcie"),
                                  warnings=())
        return SimpleNamespace(profile=profile, auto_reason="", settings=SimpleNamespace(url=None), log_dir="logs",
                               variants=SimpleNamespace(warnings=()), stack=SimpleNamespace(gpu=gpu))

    h100 = "\n".join(banner(state("NVIDIA H100 80GB HBM3")))  # type: ignore[arg-type]
    assert "perfgate: noise priors of the H100, measured on its runs" in h100
    b200 = "\n".join(banner(state("NVIDIA B200")))  # type: ignore[arg-type]
    assert "no run of GPU 'NVIDIA B200' measured its own, so the widest of the GPUs that did (H200, H100)" in b200
    assert "--perfgate-noise-from" in b200
    assert "noise priors" not in "\n".join(banner(state("NVIDIA H100", simulated=True)))  # type: ignore[arg-type]

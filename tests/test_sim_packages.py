"""A cost planted in a simulated package's version and packages that do not import together
(perfgate.sim.packages, PERFGATE_SIM_PACKAGE_COST): parsing, which effects hold on a stack, and the import error's
category as perfgate's classifier reads it."""

from __future__ import annotations

import pytest

from perfgate.classify import classify
from perfgate.sim.hardware import load_hardware
from perfgate.sim.packages import (
    PACKAGE_COST_ENV,
    PackageEffect,
    import_failure,
    incompatibility,
    package_factor,
    parse_package_costs,
)
from tests.simproject import SIM_SEED_BOX

TEXT = "flashinfer=0.7.3:0.97; torch=2.10.0+nccl=2.28.3:0.95;sgl_kernel=0.4.10+torch=2.9.1:incompatible"


def test_effects_are_parsed_in_order():
    fx = parse_package_costs(TEXT)
    assert fx == (PackageEffect((("flashinfer", "0.7.3"),), factor=0.97),
                  PackageEffect((("torch", "2.10.0"), ("nccl", "2.28.3")), factor=0.95),
                  PackageEffect((("sgl_kernel", "0.4.10"), ("torch", "2.9.1")), incompatible=True))
    assert ";".join(e.text() for e in fx) == TEXT.replace("; ", ";")
    assert parse_package_costs("") == parse_package_costs(None) == ()


@pytest.mark.parametrize("bad", ["flashinfer=0.7.3", "flashinfer:0.9", "=1:0.9", "flashinfer=0.7.3:0", "a=1:fast",
                                 "a=1:inf", "a=1+b:0.9"])
def test_a_bad_effect_names_the_variable_and_the_fix(bad):
    with pytest.raises(ValueError, match=f"{PACKAGE_COST_ENV}: .*fix: e.g."):
        parse_package_costs(bad)


def test_a_factor_holds_only_where_every_version_matches():
    fx = parse_package_costs(TEXT)
    hw = load_hardware(SIM_SEED_BOX)  # torch 2.9.1, nccl 2.27.7, flashinfer 0.7.2, sgl_kernel 0.4.9
    assert package_factor(fx, hw.stack) == 1.0 and incompatibility(fx, hw.stack) is None
    assert package_factor(fx, hw.with_stack({"flashinfer": "0.7.3"}).stack) == 0.97
    assert package_factor(fx, hw.with_stack({"torch": "2.10.0"}).stack) == 1.0  # neither alone
    assert package_factor(fx, hw.with_stack({"torch": "2.10.0", "nccl": "2.28.3"}).stack) == 0.95
    both = hw.with_stack({"torch": "2.10.0", "nccl": "2.28.3", "flashinfer": "0.7.3"}).stack
    assert package_factor(fx, both) == pytest.approx(0.97 * 0.95)
    # the candidate's sgl_kernel over the current torch does not import; with the candidate's torch it does
    assert incompatibility(fx, hw.with_stack({"sgl_kernel": "0.4.10"}).stack) == fx[2]
    assert incompatibility(fx, hw.with_stack({"sgl_kernel": "0.4.10", "torch": "2.10.0"}).stack) is None


def test_an_incompatible_combination_fails_like_an_import_error_classified_missing_dependency():
    f = import_failure(parse_package_costs(TEXT)[2])
    assert f.exit_code == 1 and f.category == "missing-dependency"
    text = "\n".join(f.traceback)
    assert text.startswith("Traceback (most recent call last):")
    assert "ImportError: /usr/local/lib/python3.12/dist-packages/sgl_kernel/_C.abi3.so: undefined symbol" in text
    assert "sgl_kernel 0.4.10 was built against another ABI than torch 2.9.1's" in text
    c = classify(1, text)
    assert c.category == "missing-dependency"

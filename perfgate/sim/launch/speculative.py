"""Speculative decoding: the flags SGLang resolves (auto parameters, draft tokens) and the drafter's
acceptance on this box."""

from __future__ import annotations

from perfgate.sim.launch import LaunchState
from perfgate.sim.launch.tracebacks import SGL, main_fail
from perfgate.sim.plan import Failure, SpecSetup

SPEC_ALGOS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")
# architectures whose auto speculative params are (steps 5, topk 4, draft tokens 8); others (3, 1, 4)
WIDE_SPEC_ARCHS = ("LlamaForCausalLM", "Grok1ForCausalLM")


def resolve_flags(b: LaunchState) -> Failure | None:
    """``--speculative-*``: the algorithm, steps, top-k and draft tokens SGLang settles on (or its error)."""
    a, hw = b.a, b.hw
    algo = a.get("speculative_algorithm")
    if algo:
        algo = str(algo).upper()
        if algo not in SPEC_ALGOS:
            return main_fail("config-error", [(f"{SGL}/arg_groups/speculative_hook.py", 61,
                                                "_resolve_speculative_algorithm", "raise ValueError(")],
                              f"ValueError: Unknown speculative algorithm name: {a['speculative_algorithm']}")
        if algo == "NEXTN":
            algo = "EAGLE"
        a["speculative_algorithm"] = algo
        steps, topk, ndt = (a.get("speculative_num_steps"), a.get("speculative_eagle_topk"),
                            a.get("speculative_num_draft_tokens"))
        if algo == "NGRAM":
            topk = int(a.get("speculative_ngram_max_bfs_breadth") or 10)
            ndt = int(ndt or 12)
            steps = max(1, ndt // topk)
        else:
            if steps is None:
                if topk is not None or ndt is not None:
                    return main_fail(
                        "assertion",
                        [(f"{SGL}/arg_groups/speculative_hook.py", 142, "_handle_eagle",
                          "assert b.speculative_eagle_topk is None and b.speculative_num_draft_tokens is None")],
                        "AssertionError: speculative_eagle_topk and speculative_num_draft_tokens must be unset "
                        "when speculative_num_steps is unset (set all three or none)")
                wide = any(hw.model.architecture.startswith(x) for x in WIDE_SPEC_ARCHS)
                steps, topk, ndt = (5, 4, 8) if wide else (3, 1, 4)
                b.info("validate", f"Auto choose speculative params: num_steps={steps}, "
                                      f"eagle_topk={topk}, num_draft_tokens={ndt}")
            topk = int(topk if topk is not None else 1)
            if ndt is None:
                ndt = steps + 1 if topk == 1 else steps * topk
            if topk == 1 and ndt != steps + 1:
                b.warn("validate", "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 "
                                      "when speculative_eagle_topk == 1")
                ndt = steps + 1
        a["speculative_num_steps"], a["speculative_eagle_topk"], a["speculative_num_draft_tokens"] = (
            int(steps), int(topk), int(ndt))
        if a.get("max_running_requests") is None:
            a["max_running_requests"] = 48
            b.warn("validate", "Max running requests is reset to 48 for speculative decoding. "
                                  "You can override it by explicitly setting --max-running-requests.")
        a["speculative_draft_model_path"] = a.get("speculative_draft_model_path")
        a["speculative_draft_load_format"] = a.get("speculative_draft_load_format") or None
    return None


def setup(b: LaunchState) -> SpecSetup:
    """The resolved speculative decoding, with the acceptance length (``SGLANG_SIMULATE_ACC_LEN`` overrides the
    box's)."""
    a, hw = b.a, b.hw
    algo = a["speculative_algorithm"]
    steps, topk, ndt = a["speculative_num_steps"], a["speculative_eagle_topk"], a["speculative_num_draft_tokens"]
    if algo == "NGRAM":
        cap, default = ndt, hw.drafter.ngram_acceptance
    else:
        cap, default = min(ndt, steps + 1), hw.drafter.eagle_acceptance
    acc = default
    raw = b.env.get("SGLANG_SIMULATE_ACC_LEN")
    if raw is not None and str(raw).strip():
        try:
            acc = float(raw)
        except ValueError:
            pass
    acc = max(1.0, min(float(acc), float(cap)))
    return SpecSetup(algorithm=algo, num_steps=steps, topk=topk, num_draft_tokens=ndt,
                     accept_length=acc, max_accept=cap)


"""Reading, comparing, gating and presenting perfgate's JUnit reports.

``junit_read`` is the one reader (``Record``/``Report``); ``diff`` compares two reports (pure; every number
through :mod:`perfgate.measuring.judge`, with noise bands of ``noise`` from history); ``machines`` says whether two
reports share a machine; ``policy`` is what blocks (from pyproject.toml and the options); ``gate`` applies it and
picks the exit code; ``render`` writes text, Markdown or JSON; ``history`` tabulates many reports and finds sustained
steps; ``pairnoise`` measures one start's noise from earlier paired runs (``--perfgate-noise-from``); ``matrix``
builds the variants × modes grid; ``plot`` (matplotlib, lazy) and ``html`` draw them; ``merge`` joins the reports of
several boxes.
"""

from perfgate.errors import ExitCode
from perfgate.report.diff import Diff, Judging, MetricChange, RecordDiff, StackChange, diff
from perfgate.report.gate import GateResult, evaluate, run_gate
from perfgate.report.history import History, build_history, detect_steps
from perfgate.report.junit_read import read_report, read_reports
from perfgate.report.machines import MachineMatch, compare_machines
from perfgate.report.matrix import Matrix, build_matrix
from perfgate.report.merge import MergeResult, merge_reports
from perfgate.report.noise import Band, bands_from_reports
from perfgate.report.pairnoise import Match, PairNoise, pair_noise
from perfgate.report.policy import GatePolicy, load_policy
from perfgate.report.records import OUTCOMES, Record, Report

__all__ = [
    "OUTCOMES",
    "Diff",
    "ExitCode",
    "GatePolicy",
    "GateResult",
    "History",
    "MachineMatch",
    "Matrix",
    "MergeResult",
    "Record",
    "RecordDiff",
    "Report",
    "StackChange",
    "MetricChange",
    "Judging",
    "Band",
    "bands_from_reports",
    "Match",
    "PairNoise",
    "pair_noise",
    "build_history",
    "build_matrix",
    "compare_machines",
    "detect_steps",
    "diff",
    "evaluate",
    "load_policy",
    "merge_reports",
    "read_report",
    "read_reports",
    "run_gate",
]

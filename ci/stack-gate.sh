#!/usr/bin/env bash
# ci/stack-gate.sh — gate a software-stack upgrade on a GPU box.
#
# Two virtual environments are built from two requirements/lock files (current, candidate), then:
#
#   PERFGATE_GATE_MODE=paired (recommended: docs/gate.md, "The paired run")
#     one pytest session in the current venv measures each config under both stacks on these GPUs,
#     server starts interleaved (current 1, candidate 1, current 2, ...; PERFGATE_STARTS each before
#     the first look, default 1, then pairs added while undecided up to PERFGATE_MAX_STARTS, default 6),
#     and the stack-pair records decide from the candidate/current ratio of each start pair: the
#     machine's own offset cancels. Writes paired.xml.
#   PERFGATE_GATE_MODE=reports (the default; the history of reports)
#     runs the suite once under the current stack and once under the candidate stack, one after
#     the other on the same GPUs, then compares the two JUnit reports with `perfgate gate`.
#
# Usage:
#   ci/stack-gate.sh CURRENT.lock CANDIDATE.lock
#
# Exit codes (reports: those of `perfgate gate`, see docs/gate.md; paired: pytest's, mapped):
#   0  no regression (paired: every stack-pair record passed or is undecided)
#   1  regression or newly broken record (paired: a stack-pair record failed)
#   3  unblocked records: update their expectations (reports only)
#   2  usage error, a venv could not be built, or a run produced no usable report
#
# Environment (all optional):
#   PERFGATE_GATE_MODE       reports (default) or paired
#   PERFGATE_OUT             output folder (default: perfgate-out); gets current.xml,
#                            candidate.xml, *.freeze.txt, *.pytest.log, diff.md, diff.json, gate.txt
#                            (paired: paired.xml, paired.pytest.log, *.freeze.txt)
#   PERFGATE_PYTEST_ARGS     what to run (default: "perftests/"; paired: "perftests/ -m stack_pair"),
#                            e.g. "perftests/ -m baseline"
#   PERFGATE_STARTS          paired: server starts per config and stack before the first look (default 1)
#   PERFGATE_MAX_STARTS      paired: the most starts per config and stack while a record is undecided
#                            (default 6: pairs are added until the judge decides, docs/gate.md "Deciding")
#   PERFGATE_VENV_CURRENT    use this existing venv for the current stack instead of building one
#   PERFGATE_VENV_CANDIDATE  the same for the candidate stack
#   PERFGATE_NO_GATE=1       only produce the two reports (fan-out jobs: merge, then gate later)
#   PERFGATE                 how to call perfgate (default: the candidate venv's `python -m perfgate.cli`)
#   PYTHON                   interpreter for new venvs (default: python3)
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

if [[ $# -ne 2 ]]; then
  usage >&2
  exit 2
fi

# anything unexpected is a usage/infrastructure error (2), never a "regression" (1)
set -o errtrace
trap 'printf "[stack-gate] unexpected error at line %s\n" "$LINENO" >&2; exit 2' ERR

abspath() {
  if [[ -e "$1" ]]; then
    printf '%s/%s\n' "$(cd "$(dirname "$1")" && pwd)" "$(basename "$1")"
  else
    printf '%s\n' "$1"
  fi
}

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CURRENT_LOCK="$(abspath "$1")"
CANDIDATE_LOCK="$(abspath "$2")"
cd "$ROOT"

OUT="${PERFGATE_OUT:-perfgate-out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
PYTHON="${PYTHON:-python3}"
MODE="${PERFGATE_GATE_MODE:-reports}"
case "$MODE" in
  reports) read -r -a PYTEST_ARGS <<<"${PERFGATE_PYTEST_ARGS:-perftests/}" ;;
  paired) read -r -a PYTEST_ARGS <<<"${PERFGATE_PYTEST_ARGS:-perftests/ -m stack_pair}" ;;
  *) printf '[stack-gate] PERFGATE_GATE_MODE=%s: expected reports or paired\n' "$MODE" >&2; exit 2 ;;
esac

log() { printf '[stack-gate] %s\n' "$*" >&2; }

# build_venv SIDE LOCKFILE -> prints the venv path
build_venv() {
  local side="$1" lock="$2" given="$3"
  if [[ -n "$given" ]]; then
    printf '%s\n' "$given"
    return 0
  fi
  [[ -f "$lock" ]] || { log "no such lock file: $lock"; return 2; }
  local venv="$OUT/venv-$side"
  log "building the $side venv from $lock"
  rm -rf "$venv"
  # (called as `$(build_venv ...) || exit 2`, where set -e is off: check every step)
  "$PYTHON" -m venv "$venv" >&2 || { log "cannot create $venv"; return 2; }
  "$venv/bin/python" -m pip install --quiet -r "$lock" >&2 || { log "pip cannot install $lock"; return 2; }
  "$venv/bin/python" -m pip install --quiet -e "$ROOT" >&2 || { log "pip cannot install perfgate"; return 2; }
  printf '%s\n' "$venv"
}

# run_suite SIDE VENV: runs pytest, keeps its report; failures are data, not an error here
run_suite() {
  local side="$1" venv="$2" rc=0
  local xml="$OUT/$side.xml"
  rm -f "$xml"
  "$venv/bin/python" -m pip freeze >"$OUT/$side.freeze.txt" 2>/dev/null || true
  log "running the suite on the $side stack: pytest ${PYTEST_ARGS[*]}"
  "$venv/bin/python" -m pytest "${PYTEST_ARGS[@]}" --junitxml="$xml" -p no:cacheprovider \
    >"$OUT/$side.pytest.log" 2>&1 || rc=$?
  tail -n 5 "$OUT/$side.pytest.log" >&2 || true
  case "$rc" in
    0 | 1) ;;  # 1 = some records failed: that is what the gate compares
    5) log "$side: pytest selected no tests (path/-m typo?); a gate that ran nothing must not pass"; return 2 ;;
    *) log "$side: pytest exited $rc (interrupted, internal or usage error); see $OUT/$side.pytest.log"; return 2 ;;
  esac
  [[ -s "$xml" ]] || { log "$side: pytest wrote no report at $xml"; return 2; }
}

VENV_CURRENT="$(build_venv current "$CURRENT_LOCK" "${PERFGATE_VENV_CURRENT:-}")" || exit 2
VENV_CANDIDATE="$(build_venv candidate "$CANDIDATE_LOCK" "${PERFGATE_VENV_CANDIDATE:-}")" || exit 2

# paired: one session in the current venv; the candidate venv's python serves the candidate arm
run_paired() {
  local cur="$1" cand="$2" rc=0 xml="$OUT/paired.xml"
  rm -f "$xml"
  "$cur/bin/python" -m pip freeze >"$OUT/current.freeze.txt" 2>/dev/null || true
  "$cand/bin/python" -m pip freeze >"$OUT/candidate.freeze.txt" 2>/dev/null || true
  local starts="${PERFGATE_STARTS:-1}" max="${PERFGATE_MAX_STARTS:-6}"
  log "paired run on these GPUs, $starts start(s) per config and stack, up to $max while undecided: pytest ${PYTEST_ARGS[*]}"
  "$cur/bin/python" -m pytest "${PYTEST_ARGS[@]}" --perfgate-candidate "python=$cand/bin/python" \
    --perfgate-starts "$starts" --perfgate-max-starts "$max" --junitxml="$xml" -p no:cacheprovider \
    >"$OUT/paired.pytest.log" 2>&1 || rc=$?
  tail -n 5 "$OUT/paired.pytest.log" >&2 || true
  [[ "$rc" == 0 || "$rc" == 1 ]] && [[ ! -s "$xml" ]] && { log "paired: pytest wrote no report at $xml"; return 2; }
  case "$rc" in
    0) log "paired gate: OK (every stack-pair record passed, or is undecided: see $OUT/paired.pytest.log)" ;;
    1) log "paired gate: BLOCKED — a stack-pair record failed (slower beyond noise, or broke) on the candidate" ;;
    5) log "paired: pytest selected no tests (no stack-pair record in ${PYTEST_ARGS[*]}?)"; return 2 ;;
    *) log "paired: pytest exited $rc (interrupted, internal or usage error); see $OUT/paired.pytest.log"; return 2 ;;
  esac
  return "$rc"
}

if [[ "$MODE" == "paired" ]]; then
  rc=0
  run_paired "$VENV_CURRENT" "$VENV_CANDIDATE" || rc=$?
  exit "$rc"
fi

# one stack at a time on the same GPUs: the suite tears its servers down before it exits
run_suite current "$VENV_CURRENT" || exit 2
run_suite candidate "$VENV_CANDIDATE" || exit 2

if [[ "${PERFGATE_NO_GATE:-}" == "1" ]]; then
  log "reports written to $OUT (PERFGATE_NO_GATE=1: no gate)"
  exit 0
fi

if [[ -n "${PERFGATE:-}" ]]; then
  read -r -a PG <<<"$PERFGATE"
else
  PG=("$VENV_CANDIDATE/bin/python" -m perfgate.cli)
fi

"${PG[@]}" diff "$OUT/current.xml" "$OUT/candidate.xml" --format json -o "$OUT/diff.json" || exit 2
# the Markdown (diff + gate verdict) is the pull-request comment
"${PG[@]}" gate "$OUT/current.xml" "$OUT/candidate.xml" --format md -o "$OUT/diff.md" 2>/dev/null || true
rc=0
"${PG[@]}" gate "$OUT/current.xml" "$OUT/candidate.xml" -o "$OUT/gate.txt" || rc=$?
[[ -f "$OUT/gate.txt" ]] && cat "$OUT/gate.txt"
case "$rc" in
  0) log "gate: OK" ;;
  1) log "gate: BLOCKED — a record regressed or broke on the candidate stack" ;;
  3) log "gate: records unblocked on the candidate stack — update their expectations in baselines/*.toml" ;;
  *) log "gate: usage error or unreadable report (exit $rc)" ;;
esac
exit "$rc"

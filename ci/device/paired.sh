#!/bin/bash
# One machine, one session: the machine's fingerprint and calibration, the baseline floor, and a paired run of
# the current stack against a candidate (default: the same Python, an A/A run), server starts interleaved
# (current 1, candidate 1, current 2, candidate 2, ...) and judged on the paired ratio (perfgate.measuring.judge.paired).
# Usage: ci/device/paired.sh BUNDLE_DIR OUT_DIR [STARTS [CANDIDATE_SPEC [extra pytest args]]]
#   CANDIDATE_SPEC as --perfgate-candidate takes it; default python=<this python3>: two identical stacks.
set -uo pipefail
B=${1:?bundle dir}; OUT=${2:?out dir}; STARTS=${3:-2}; CAND=${4:-python=$(command -v python3)}; shift $(( $# < 4 ? $# : 4 ))
. "$(dirname "$0")/setup.sh"
echo "== pytest ($(( $(date +%s) - t0 )) s): starts $STARTS, candidate $CAND"
python3 -m pytest perftests/ -m "baseline or stack_pair" -k "test_decode_floor or (test_stack_pair and baseline)" \
  --perfgate-profile h200-x1/llama-3.1-8b-dummy --perfgate-starts "$STARTS" --perfgate-candidate "$CAND" \
  --perfgate-crosscheck off --junitxml="$OUT/paired-junit.xml" --perfgate-log-dir "$OUT/logs" \
  -p no:cacheprovider -rA "$@" > "$OUT/pytest.log" 2>&1
rc=$?
grep -E "perfgate: machine|server starts per config|pair_|×" "$OUT/pytest.log" | cut -c1-300
after_run baselines/h200-x1/llama-3.1-8b-dummy.toml
exit $rc

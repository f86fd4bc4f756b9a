#!/bin/bash
# Runs perfgate's suite against real SGLang on a GPU box with no network (an H200 here),
# the way a user runs it: install the SGLang bundle (README appendix), then
#   pytest perftests/ -m "baseline or speculative" --perfgate-profile h200-x1/llama-3.1-8b-dummy
# which launches real SGLang through perfgate's own server lifecycle, measures each mode, cross-checks
# every mode with SGLang's bench_one_batch_server on the same live server, and writes the measured
# floors back into the profile (--perfgate-update-baselines).
# Usage: ci/device/h200.sh BUNDLE_DIR OUT_DIR [extra pytest args]
set -uo pipefail
B=${1:?bundle dir}; OUT=${2:?out dir}; shift 2
. "$(dirname "$0")/setup.sh"
echo "== pytest ($(( $(date +%s) - t0 )) s)"
python3 -m pytest perftests/ -m "baseline or speculative" --perfgate-profile h200-x1/llama-3.1-8b-dummy \
  --junitxml="$OUT/h200-junit.xml" --perfgate-log-dir "$OUT/logs" --perfgate-update-baselines \
  -p no:cacheprovider -rA "$@" > "$OUT/pytest.log" 2>&1
rc=$?
after_run baselines/h200-x1/llama-3.1-8b-dummy.toml
exit $rc

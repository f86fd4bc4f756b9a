#!/bin/bash
# Runs perfgate's suite against real SGLang on a GPU box with no network (the H200 device machine),
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
grep -E "^(PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR)|perfgate:|passed|failed" "$OUT/pytest.log" | cut -c1-400
echo "pytest exit $rc after $(( $(date +%s) - t0 )) s"
cp baselines/h200-x1/llama-3.1-8b-dummy.toml "$OUT/"
echo "== GPU memory after the run"
nvidia-smi --query-gpu=memory.used --format=csv,noheader
# live processes only: a zombie (state Z, "<defunct>") is an exit status the container's PID 1 has not
# reaped; it holds no memory and no GPU, and it is counted on its own line
ps -eo pid,ppid,pgid,stat,cmd | awk '$4 !~ /^Z/' | grep -E "sglang|perfgate" | grep -v grep \
  || echo "no sglang/perfgate process left"
z=$(ps -eo stat,cmd | awk '$1 ~ /^Z/' | grep -c sglang); [ "$z" -gt 0 ] && echo "($z exited sglang process(es) not reaped by PID 1: zombies)"
[ -d "$OUT/logs" ] && (cd "$OUT" && tar czf logs.tgz logs && rm -rf logs)
exit $rc

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
mkdir -p "$OUT"
# NVLink multicast stays off on shared hosts (device README): NCCL, PyTorch and NVSHMEM
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
echo "== install ($(date -u +%T))"
bash "$B/install-on-device.sh" "$B" /tmp/sgl > "$OUT/install.log" 2>&1 || { tail -20 "$OUT/install.log"; exit 1; }
tail -1 "$OUT/install.log"
python3 -m pip install -q --no-index --no-deps --target /tmp/pg "$B"/py/*.whl || exit 1
export PYTHONPATH=/tmp/sgl:/tmp/pg:$PWD
python3 -c "import perfgate.plugin, junitparser, tomlkit, sglang; print('perfgate ok; sglang', sglang.__version__)" || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader
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
(cd "$OUT" && tar czf logs.tgz logs && rm -rf logs)
exit $rc

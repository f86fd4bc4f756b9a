#!/bin/bash
# On a 2-GPU H200 box: (1) the all-reduce micro-benchmark at world size 2 over NVLink for the seed
# model's decode/verify shapes and a sweep; (2) perfgate vs SGLang's bench_one_batch_server on the same
# live server (baseline and EAGLE-3 at acceptance 2.0). Usage: ci/device/h200x2.sh BUNDLE OUT
set -uo pipefail
B=${1:?bundle}; OUT=${2:?out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --target /tmp/pg "$B"/py/*.whl || exit 1
export PYTHONPATH=/tmp/pg:$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvidia-smi topo -m | head -4
echo "== micro ($(( $(date +%s) - t0 )) s)"
PERFGATE_MICRO_WORLD_SIZES=2 PERFGATE_MICRO_ITERS=100 timeout 120 python3 -m pytest perftests/test_allreduce.py -m micro \
  --perfgate-profile rtxpro6000-x8/kimi-k2.5 --perfgate-allow-hardware-mismatch -p no:cacheprovider -rA \
  --junitxml="$OUT/allreduce-h200x2.xml" > "$OUT/micro.log" 2>&1
echo "micro exit $?"; grep -E "passed|failed" "$OUT/micro.log" | tail -2
echo "== install SGLang ($(( $(date +%s) - t0 )) s)"
bash "$B/install-on-device.sh" "$B" /tmp/sgl > "$OUT/install.log" 2>&1 || { tail -5 "$OUT/install.log"; exit 1; }
export PYTHONPATH=/tmp/sgl:/tmp/pg:$PWD
python3 -c "import sglang.bench_one_batch_server" 2>&1 | tail -2
echo "== crosscheck ($(( $(date +%s) - t0 )) s)"
CUDA_VISIBLE_DEVICES=0 timeout 330 python3 -m pytest perftests/test_crosscheck.py -m "baseline or speculative" \
  -k "not acc3" --perfgate-profile h200-x1/llama-3.1-8b-dummy --junitxml="$OUT/crosscheck-h200.xml" \
  --perfgate-log-dir "$OUT/logs" --perfgate-trials 3 -p no:cacheprovider -rA > "$OUT/crosscheck.log" 2>&1
echo "crosscheck exit $? after $(( $(date +%s) - t0 )) s"
grep -E "^(PASSED|FAILED|SKIPPED|ERROR)|passed|failed|skipped" "$OUT/crosscheck.log" | cut -c1-300
grep -o 'name="\(tok_s\|sglang_bench_tok_s\|sglang_bench_tok_s_comparable\|vs_sglang_bench\|sglang_bench_accept_len\|accept_len\)" value="[^"]*"' "$OUT/crosscheck-h200.xml"
nvidia-smi --query-gpu=memory.used --format=csv,noheader
(cd "$OUT" && tar czf logs.tgz logs 2>/dev/null; rm -rf logs)

#!/bin/bash
# The tensor-parallel backend matrix on a 2-GPU H200 box (issue 9, item 3): real SGLang at tp 2 on
# Llama-3.1-8B with dummy weights, the baseline and the given all-reduce variants, as a user runs it:
#   pytest perftests/ -m "baseline or backends" --perfgate-profile h200-x2/llama-3.1-8b-dummy-tp2 \
#       --perfgate-variants A,B,...
# A device call is limited to 10 minutes and each tp-2 start takes one to two; so pass a few variants
# per call (the baseline runs in every call: each variant is compared with the baseline of its own
# session, on the same machine). The baseline floor is written back with --perfgate-update-baselines.
# Usage: ci/device/h200x2-tp.sh BUNDLE_DIR OUT_DIR VARIANTS [extra pytest args]
#   e.g.  ci/device/h200x2-tp.sh .device-bundle $OUT nccl-tree,nccl-fewer-channels,nccl-small-buffer
#         ci/device/h200x2-tp.sh .device-bundle $OUT custom-ar-off,torch-symm-mem,flashinfer-ar-fusion,mscclpp
set -uo pipefail
B=${1:?bundle dir}; OUT=${2:?out dir}; VARIANTS=${3:?comma-separated variants}; shift 3
. "$(dirname "$0")/setup.sh"
nvidia-smi topo -m | head -4
echo "== pytest ($(( $(date +%s) - t0 )) s)"
python3 -m pytest perftests/ -m "baseline or backends" --perfgate-profile h200-x2/llama-3.1-8b-dummy-tp2 \
  --perfgate-variants "$VARIANTS" --perfgate-crosscheck off \
  --junitxml="$OUT/h200x2-tp-junit.xml" --perfgate-log-dir "$OUT/logs" --perfgate-update-baselines \
  -p no:cacheprovider -rA "$@" > "$OUT/pytest.log" 2>&1
rc=$?
after_run baselines/h200-x2/llama-3.1-8b-dummy-tp2.toml
exit $rc

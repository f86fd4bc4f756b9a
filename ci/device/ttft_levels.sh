#!/bin/bash
# Where batch-1 TTFT's levels live (ci/device/ttft_levels.py): ci/device/ttft_levels.sh BUNDLE OUT PROFILE [args]
#   e.g. ci/device/ttft_levels.sh .device-bundle $OUT h200-x1/llama-3.1-8b-dummy --seconds 120 --phase free --phase pin:auto
set -uo pipefail
B=${1:?bundle dir}; OUT=${2:?out dir}; PROFILE=${3:?profile}; shift 3
. "$(dirname "$0")/setup.sh"
PYTHONUNBUFFERED=1 python3 ci/device/ttft_levels.py "$OUT" "$PROFILE" "$@" > "$OUT/levels.log" 2>&1; rc=$?
grep -v -E "^   [a-z-]+ \([0-9]+ s\)$" "$OUT/levels.log" | tail -40
nvidia-smi --query-gpu=uuid,memory.used --format=csv,noheader
if [ -d "$OUT/logs" ]; then (cd "$OUT" && tar czf logs.tgz logs && rm -rf logs); fi
exit $rc

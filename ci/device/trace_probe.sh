#!/bin/bash
# Real decode-step traces for reading kernel names: ci/device/trace_probe.sh BUNDLE OUT PROFILE MODE...
set -uo pipefail
B=${1:?bundle dir}; OUT=${2:?out dir}; PROFILE=${3:?profile}; shift 3
. "$(dirname "$0")/setup.sh"
PYTHONUNBUFFERED=1 python3 ci/device/trace_probe.py "$OUT" "$PROFILE" "$@" > "$OUT/probe.log" 2>&1; rc=$?; grep -E "^(==|   captured|-- |   step spans)" "$OUT/probe.log"; tail -5 "$OUT/probe.log"
nvidia-smi --query-gpu=index,memory.used --format=csv,noheader
if [ -d "$OUT/logs" ]; then (cd "$OUT" && tar czf logs.tgz logs && rm -rf logs); fi
exit $rc

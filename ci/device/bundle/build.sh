#!/bin/bash
# Builds the bundle an air-gapped GPU box needs to run perfgate against real SGLang 0.5.17: one xz file of
# SGLang and its start-up wheels, for a box with Python 3.12 and torch 2.11.0 (CUDA 13) installed and no
# network, plus the pure-Python wheels perfgate needs there (py/). Run it where PyPI is reachable.
#
# Usage: ci/device/bundle/build.sh OUTDIR   (~2 minutes, ~62 MB)
#   -> OUTDIR/sgl.tar.xz, OUTDIR/sgl_deep_gemm-*.whl, OUTDIR/py/*.whl, OUTDIR/install-on-device.sh
# On the box: bash OUTDIR/install-on-device.sh OUTDIR /tmp/sgl; export PYTHONPATH=/tmp/sgl
# (ci/device/setup.sh does that). The kernel wheel is slimmed to the SM90 library (FA3, SM100 and
# FlashMLA dropped: 365 -> ~14 MiB), so launch with --attention-backend triton --sampling-backend pytorch,
# as the profiles under baselines/h200-*/ do. The box's transformers 5.17 breaks SGLang 0.5.17's import:
# the bundle carries transformers 5.12.1 and tokenizers 0.22.2, installed into the overlay that goes first
# on PYTHONPATH. sgl-deep-gemm is there because the EAGLE worker imports deep_gemm while capturing graphs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
plat=""; for i in $(seq 5 39); do plat="$plat --platform manylinux_2_${i}_x86_64"; done
plat="$plat --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64 --platform linux_x86_64"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  $plat -r "$here/requirements-sglang-0.5.17-h200.txt" -d "$work/wheels"
mv "$work"/wheels/sgl_deep_gemm-*.whl "$out/"
zip -q -d "$work"/wheels/sglang_kernel-0.4.5-*.whl 'sgl_kernel/flash_ops.abi3.so' 'sgl_kernel/sm100/*' \
  'sgl_kernel/infllm_ops*' 'sgl_kernel/flashmla_ops.abi3.so'
zip -q -d "$work"/wheels/xgrammar-0.2.1-*.whl 'xgrammar/lib/libxgrammar.a'
mkdir -p "$work/stored"
for w in "$work"/wheels/*.whl; do   # stored (uncompressed) zips compress far better under xz
  d=$(mktemp -d -p "$work"); unzip -q "$w" -d "$d"
  (cd "$d" && zip -q -0 -r -X "$work/stored/$(basename "$w")" .); rm -rf "$d"
done
tar -cf - -C "$work/stored" . | xz -T0 -6 > "$out/sgl.tar.xz"
# what perfgate needs there and the box's image lacks (datasets and multiprocess: SGLang's own benchmark)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
  -d "$out/py" junitparser==5.0.3 tomlkit datasets multiprocess
cp "$here/install-on-device.sh" "$out/"
ls -la "$out"

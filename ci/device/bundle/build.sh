#!/bin/bash
# Builds the bundle an air-gapped GPU box needs to run perfgate against one real SGLang release: one xz file
# of SGLang and its start-up wheels, for a box with Python 3.12 and torch 2.11.0 (CUDA 13) installed and no
# network, plus the pure-Python wheels perfgate needs there (py/). Run it where PyPI is reachable.
#
# Usage: ci/device/bundle/build.sh OUTDIR [RELEASE]     RELEASE: 0.5.17 (default, ~3 min, 59 MB), 0.5.16 (16 MB), 0.5.15 (29 MB)
#   -> OUTDIR/sgl.tar.xz, OUTDIR/bundle.env, OUTDIR/py/*.whl, OUTDIR/install-on-device.sh
#      (the full 0.5.17 bundle also OUTDIR/sgl_deep_gemm-*.whl, kept out of the xz as before)
# Each release's start-up set is requirements-sglang-RELEASE-h200.txt beside this script, complete on its own.
# A file whose first lines say `# overlay-on: 0.5.17` builds an *overlay* bundle: only the wheels whose pins
# differ from the 0.5.17 set, installed on the box into a folder of their own with the 0.5.17 overlay behind
# it on PYTHONPATH (PYTHONPATH=/tmp/sgl-0.5.16:/tmp/sgl); that keeps each bundle inside the 64 MiB a device
# call carries (ci/device/README.md has the sizes and times). Before packing, check_set.py checks the set
# against the wheels' own metadata (every pin SGLang and the other wheels declare on a package of the set)
# and pip installs it dry (--no-deps, for cp312 manylinux x86_64): a set that is not complete stops here.
#
# On the box: bash OUTDIR/install-on-device.sh OUTDIR /tmp/sgl (an overlay: ... /tmp/sgl-0.5.16 /tmp/sgl);
# ci/device/setup.sh and ci/device/upgrade.sh do that. The kernel wheel is slimmed to the SM90 library (FA3,
# SM100 and FlashMLA dropped: 365 -> ~14 MiB), so launch with --attention-backend triton --sampling-backend
# pytorch, as the profiles under baselines/h200-*/ do. The box's transformers 5.17 breaks SGLang 0.5.17's
# import: the bundle carries transformers 5.12.1 and tokenizers 0.22.2, installed into the overlay that goes
# first on PYTHONPATH. sgl-deep-gemm is there because the EAGLE worker imports deep_gemm while capturing graphs.
# 0.5.15 pins flashinfer_cubin 0.6.12 (a 447 MB wheel, 1.9 GB unpacked): it is left out (FlashInfer imports
# without it; kernels that need its cubins would try to download them, which an air-gapped box cannot).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ $# -lt 1 || $# -gt 2 || "$1" == -* ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
  exit 2
fi
release=${2:-0.5.17}
req="$here/requirements-sglang-$release-h200.txt"
if [[ ! -f "$req" ]]; then
  echo "build.sh: no start-up set for SGLang $release: $req is missing; fix: pick one of" \
    "$(cd "$here" && ls requirements-sglang-*-h200.txt | sed -E 's/requirements-sglang-(.*)-h200.txt/\1/' | xargs)," \
    "or write that file (the release's start-up wheels, pins read from its METADATA)" >&2
  exit 2
fi
base=$(sed -n -E 's/^# overlay-on: *([^ ]+) *$/\1/p' "$req" | head -1)
base_req=""
if [[ -n "$base" ]]; then
  base_req="$here/requirements-sglang-$base-h200.txt"
  [[ -f "$base_req" ]] || { echo "build.sh: $req says '# overlay-on: $base' but $base_req is missing; fix: name a release that has a full set" >&2; exit 2; }
fi
XZ_LEVEL=${XZ_LEVEL:-9}
t0=$(date +%s)
say() { printf '[build %s %3ss] %s\n' "$release" "$(( $(date +%s) - t0 ))" "$*"; }
out=$(mkdir -p "$1" && cd "$1" && pwd)
rm -f "$out"/sgl.tar.xz "$out"/*.whl "$out"/bundle.env; rm -rf "$out/py"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
# NAME==VERSION per line, the name normalized (PEP 503), comments and blanks dropped
pins() { grep -vE '^\s*(#|$)' "$1" | sed -E 's/\s+//g' | awk -F'==' '{n = tolower($1); gsub(/[_.]+/, "-", n); print n "==" $2}' | sort; }
# pip without the index's 'Location ... is ignored' noise (exit status kept)
pipq() { python3 -m pip "$@" 2> >(grep -v "^WARNING: Location" >&2); }
if [[ -n "$base" ]]; then
  # the wheels that differ from the base set: a pin the base does not have (name and version)
  comm -23 <(pins "$req") <(pins "$base_req") > "$work/get.txt"
  say "overlay on $base: $(wc -l < "$work/get.txt") wheel(s) differ: $(xargs < "$work/get.txt")"
else
  pins "$req" > "$work/get.txt"
fi
plat=""; for i in $(seq 5 39); do plat="$plat --platform manylinux_2_${i}_x86_64"; done
plat="$plat --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64 --platform linux_x86_64"
target="--python-version 3.12 --implementation cp --abi cp312 $plat"
say "download ($(wc -l < "$work/get.txt") wheels, no dependencies)"
# shellcheck disable=SC2086
pipq download -q --no-deps --only-binary=:all: $target -r "$work/get.txt" -d "$work/wheels"
say "check the set against the wheels' metadata ($(basename "$req"))"
python3 "$here/check_set.py" "$req" "$work/wheels" ${base_req:+--base "$base_req"}
say "dry install (pip --dry-run --no-deps, cp312 manylinux x86_64)"
# shellcheck disable=SC2086
pipq install --dry-run --no-deps --no-index --ignore-installed --only-binary=:all: $target \
  --target "$work/scratch" "$work"/wheels/*.whl | tail -1
du -b "$work"/wheels/*.whl | awk '{printf "  %6.1f MB  %s\n", $1 / 1e6, $2}' | sed "s|$work/wheels/||"
if [[ -z "$base" ]]; then
  mv "$work"/wheels/sgl_deep_gemm-*.whl "$out/"
fi
# the kernel wheel slimmed to SM90 (FA3, SM100, InfLLM and FlashMLA libraries dropped); xgrammar's static lib
slim() {  # WHEEL PATTERN...: zip -d, where nothing matched is not an error (zip's exit 12)
  local w=$1; shift
  zip -q -d "$w" "$@" || [[ $? == 12 ]]
}
for w in "$work"/wheels/sglang_kernel-*.whl; do
  [[ -f "$w" ]] && slim "$w" 'sgl_kernel/flash_ops.abi3.so' 'sgl_kernel/sm100/*' 'sgl_kernel/infllm_ops*' \
    'sgl_kernel/flashmla_ops.abi3.so'
done
for w in "$work"/wheels/xgrammar-*.whl; do [[ -f "$w" ]] && slim "$w" 'xgrammar/lib/libxgrammar.a'; done
mkdir -p "$work/stored"
for w in "$work"/wheels/*.whl; do   # stored (uncompressed) zips compress far better under xz
  d=$(mktemp -d -p "$work"); unzip -q "$w" -d "$d"
  (cd "$d" && zip -q -0 -r -X "$work/stored/$(basename "$w")" .); rm -rf "$d"
done
say "xz -$XZ_LEVEL of $(du -sb "$work/stored" | awk '{printf "%.0f MB", $1 / 1e6}') stored wheels"
tar --sort=name -cf - -C "$work/stored" . | xz -T0 "-$XZ_LEVEL" > "$out/sgl.tar.xz"
# what perfgate needs there and the box's image lacks (datasets and multiprocess: SGLang's own benchmark)
pipq download -q --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
  -d "$out/py" junitparser==5.0.3 tomlkit datasets multiprocess
cp "$here/install-on-device.sh" "$out/"
{ echo "RELEASE=$release"; echo "OVERLAY_ON=$base"; echo "BUILT=$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "WHEELS=\"$(cd "$work/wheels" && ls | xargs)\""; } > "$out/bundle.env"
ls -la "$out"
say "done: $(du -sb "$out" | awk '{printf "%.1f MB (%.1f MiB)", $1 / 1e6, $1 / 1048576}') in $out"

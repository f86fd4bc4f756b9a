# Sourced by the device scripts (bash, no network): install the SGLang bundle and the wheels perfgate
# needs, keep NVLink multicast off, and say what is there. Expects B (a full bundle's dir: build.sh OUTDIR, or
# one installed into /tmp/sgl by an earlier call on this machine) and OUT (out dir); sets t0 (start time) and
# PYTHONPATH.
# NVLink multicast stays off on shared hosts (a program using it can take the host's GPUs out of service):
# NCCL, PyTorch and NVSHMEM
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT"
t0=$(date +%s)
echo "== install ($(date -u +%T))"
# a bundle carried in an earlier call on this (warm) machine need not travel again: /tmp/sgl keeps it
if [ -f "$B/install-on-device.sh" ]; then
  if grep -qE '^OVERLAY_ON=.+' "$B/bundle.env" 2>/dev/null; then
    echo "setup: $B is an overlay bundle ($(grep -E '^(RELEASE|OVERLAY_ON)=' "$B/bundle.env" | xargs)); setup.sh" \
      "installs a full one into /tmp/sgl; fix: pass the full bundle here, the overlay to ci/device/upgrade.sh"
    exit 1
  fi
  bash "$B/install-on-device.sh" "$B" /tmp/sgl > "$OUT/install.log" 2>&1 || { tail -20 "$OUT/install.log"; exit 1; }
  tail -3 "$OUT/install.log" | grep -v '^PYTHONPATH='
elif ls -d /tmp/sgl/sglang-*.dist-info > /dev/null 2>&1; then
  echo "bundle $B not carried in this call: /tmp/sgl holds $(ls -d /tmp/sgl/sglang-*.dist-info | xargs -n1 basename) from an earlier call"
else
  echo "setup: no bundle at $B and nothing installed in /tmp/sgl; fix: carry it in this call (run's carry: [\"$B\"])"
  exit 1
fi
if ls "$B"/py/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/pg "$B"/py/*.whl 2>&1 | grep -v "already exists" || true
fi
[ -d /tmp/pg/junitparser ] || { echo "setup: /tmp/pg lacks perfgate's wheels; fix: carry a bundle with py/ (build.sh makes one)"; exit 1; }
export PYTHONPATH=/tmp/sgl:/tmp/pg:$PWD
python3 -c "import perfgate.plugin, junitparser, tomlkit, sglang; print('perfgate ok; sglang', sglang.__version__)" || exit 1
nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.used,memory.total --format=csv,noheader

# after_run PROFILE_TOML: the records, the profile as the run left it (floors written back), GPU memory,
# processes left, and the server logs packed; call it with pytest's exit status in $rc.
after_run() {
  grep -E "^(PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR)|perfgate:|passed|failed" "$OUT/pytest.log" | cut -c1-400
  echo "pytest exit $rc after $(( $(date +%s) - t0 )) s"
  cp "$1" "$OUT/"
  echo "== GPU memory after the run"
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader
  # live processes only: a zombie (state Z, "<defunct>") is an exit status the container's PID 1 has not
  # reaped; it holds no memory and no GPU, and it is counted on its own line
  ps -eo pid,ppid,pgid,stat,cmd | awk '$4 !~ /^Z/' | grep -E "sglang|perfgate" | grep -v grep \
    || echo "no sglang/perfgate process left"
  local z
  z=$(ps -eo stat,cmd | awk '$1 ~ /^Z/' | grep -c sglang)
  if [ "$z" -gt 0 ]; then echo "($z exited sglang process(es) not reaped by PID 1: zombies)"; fi
  if [ -d "$OUT/logs" ]; then (cd "$OUT" && tar czf logs.tgz logs && rm -rf logs); fi
}

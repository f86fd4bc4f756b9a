# Sourced by the device scripts (bash, no network): install the SGLang bundle and the wheels perfgate
# needs, keep NVLink multicast off, and say what is there. Expects B (bundle dir) and OUT (out dir);
# sets t0 (start time) and PYTHONPATH.
# NVLink multicast stays off on shared hosts (device README): NCCL, PyTorch and NVSHMEM
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT"
t0=$(date +%s)
echo "== install ($(date -u +%T))"
bash "$B/install-on-device.sh" "$B" /tmp/sgl > "$OUT/install.log" 2>&1 || { tail -20 "$OUT/install.log"; exit 1; }
tail -1 "$OUT/install.log"
python3 -m pip install -q --no-index --no-deps --target /tmp/pg "$B"/py/*.whl || exit 1
export PYTHONPATH=/tmp/sgl:/tmp/pg:$PWD
python3 -c "import perfgate.plugin, junitparser, tomlkit, sglang; print('perfgate ok; sglang', sglang.__version__)" || exit 1
nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total --format=csv,noheader

#!/bin/bash
# One pytest session that outlives a device call: a session of many tp-2 server starts takes longer than
# one 10-minute call, and restarting it per call would re-install SGLang, re-warm Triton's cache and
# re-measure the baseline each time. So the first call on a machine installs the bundle and starts
# pytest in its own process session (setsid) on a copy of the tree; each later call on the same (warm)
# machine finds it running and only waits. Every call, when its wait ends, ships what the session has:
# the JUnit report (kept current record by record by perfgate's JUnit guard), the pytest log, the server
# logs and the profile. If the machine was given back in between, the next call starts a new session:
# it says so ("STARTED"), and the records shipped before are what survives of the old one.
#
# Usage: ci/device/session.sh BUNDLE OUT WAIT_S PROFILE [pytest args...]
#   WAIT_S  seconds this call waits before shipping (keep it inside the call's limit, with ~40 s spare)
#   SGL_PATH  the SGLang overlay(s) first on the session's PYTHONPATH (default /tmp/sgl; ci/device/upgrade.sh
#           puts the older release's overlay ahead of it); PG_SESSION_DIR the session's folder (/tmp/pg-session);
#           PG_UPDATE_BASELINES=0 runs without --perfgate-update-baselines
#   STOP=1  at the end of the wait, interrupt the session (Ctrl-C: perfgate stops the server and
#           writes the JUnit with every finished record; the running one becomes "interrupted"). The records so
#           far ship before the interrupt; give the call ~160 s beyond WAIT_S for pytest to stop and ship again
# e.g.  ci/device/session.sh .device-bundle $OUT 540 h200-x2/llama-3.1-8b-dummy-tp2 \
#         -m "baseline or speculative or backends" --perfgate-crosscheck off
set -uo pipefail
B=${1:?bundle dir}; OUT=${2:?out dir}; WAIT_S=${3:?seconds to wait}; PROFILE=${4:?profile}; shift 4
S=${PG_SESSION_DIR:-/tmp/pg-session}
t_call=$(date +%s)
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

alive() { [ -f "$S/pid" ] && kill -0 "$(cat "$S/pid")" 2>/dev/null; }

if alive; then
  echo "== ATTACHED to the running session (started $(cat "$S/started")): $(cat "$S/args")"
elif [ -f "$S/rc" ]; then
  echo "== the session already ended (exit $(cat "$S/rc")); shipping it"
else
  echo "== STARTED a new session ($(date -u +%T))"
  rm -rf "$S"; mkdir -p "$S/out"
  date -u +%T > "$S/started"; printf '%q ' "$PROFILE" "$@" > "$S/args"
  . "$(dirname "$0")/setup.sh"   # install (skipped when /tmp/sgl is there), multicast off, versions
  nvidia-smi topo -m | head -4
  # the session runs on a copy: the next call re-sends the working tree under it
  mkdir -p "$S/repo" && tar --exclude='./.device-bundle*' --exclude=./.git --exclude=./.venv -cf - . | tar -xf - -C "$S/repo"
  cat > "$S/run.sh" <<EOF
cd "$S/repo"
export PYTHONPATH=${SGL_PATH:-/tmp/sgl}:/tmp/pg:$S/repo PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pytest perftests/ --perfgate-profile $(printf '%q ' "$PROFILE") --junitxml="$S/out/junit.xml" \\
  --perfgate-log-dir "$S/out/logs" $( [ "${PG_UPDATE_BASELINES:-1}" = 1 ] && echo --perfgate-update-baselines) -p no:cacheprovider -v -rA $(printf '%q ' "$@") \\
  > "$S/out/pytest.log" 2>&1
echo \$? > "$S/rc"
EOF
  setsid bash "$S/run.sh" < /dev/null > /dev/null 2>&1 &
  echo $! > "$S/pid"
fi

# wait, with a line a minute: records as they end, and what the server is doing
seen=0
while alive && [ $(( $(date +%s) - t_call )) -lt "$WAIT_S" ]; do
  sleep 20
  n=$(grep -cE "(PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR) " "$S/out/pytest.log" 2>/dev/null)
  if [ "${n:-0}" -gt "$seen" ]; then
    grep -E "(PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR) " "$S/out/pytest.log" | sed -n "$((seen + 1)),\$p" \
      | sed -E 's/^perftests\/test_//' | cut -c1-160
    seen=$n
  fi
  if [ $(( ($(date +%s) - t_call) % 60 )) -lt 20 ]; then
    echo "  [$(( $(date +%s) - t_call )) s] $(grep "perfgate:" "$S/out/pytest.log" 2>/dev/null | tail -1 | cut -c1-150)"
  fi
done

if alive && [ "${STOP:-0}" = 1 ]; then
  # what the session has now ships first (the JUnit guard keeps it current record by record): a call that runs
  # out of time while pytest stops its server (teardown, then the GPU's release: up to ~150 s) still returns it
  cp "$S/out/junit.xml" "$OUT/" 2>/dev/null; cp "$S/out/pytest.log" "$OUT/" 2>/dev/null
  echo "== STOP: interrupting the session (SIGINT to pytest); its records so far are in OUT already"
  pkill -INT -f "python3 -m pytest perftests/" ; for _ in $(seq 75); do alive || break; sleep 2; done
fi

if alive; then
  echo "== still running after $(( $(date +%s) - t_call )) s: shipping what it has; call again to go on"
else
  rc=$(cat "$S/rc" 2>/dev/null || echo "?")
  echo "== session ended: pytest exit $rc"
  grep -E "^(PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR)|perfgate:|passed|failed" "$S/out/pytest.log" | cut -c1-300 | tail -60
  echo "== GPU memory after the session"
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader
  ps -eo pid,ppid,pgid,stat,cmd | awk '$4 !~ /^Z/' | grep -E "sglang\.launch_server|sglang::|-m pytest perftests" | grep -v grep \
    || echo "no sglang/perfgate process left"
fi
cp "$S/out/junit.xml" "$OUT/" 2>/dev/null; cp "$S/out/pytest.log" "$OUT/" 2>/dev/null
p=$(python3 -c "import sys; a=sys.argv[1]; print(a if a.endswith('.toml') else 'baselines/'+a+'.toml')" "$PROFILE")
cp "$S/repo/$p" "$OUT/" 2>/dev/null
[ -d "$S/out/logs" ] && tar czf "$OUT/logs.tgz" -C "$S/out" logs
ls -la "$OUT"

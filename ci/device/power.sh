#!/bin/bash
# Paired runs against real, known slowdowns on one GPU (docs/gate.md "Deciding"): the current stack against a
# candidate arm that is (a) identical, (b) slowed by a GPU-side delay per decode step (ci/device/inject), one
# pytest session each, one after another in the background (setsid) so that they outlive a 10-minute device
# call; each later call on the same warm machine attaches and waits, like session.sh. Every session starts with
# one start per arm and adds interleaved start pairs while the paired judge is undecided
# (--perfgate-max-starts, --perfgate-max-time).
# Usage: ci/device/power.sh BUNDLE OUT WAIT_S [DELAY ...]   (one session per DELAY, in order)
#   DELAY: N   a GPU-side delay of N microseconds per decode step (PERFGATE_INJECT_GPU_US); 0 = A/A
#          pMS a host-side delay of MS milliseconds before each request's prefill (PERFGATE_INJECT_PREFILL_MS):
#              a TTFT-only slowdown (issue 40: p2.8 is ~10 % of an H200's ~28 ms batch-1 TTFT probe)
#          gUS a GPU-side prefill slowdown: a spin of US microseconds before every prefill forward, inside its step span
#              (PERFGATE_INJECT_EXTEND_GPU_US; issue 53 (a): lands in ttft_part.prefill_gpu_ms)
#          hMS a host-side prefill slowdown: a sleep of MS milliseconds at the start of every prefill forward
#              (PERFGATE_INJECT_EXTEND_HOST_MS; issue 53 (b): lands in ttft_part.prefill_host_ms)
#          cCPUS the same stack with its server pinned to CPUS (--perfgate-candidate cpus=CPUS; 3, 2-5, 0;2):
#              pinning judged against unpinned (issue 53 item 1's control)
#   default: 600 100 0  (about 12 %, 2 % and nothing on an H200's ~4.75 ms batch-1 decode step)
#   DELAY:N    at most N start pairs for this session (else MAX_STARTS, default 6)
#   DELAY:N:fix   N start pairs however early it is decided (--perfgate-starts N): an A/A that measures the box's noise
#   DELAY[:N]:co  both arms' servers side by side (--perfgate-co-resident ${CO_RESIDENT:-0.4}, issue 40 item 6);
#              CO_RESIDENT=F makes every session side by side
#   the latency issue's runs: p2.8:4 0:3 p2.8:3:co   (SELECT_K=baseline by default: the -k of the stack-pair records;
#   MAX_TIME: seconds of added start pairs per session, default 600; SERVER_CPUS=auto or 2-5: every server pinned there;
#   NOISE_FROM=JUNIT: judged against the noise an earlier paired run measured on this box, e.g. $S/out/paired-0.xml
#   (an A/A of this session: its sessions run in order, so 0:9:fix p2.8:4 with NOISE_FROM=/tmp/pg-power/out/paired-0-9-fix.xml
#   measures the box first; a session that starts before the file exists runs on the priors))
set -uo pipefail
B=${1:?bundle dir}; OUT=${2:?out dir}; WAIT_S=${3:?seconds to wait}; shift 3
US=${*:-600 100 0}
S=/tmp/pg-power
PROFILE=${PROFILE:-h200-x1/llama-3.1-8b-dummy}
t_call=$(date +%s)
mkdir -p "$OUT"
alive() { [ -f "$S/pid" ] && kill -0 "$(cat "$S/pid")" 2>/dev/null; }
if alive; then
  echo "== ATTACHED to the running power session (started $(cat "$S/started"))"
elif [ -f "$S/rc" ] && [ "$(cat "$S/delays" 2>/dev/null)" = "$US" ]; then
  echo "== the power session already ended; shipping it"
else
  # a session that ended with other delays is kept nowhere but $OUT of the call that shipped it: a new one replaces it
  [ -f "$S/rc" ] && echo "== the ended session ($(cat "$S/delays" 2>/dev/null)) is replaced by a new one"
  echo "== STARTED the power session ($(date -u +%T)): delays $US us"
  rm -rf "$S"; mkdir -p "$S/out"; date -u +%T > "$S/started"; echo "$US" > "$S/delays"
  . "$(dirname "$0")/setup.sh"
  mkdir -p "$S/repo" && tar --exclude=./.device-bundle --exclude=./.git --exclude=./.venv -cf - . | tar -xf - -C "$S/repo"
  {
    echo "cd $S/repo; export PYTHONPATH=/tmp/sgl:/tmp/pg:$S/repo PYTHONUNBUFFERED=1"
    echo "export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1"
    for tok in $US; do
      IFS=: read -r us max co <<< "$tok"; case $max in co) co=co; max= ;; esac
      fixed=; [ "$co" = fix ] && { fixed=$max; co=; }
      tag=${tok//:/-}; cores=${CO_RESIDENT:-}; [ "$co" = co ] && cores=${CO_RESIDENT:-0.4}
      case $us in
        p*) var=PERFGATE_INJECT_PREFILL_MS; val=${us#p} ;;
        g*) var=PERFGATE_INJECT_EXTEND_GPU_US; val=${us#g} ;;
        h*) var=PERFGATE_INJECT_EXTEND_HOST_MS; val=${us#h} ;;
        c*) var=; val=${us#c} ;;
        *) var=PERFGATE_INJECT_GPU_US; val=$us ;;
      esac
      cand="env.PYTHONPATH=$S/repo/ci/device/inject:/tmp/sgl:/tmp/pg:$S/repo,env.$var=$val"
      [ -z "$var" ] && cand="cpus=$val"   # the same stack, its server pinned there
      echo "python3 -m pytest perftests/ -m stack_pair -k ${SELECT_K:-baseline} --perfgate-profile $PROFILE --perfgate-starts ${fixed:-1} \
--perfgate-max-starts ${max:-${MAX_STARTS:-6}} --perfgate-max-time ${MAX_TIME:-600} --perfgate-candidate '$cand' \
${cores:+--perfgate-co-resident $cores }${SERVER_CPUS:+--perfgate-server-cpus $SERVER_CPUS }${NOISE_FROM:+\$([ -f $NOISE_FROM ] && echo --perfgate-noise-from $NOISE_FROM) }--perfgate-crosscheck off --junitxml=$S/out/paired-$tag.xml --perfgate-log-dir $S/out/logs-$tag -p no:cacheprovider \
-rA > $S/out/pytest-$tag.log 2>&1; echo \$? > $S/out/rc-$tag"
    done
    echo "echo done > $S/rc"
  } > "$S/run.sh"
  setsid bash "$S/run.sh" < /dev/null > /dev/null 2>&1 &
  echo $! > "$S/pid"
  # where each SGLang process's threads ran, their siblings and clocks (issue 53 item 1), beside the session
  setsid python3 "$(dirname "$0")/proc_cpus.py" "$S/out/proc-cpus.jsonl" 2 < /dev/null > /dev/null 2>&1 &
  echo $! > "$S/sampler"
fi
while alive && [ $(( $(date +%s) - t_call )) -lt "$WAIT_S" ]; do
  sleep 30
  echo "  [$(( $(date +%s) - t_call )) s] $(cat "$S"/out/pytest-*.log 2>/dev/null | grep -E "perfgate:|PASSED|FAILED|SKIPPED" | tail -1 | cut -c1-200)"
done
alive && echo "== still running: shipping what it has; call again to go on" || {
  echo "== power session ended"; [ -f "$S/sampler" ] && kill "$(cat "$S/sampler")" 2>/dev/null; }
if [ -f "$S/out/proc-cpus.jsonl" ]; then
  python3 "$(dirname "$0")/proc_cpus.py" --summary "$S/out/proc-cpus.jsonl" > "$OUT/proc-cpus-summary.txt" 2>&1
  tail -12 "$OUT/proc-cpus-summary.txt"; gzip -c "$S/out/proc-cpus.jsonl" > "$OUT/proc-cpus.jsonl.gz"
fi
for f in "$S"/out/pytest-*.log; do
  [ -f "$f" ] || continue
  r=${f/pytest-/rc-}; echo "== $(basename "$f") (exit $(cat "${r%.log}" 2>/dev/null || echo running))"
  grep -E "undecided after|stack-pair baseline|passed|failed|skipped" "$f" | cut -c1-700 | tail -6
done
nvidia-smi --query-gpu=uuid,memory.used --format=csv,noheader
ps -eo pid,stat,cmd | awk '$2 !~ /^Z/' | grep -E "sglang\.launch_server|sglang::|-m pytest perftests" | grep -v grep \
  || echo "no sglang/perfgate process left"
# a call's files: per delay its JUnit and one tarball of its pytest log and server logs; the CPU samples from a call: per delay its JUnit and one tarball of its pytest log and server logs
for tok in $US; do
  tag=${tok//:/-}; cp "$S/out/paired-$tag.xml" "$OUT/" 2>/dev/null
  (cd "$S/out" && ls -d "pytest-$tag.log" "logs-$tag" 2>/dev/null | xargs -r tar czf "$OUT/power-$tag.tgz")
done
ls -la "$OUT"

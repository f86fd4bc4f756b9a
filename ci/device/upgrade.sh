#!/bin/bash
# A real stack upgrade, paired on one machine (issue 31): current = an older SGLang release (its overlay bundle,
# ahead of the newer release's on PYTHONPATH), candidate = the newer release (`--perfgate-candidate
# env.PYTHONPATH=...`), server starts interleaved, one stack-pair record per mode of the profile, each arm
# fingerprinted from its own environment (candidate.stack.*) and its flags checked by its own release's parser.
#
# Usage: ci/device/upgrade.sh BUNDLE_OLD BUNDLE_NEW OUT [WAIT_S [pytest args...]]
#   BUNDLE_OLD  e.g. .device-bundle-0.5.16 (build.sh .device-bundle-0.5.16 0.5.16: an overlay on 0.5.17)
#   BUNDLE_NEW  e.g. .device-bundle        (build.sh .device-bundle: the full 0.5.17 bundle)
#   WAIT_S      seconds this call waits on the session before shipping (default 520; keep ~40 s of the call spare)
#   STARTS=2    server starts per arm and mode (--perfgate-starts); PROFILE=h200-x1/llama-3.1-8b-dummy
#   MAX_STARTS  the most starts per arm and mode while a record is undecided (--perfgate-max-starts; default
#               STARTS: no start pair added, so the device time is known: 3 modes x 2 arms x STARTS starts)
#   MAX_TIME    seconds the added start pairs may take (--perfgate-max-time; default: no limit but MAX_STARTS)
#   SELECT="-m stack_pair"  which records (e.g. SELECT='-m stack_pair -k baseline' for the baseline alone)
#   STOP=1      interrupt the session at the end of this call's wait (ci/device/session.sh)
#   GATE=reports  instead of the paired run: the matrix (SELECT, e.g. '-m "baseline or backends"') on the older
#               release, then on the newer, each a session of its own, then `perfgate gate old.xml new.xml`
#               (OUT/gate.txt; the call's exit is the gate's once both ran); run 2026-12-04, docs/gate.md
#   GATE=bisect  instead of the paired run: `perfgate bisect` from the older release to the newer (issue 38
#               item 4; docs/bisect.md) with a known slowdown planted in the candidate's own copy of one package
#               that differs (PLANT=flashinfer, PLANT_US=300: flashinfer/__init__.py, which SGLang's sampler imports
#               in the scheduler process, spins the GPU PLANT_US microseconds before every CUDA graph replay, as
#               ci/device/inject does; PLANT= plants nothing); BISECT_ARGS more `perfgate bisect` options
#               (default --mode baseline --starts 1 --max-starts 4); OUT/bisect.txt, OUT/bisect.xml, OUT/steps.tgz
#
# The two bundles do not fit one call together (64 MiB with the working tree): carry each in its own call,
# chained on the same warm machine, with the same command line. A call installs the bundles it carries
# (recorded in /tmp/pg-bundles), says which one is still to come, and exits 3 until both are in; the call that
# completes the pair starts the pytest session (ci/device/session.sh, detached), and every later call (carry
# nothing) attaches, waits and ships OUT/junit.xml, pytest.log, logs.tgz and upgrade-summary.txt:
#   call 1: carry [".device-bundle"]         -> installs 0.5.17 into /tmp/sgl          (exit 3: 0.5.16 to come)
#   call 2: carry [".device-bundle-0.5.16"]  -> installs 0.5.16 into /tmp/sgl-0.5.16, starts the session
#   call 3..: carry []                       -> attaches, waits, ships; the records say when it is done
# The profile's floors are not written back (PG_UPDATE_BASELINES=0): the current arm is the older release.
set -uo pipefail
OLD=${1:?older release bundle dir}; NEW=${2:?newer release bundle dir}; OUT=${3:?out dir}; WAIT_S=${4:-520}
shift $(( $# < 4 ? $# : 4 ))
here=$(cd "$(dirname "$0")" && pwd)
STARTS=${STARTS:-2}; MAX_STARTS=${MAX_STARTS:-$STARTS}; PROFILE=${PROFILE:-h200-x1/llama-3.1-8b-dummy}; SELECT=${SELECT:--m stack_pair}
# SELECT as the shell would read it (quotes kept: -m "baseline or backends" is two arguments, not four)
eval "select=($SELECT)" || { echo "upgrade: SELECT ($SELECT) is not a shell word list; fix: quote it as on a command line"; exit 2; }
REG=/tmp/pg-bundles
mkdir -p "$OUT" "$REG"
t_call=$(date +%s)
echo "== upgrade: current = $OLD, candidate = $NEW ($(date -u +%T))"

# a bundle's record: REG/<its folder's name> holds RELEASE= and SGL_PATH= (what goes on PYTHONPATH)
key() { basename "$1"; }
rel_of() { (RELEASE=0.5.17; OVERLAY_ON=""; [ -f "$1/bundle.env" ] && . "$1/bundle.env"; echo "$RELEASE $OVERLAY_ON"); }

install_py() {  # the wheels perfgate needs there (every bundle carries them) into /tmp/pg, as setup.sh does
  if ls "$1"/py/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/pg "$1"/py/*.whl 2>&1 | grep -v "already exists"
  fi
  return 0
}

install_new() {  # the full bundle into /tmp/sgl
  local b=$1 r
  if [ -f "$b/install-on-device.sh" ]; then
    read -r r base <<< "$(rel_of "$b")"
    if [ -n "$base" ]; then
      echo "upgrade: BUNDLE_NEW $b is an overlay on $base; fix: pass the full bundle (build.sh OUTDIR $r)"; return 1
    fi
    bash "$b/install-on-device.sh" "$b" /tmp/sgl > "$OUT/install-new.log" 2>&1 || { tail -20 "$OUT/install-new.log"; return 1; }
    grep -v '^PYTHONPATH=' "$OUT/install-new.log" | tail -2
    install_py "$b"
    printf 'RELEASE=%s\nSGL_PATH=/tmp/sgl\n' "$r" > "$REG/$(key "$b")"
  fi
}

install_old() {  # the older release into /tmp/sgl-RELEASE (an overlay: with /tmp/sgl behind it)
  local b=$1 r base
  [ -f "$b/install-on-device.sh" ] || return 0
  read -r r base <<< "$(rel_of "$b")"
  if [ -n "$base" ]; then
    local have
    have=$(. "$REG/$(key "$NEW")" 2>/dev/null && echo "$RELEASE")
    if [ "$have" != "$base" ]; then
      echo "upgrade: $b is an overlay on SGLang $base, but BUNDLE_NEW ($NEW) is ${have:-not installed yet};" \
        "fix: install the $base bundle first (carry $NEW in an earlier call), or build the old release's full bundle"
      return 1
    fi
  fi
  bash "$b/install-on-device.sh" "$b" "/tmp/sgl-$r" ${base:+/tmp/sgl} > "$OUT/install-old.log" 2>&1 \
    || { tail -20 "$OUT/install-old.log"; return 1; }
  grep -v '^PYTHONPATH=' "$OUT/install-old.log" | tail -2
  install_py "$b"
  printf 'RELEASE=%s\nSGL_PATH=%s\n' "$r" "$(sed -n 's/^PYTHONPATH=//p' "$OUT/install-old.log" | tail -1)" > "$REG/$(key "$b")"
}

# a call that finds a session measuring leaves the installs alone: checking them imports SGLang (~1.4 CPU cores for
# seconds), which the session's host watch saw as a busy host and left two start pairs out (2026-12-05)
running=""
for f in /tmp/pg-upgrade-*/pid; do [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && running=$(dirname "$f"); done
if [ -n "$running" ] && [ -f "$REG/$(key "$NEW")" ] && [ -f "$REG/$(key "$OLD")" ]; then
  echo "== $running is measuring: the installs are not checked again (their imports would disturb it)"
else
  install_new "$NEW" || exit 1
  install_old "$OLD" || exit 1
fi
missing=()
for b in "$NEW" "$OLD"; do [ -f "$REG/$(key "$b")" ] || missing+=("$b"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== not yet installed on this machine: ${missing[*]}"
  echo "   next: the same command in a call that carries it (run's carry: [\"${missing[0]}\"]), chained on this"
  echo "   warm machine (a machine given back loses /tmp: then start again with both calls)"
  exit 3
fi
# shellcheck disable=SC1090
NEW_REL=$(. "$REG/$(key "$NEW")"; echo "$RELEASE"); NEW_PATH=$(. "$REG/$(key "$NEW")"; echo "$SGL_PATH")
# shellcheck disable=SC1090
OLD_REL=$(. "$REG/$(key "$OLD")"; echo "$RELEASE"); OLD_PATH=$(. "$REG/$(key "$OLD")"; echo "$SGL_PATH")
S=/tmp/pg-upgrade-$OLD_REL-$NEW_REL
CAND="env.PYTHONPATH=$NEW_PATH:/tmp/pg:$S/repo"
case "$OLD_PATH$NEW_PATH$S" in *,*|*' '*)
  echo "upgrade: a path holds a comma or a space ($OLD_PATH, $NEW_PATH, $S): --perfgate-candidate cannot carry it"; exit 1;;
esac

if [ ! -f "$S/pid" ] && [ ! -f "$S-old/pid" ]; then
  # once, before the session starts: both arms' stacks as perfgate fingerprints them (perfgate.stack)
  echo "== the two arms' stacks, each probed in its own environment"
  for arm in "current:$OLD_PATH" "candidate:$NEW_PATH"; do
    PYTHONPATH=${arm#*:}:/tmp/pg:$PWD python3 -c "
import sys
from perfgate.stack import detect_stack_in
s = detect_stack_in()
print(f'  {sys.argv[1]:9s} sglang {s.sglang}, kernel {s.sgl_kernel}, flashinfer {s.flashinfer}, torch {s.torch}, '
      f'nccl {s.nccl}, cuda {s.cuda}  (PYTHONPATH={sys.argv[2]})')
" "${arm%%:*}" "${arm#*:}" || { echo "upgrade: the stack probe failed for the ${arm%%:*} arm"; exit 1; }
  done | tee "$OUT/arms.txt"
  got_old=$(sed -n 's/^  current *sglang \([^,]*\),.*/\1/p' "$OUT/arms.txt")
  got_new=$(sed -n 's/^  candidate *sglang \([^,]*\),.*/\1/p' "$OUT/arms.txt")
  if [ "$got_old" != "$OLD_REL" ] || [ "$got_new" != "$NEW_REL" ]; then
    echo "upgrade: the arms import sglang $got_old / $got_new, expected $OLD_REL / $NEW_REL; fix: check the overlays' order"
    exit 1
  fi
fi

if [ "${GATE:-paired}" = reports ]; then
  # the matrix on each release, one after the other on this GPU (the older first), then `perfgate gate` old -> new:
  # which records regress, improve, unblock (xfail -> pass) or newly break. Each release's run is a session of its
  # own (session.sh, its own folder), so it outlives a call; a call advances whichever is due and ships both.
  for arm in old new; do
    dir=$S-$arm; path=$([ $arm = old ] && echo "$OLD_PATH" || echo "$NEW_PATH")
    left=$(( WAIT_S - ($(date +%s) - t_call) ))
    if [ ! -f "$dir/rc" ] && [ "$left" -gt 30 ]; then
      echo "== $arm release ($([ $arm = old ] && echo "$OLD_REL" || echo "$NEW_REL")): $PROFILE, $SELECT, session $dir"
      mkdir -p "$OUT/$arm"
      # shellcheck disable=SC2086
      SGL_PATH=$path PG_SESSION_DIR=$dir PG_UPDATE_BASELINES=0 bash "$here/session.sh" "$NEW" "$OUT/$arm" "$left" \
        "$PROFILE" "${select[@]}" --perfgate-crosscheck off "$@" | grep -v "^-r\|^total\|^d"
    fi
    [ -f "$dir/rc" ] || { echo "== the $arm release's matrix is still running: call again"; exit 0; }
    cp "$dir/out/junit.xml" "$OUT/$arm.xml" 2>/dev/null
  done
  rm -rf "$OUT/old" "$OUT/new"  # their files are in old.xml / new.xml and the sessions' folders (8 files a call)
  PYTHONPATH=/tmp/pg:$S-new/repo python3 -m perfgate.cli gate "$OUT/old.xml" "$OUT/new.xml" > "$OUT/gate.txt" 2>&1
  rc=$?
  echo "== perfgate gate old.xml new.xml: exit $rc"; head -60 "$OUT/gate.txt"
  tar czf "$OUT/logs.tgz" -C /tmp "$(basename "$S")-old/out/logs" "$(basename "$S")-new/out/logs" 2>/dev/null
  exit $rc
fi

if [ "${GATE:-paired}" = bisect ]; then
  D=$S-bisect
  plant_in=$NEW_PATH/${PLANT-flashinfer}/__init__.py
  if [ -n "${PLANT-flashinfer}" ] && ! grep -q "perfgate plant" "$plant_in" 2>/dev/null; then
    [ -f "$plant_in" ] || { echo "upgrade: PLANT=$PLANT: no $plant_in; fix: name a package folder of $NEW_PATH"; exit 1; }
    cat >> "$plant_in" <<EOF

# perfgate plant (ci/device/upgrade.sh GATE=bisect): a known slowdown in this copy of the package, issue 38 item 4
import torch as _pg_torch
if not getattr(_pg_torch.cuda.CUDAGraph.replay, "perfgate_plant", False):
    _pg_replay = _pg_torch.cuda.CUDAGraph.replay
    def _pg_slow_replay(self):
        _pg_torch.cuda._sleep(int(${PLANT_US:-300} * 1980))
        _pg_replay(self)
    _pg_slow_replay.perfgate_plant = True
    _pg_torch.cuda.CUDAGraph.replay = _pg_slow_replay
EOF
    echo "== planted: ${PLANT_US:-300} us a CUDA graph replay in $plant_in (the candidate's copy only)"
  fi
  if [ ! -f "$D/pid" ]; then
    rm -rf "$D"; mkdir -p "$D/repo"; date -u +%T > "$D/started"
    tar --exclude='./.device-bundle*' --exclude=./.git --exclude=./.venv -cf - . | tar -xf - -C "$D/repo"
    cur_sites=$(echo "$OLD_PATH" | tr ':' '\n' | sed 's/^/--current-site /' | tr '\n' ' ')
    cat > "$D/run.sh" <<EOF
cd $D/repo; export PYTHONPATH=$OLD_PATH:/tmp/pg:$D/repo PYTHONUNBUFFERED=1
python3 -m perfgate.cli bisect --profile baselines/$PROFILE.toml $cur_sites --candidate-site $NEW_PATH \
  --out $D/out ${BISECT_ARGS:---mode baseline --starts 1 --max-starts 4} --pytest-args "--perfgate-crosscheck off" \
  > $D/bisect.txt 2>&1; echo \$? > $D/rc
EOF
    setsid bash "$D/run.sh" < /dev/null > /dev/null 2>&1 &
    echo $! > "$D/pid"
    echo "== STARTED perfgate bisect ($(date -u +%T)):"; sed -n 2,3p "$D/run.sh" | cut -c1-400
  else
    echo "== ATTACHED to the bisect started $(cat "$D/started")"
  fi
  while [ ! -f "$D/rc" ] && [ $(( $(date +%s) - t_call )) -lt "$WAIT_S" ]; do
    sleep 30; echo "  [$(( $(date +%s) - t_call )) s] $(grep -E "^step|perfgate bisect" "$D/bisect.txt" 2>/dev/null | tail -1 | cut -c1-200)"
  done
  cp "$D/bisect.txt" "$OUT/" 2>/dev/null
  (cd "$D" && tar czf "$OUT/steps.tgz" out 2>/dev/null)
  tail -40 "$OUT/bisect.txt" 2>/dev/null
  [ -f "$D/rc" ] || { echo "== the bisect is still running: call again (carry nothing)"; exit 0; }
  echo "== perfgate bisect: exit $(cat "$D/rc")"; exit "$(cat "$D/rc")"
fi

echo "== session $S: $PROFILE, $SELECT, $STARTS start(s) per arm and mode (at most $MAX_STARTS while undecided$([ -n "${MAX_TIME:-}" ] && echo ", added ones within $MAX_TIME s")), candidate $CAND"
# shellcheck disable=SC2086
SGL_PATH=$OLD_PATH PG_SESSION_DIR=$S PG_UPDATE_BASELINES=0 \
  bash "$here/session.sh" "$NEW" "$OUT" $(( WAIT_S - ($(date +%s) - t_call) )) "$PROFILE" "${select[@]}" \
  --perfgate-starts "$STARTS" --perfgate-max-starts "$MAX_STARTS" ${MAX_TIME:+--perfgate-max-time "$MAX_TIME"} \
  --perfgate-candidate "$CAND" --perfgate-crosscheck off "$@"
rc=$?
# a call brings back at most 8 files: the set-up's logs go in one archive
( cd "$OUT" && files=$(ls install*.log arms.txt 2>/dev/null) && [ -n "$files" ] \
  && tar czf setup-logs.tgz $files && rm -f $files )  # shellcheck disable=SC2086
if [ -f "$OUT/junit.xml" ]; then
  python3 - "$OUT/junit.xml" <<'EOF' | tee "$OUT/upgrade-summary.txt"
import re, sys, xml.etree.ElementTree as ET
keys = ("stack.sglang", "stack.sgl_kernel", "stack.flashinfer", "pair_ratio", "pair_ci_low", "pair_ci_high",
        "pair_n", "pair_decision", "tok_s", "candidate.tok_s", "outcome", "category")
print("== the records so far (" + sys.argv[1] + ")")
for tc in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    props = {p.get("name"): p.get("value") for p in tc.iter("property")}
    cand = [k for k in props if k.startswith("candidate.stack.")]  # the pieces where the candidate differs
    shown = ", ".join(f"{k}={props[k]}" for k in (*keys[:3], *cand, *keys[3:]) if k in props)
    print(f"  {tc.get('name')}: {shown or 'no properties'}")
    # every metric the pair was judged on (pair.<metric>.ratio / ci_low / ci_high / decision)
    # (a TTFT leg's name holds a dot: pair.ttft_part.prefill_ms.ratio), then the order of each start pair
    for m in sorted({k[5:-6] for k in props if re.fullmatch(r"pair\.[a-z0-9_.]+\.ratio", k)}):
        g = lambda f: props.get(f"pair.{m}.{f}", "?")  # noqa: E731
        print(f"      {m:28s} {g('ratio')} [{g('ci_low')}, {g('ci_high')}] {g('decision')}")
    if "pair_order" in props:
        print(f"      pair order (AB: the current arm started first, BA: the candidate): {props['pair_order']}")
EOF
fi
exit $rc

#!/usr/bin/env bash
# ci/install-sglang-parsers.sh DEST — the argument parsers of real SGLang releases, no GPU.
#
# perfgate checks every variant's flags against SGLang's own ServerArgs parser before any launch
# (perfgate/flagcheck/). This installs, into the *current* Python environment, torch's CPU build
# and the few packages `sglang.srt.server_args` imports, and each SGLang wheel WITHOUT its
# dependencies into DEST/sglang-X (pip --target). Afterwards, for each X:
#
#     PYTHONPATH=DEST/sglang-X python -c "from sglang.srt.server_args import ServerArgs"
#     python -m perfgate.flagcheck.worker --sglang-path DEST/sglang-X --json argvs.json
#
# Versions: 0.5.16 (the current arm of the H200 upgrade run, ci/device/upgrade.sh), 0.5.17 (what runs on the
# H200 device) and 0.5.23 (the latest); override with PERFGATE_SGLANG_PARSER_VERSIONS="0.5.17 0.5.23".
# Interpreter: $PYTHON (default: python). perfgate checks a stack-pair arm whose own environment cannot parse
# against DEST/sglang-X of its release (PERFGATE_SGLANG_PARSERS=DEST; perfgate.flagcheck.installed_parser).
# `--cuda-graph-max-bs` is a deprecated alias in 0.5.17 and ambiguous (exit 2) in 0.5.23: the
# drift a stack-upgrade gate must catch before GPU time is spent.
#
# The dependency set was found empirically (import, read the ModuleNotFoundError, add, repeat):
#   0.5.23: torch, triton, msgspec, numpy, orjson, psutil, pybase64, requests, packaging,
#           pillow, starlette, pydantic(-core), pyzmq; its sglang/__init__ adds aiohttp, tqdm, IPython.
#   0.5.17: also its model configs (transformers 5.12.1, the version it pins), the OpenAI
#           protocol and function-call parsers (openai, partial-json-parser, xgrammar), dill,
#           sentencepiece, and `torchvision.io` at module level. PyPI has no CPU torchvision for
#           torch 2.13 (its wheel fails: "operator torchvision::nms does not exist"), so a
#           placeholder `torchvision` package is written next to that sglang (DEST/sglang-X/torchvision):
#           names import, nothing runs. Parsing needs nothing more.
# Idempotent: a version already in DEST is not downloaded again. Takes ~3 min on 2 cores with a
# warm pip cache (torch comes from a local wheel; triton is the largest download, ~290 MB).
set -euo pipefail

if [[ $# -ne 1 || "$1" == -* ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
  exit 2
fi
DEST=$1
PY=${PYTHON:-python}
VERSIONS=${PERFGATE_SGLANG_PARSER_VERSIONS:-"0.5.16 0.5.17 0.5.23"}
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
t0=$(date +%s)
say() { printf '[install-sglang-parsers %3ss] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }
pipi() { "$PY" -m pip install -q --disable-pip-version-check "$@"; }

say "python: $("$PY" -c 'import sys; print(sys.executable, sys.version.split()[0])')"

# torch: the CPU build (a local wheel on this CI machine). Never let pip pick a CUDA build.
if ! "$PY" -c 'import importlib.metadata as m, sys; sys.exit(0 if m.version("torch").startswith("2.13.0") else 1)' 2>/dev/null; then
  say "torch==2.13.0 (CPU build)"
  pipi "torch==2.13.0"
fi

say "what sglang.srt.server_args imports"
# Pinned where SGLang's import is sensitive to the version; the rest only if missing (no upgrades
# of what the environment already has).
pipi "torch==2.13.0" "triton==3.9.0" "transformers==5.12.1" "openai==2.6.1" "xgrammar==0.2.1" \
  msgspec numpy orjson psutil pybase64 requests packaging pillow starlette pydantic pyzmq \
  aiohttp tqdm ipython partial-json-parser dill sentencepiece

write_torchvision_stub() {  # $1 = DEST/sglang-X
  mkdir -p "$1/torchvision"
  cat > "$1/torchvision/__init__.py" <<'PYEOF'
"""perfgate's placeholder for torchvision, for parsing SGLang's ServerArgs on a CPU-only box.

PyPI has no CPU build of torchvision for torch 2.13 (its wheel fails with "operator
torchvision::nms does not exist"), yet SGLang 0.5.17 imports ``torchvision.io`` at module
level. Every name here is a placeholder: importing works, calling anything raises.
Written by perfgate's ci/install-sglang-parsers.sh next to an SGLang used only for its parser.
"""

import importlib.abc
import importlib.machinery
import sys
import types

__version__ = "0.0.0+perfgate.stub"
PERFGATE_STUB = True


class _Placeholder(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(cls.__module__, f"{cls.__qualname__}.{name}")

    def __call__(cls, *args, **kwargs):
        raise RuntimeError(f"{cls.__module__}.{cls.__qualname__}: torchvision is a perfgate placeholder here")

    def __getitem__(cls, item):
        return cls

    def __or__(cls, other):
        return cls

    __ror__ = __or__


def _placeholder(module, qualname):
    return _Placeholder(qualname.rpartition(".")[2], (), {"__qualname__": qualname, "__module__": module})


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _placeholder(self.__name__, name)
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        module.__file__ = __file__
        module.__version__ = __version__
        return module

    def exec_module(self, module):
        pass


sys.meta_path.append(_Finder())
sys.modules[__name__].__class__ = _StubModule  # top-level names fall through to placeholders
PYEOF
}

for v in $VERSIONS; do
  target="$DEST/sglang-$v"
  if [[ -f "$target/sglang/srt/server_args.py" ]] && ls "$target"/sglang-"$v".dist-info >/dev/null 2>&1; then
    say "sglang $v: already in $target"
  else
    say "sglang $v: wheel without dependencies -> $target"
    rm -rf "$target"
    pipi --no-deps --no-compile --target "$target" "sglang==$v"
    rm -rf "$target/bin"
  fi
  if ! "$PY" -c 'import torchvision' 2>/dev/null; then
    write_torchvision_stub "$target"
  fi
done

# Both versions must import ServerArgs with only their folder on PYTHONPATH (sglang/__init__ included).
for v in $VERSIONS; do
  say "check: PYTHONPATH=$DEST/sglang-$v import ServerArgs"
  PYTHONPATH="$DEST/sglang-$v" PYTHONWARNINGS=ignore "$PY" - "$v" <<'PYEOF'
import argparse, sys, time, warnings
warnings.simplefilter("ignore")
t = time.time()
import sglang
from sglang.srt.server_args import ServerArgs
p = argparse.ArgumentParser()
ServerArgs.add_cli_args(p)
want = sys.argv[1]
if sglang.__version__ != want:
    sys.exit(f"expected sglang {want}, imported {sglang.__version__} from {sglang.__file__}")
print(f"  sglang {sglang.__version__}: {len(p._actions)} arguments, import {time.time() - t:.1f} s")
PYEOF
done
say "done: $(du -sh "$DEST" | cut -f1) in $DEST"

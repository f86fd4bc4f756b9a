"""Attach mode (``--perfgate-url``): which of the session's configs is the running server?

A running server says what it is in ``GET /server_info``: its resolved ServerArgs (every flag's
value), the ``model_path`` and, in SGLang 0.5.x, the ``launch_command``. A config *matches* when

- every flag it sets has that value on the server (``_same``),
- the server's launch command sets no flag that another config of the session controls and this
  one leaves at its default (a server started with ``--disable-custom-all-reduce`` is not the
  baseline, although the baseline never mentions that flag),
- the engine agrees (a simulated profile is not measured on a real SGLang, nor the reverse).

Values are compared by meaning: a flag is known by any of its option strings (``--tp-size`` /
``--tensor-parallel-size``: :func:`field_of`, from the one table of SGLang's flags, :data:`perfgate.sim.args.FLAGS`),
and a path by the file it names (:func:`same_path`: a simulator started with ``--sim-hardware fixtures/sim/x.toml``
runs the profile's ``/abs/fixtures/sim/x.toml``).

What attach mode cannot verify: **environment variables**. ``NCCL_ALGO=Tree``,
``SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1`` and the like are not in ``/server_info``, so a baseline and
a variant that differ only in the environment both "match" the same server. perfgate then takes
the server to be the config with the least environment (normally the baseline), skips the others
with the reason, and records on every attached record what it could not check
(``attach_unverified``); the terminal summary repeats it as a warning.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from perfgate.client import get_json
from perfgate.profiles.config import ServerConfig

#: flags perfgate sets per launch (or that name the model): never a controlled difference
_PER_LAUNCH = frozenset({"model-path", "model", "host", "port", "tokenizer-path"})


@dataclass(frozen=True, kw_only=True)
class AttachCheck:
    """How one config relates to the attached server."""

    runs: bool
    reason: str = ""  # why it is skipped (empty when it runs)
    unverified: tuple[str, ...] = ()  # settings /server_info cannot show, as "env:NAME=value|<unset>"


def field_of(flag: str) -> str:
    """The ServerArgs field (``/server_info`` key) of a flag written without dashes, under any of its aliases."""
    from perfgate.sim.args import dest_of

    return dest_of(flag)


def same_path(want: object, got: object) -> bool:
    """Two spellings of one file or directory: equal, equal once resolved, the same file on disk, or ``got`` a
    relative path (resolved against the server's working directory, which is not known here) that ``want`` ends
    with, component by component."""
    a, b = str(want).rstrip("/"), str(got).rstrip("/")
    if a == b:
        return True
    from pathlib import Path

    pa, pb = Path(a), Path(b)
    try:
        if pa.resolve() == pb.resolve() or (pa.exists() and pb.exists() and os.path.samefile(pa, pb)):
            return True
    except OSError:
        return False
    if not pb.is_absolute() and pb.parts and pb.parts[0] != "..":
        tail = Path(*[x for x in pb.parts if x != "."]).parts
        return len(tail) > 0 and pa.parts[-len(tail):] == tail
    return False


def _same(want: object, got: object) -> bool:
    if isinstance(want, bool):
        return bool(got) == want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)) and not isinstance(got, bool):
        return abs(float(want) - float(got)) <= 1e-9 * max(1.0, abs(float(want)))
    if isinstance(want, (list, tuple)):
        return isinstance(got, (list, tuple)) and [str(x) for x in want] == [str(x) for x in got]
    if isinstance(want, str) and isinstance(got, str) and ("/" in want or "/" in got):
        return same_path(want, got)
    return str(want).lower() == str(got).lower()


def server_info(url: str) -> dict[str, Any] | None:
    """The attached server's ``/server_info`` (None: unreadable)."""
    return get_json(url.rstrip("/"), "/server_info")


#: keys every SGLang ``/server_info`` has (its ServerArgs; the simulator's too): an answer without them is not SGLang's
SGLANG_INFO_KEYS = ("model_path", "tp_size", "port")

#: the fix when a server answers but not as SGLang, or nothing answers
NOT_SGLANG_FIX = ("point --perfgate-url at the SGLang server's own address (the --host and --port it was launched "
                  "with; check with `curl URL/server_info`), or drop --perfgate-url to let perfgate launch it")
NOT_UP_FIX = ("start the server there first (and wait until it answers), or drop --perfgate-url to let perfgate "
              "launch it")


def url_problem(url: str) -> tuple[str, str]:
    """``("", "")`` for a URL perfgate can ask, else ``(what is wrong, the fix)``: a scheme missing (the fix
    is the URL with ``http://``), or another scheme."""
    if url.startswith(("http://", "https://")):
        return "", ""
    if "://" in url:
        return (f"'{url}' is not an http:// or https:// URL",
                f"--perfgate-url http://{url.split('://', 1)[1]} (SGLang serves plain HTTP)")
    return (f"'{url}' has no scheme", f"--perfgate-url http://{url}")


def not_sglang(obj: object) -> str:
    """Why a ``/server_info`` answer is not SGLang's ("" when it is): not a JSON object, or without the keys every
    SGLang server's has (:data:`SGLANG_INFO_KEYS`)."""
    if not isinstance(obj, dict):
        return "GET /server_info did not answer a JSON object: not an SGLang server"
    missing = [k for k in SGLANG_INFO_KEYS if k not in obj]
    if missing:
        keys = ", ".join(sorted(map(str, obj))[:6]) or "none"
        return (f"GET /server_info answered JSON without SGLang's {', '.join(missing)} (its keys: {keys}): not an "
                f"SGLang server")
    return ""


def probe(url: str, timeout_s: float = 10.0) -> tuple[dict[str, Any] | None, str, str]:
    """``(/server_info, "", "")`` of the server at ``url``, or ``(None, why not, the fix)``: a URL that is not
    http(s), nothing listening, no answer in ``timeout_s``, an HTTP error, or an answer that is not SGLang's
    ``/server_info``."""
    bad, fix = url_problem(url)
    if bad:
        return None, bad, fix
    got, down = _get_info(url, timeout_s)
    if down:  # a 404: something else listens there
        return None, down, NOT_SGLANG_FIX if down.endswith("HTTP 404") else NOT_UP_FIX
    why = not_sglang(got)
    if why:
        return None, why, NOT_SGLANG_FIX
    assert isinstance(got, dict)
    return got, "", ""


def _get_info(url: str, timeout_s: float) -> tuple[object, str]:
    """``(the decoded answer of GET url/server_info, "")`` (None: not JSON), or ``(None, why there is none)``."""
    import requests

    try:
        r = requests.get(f"{url.rstrip('/')}/server_info", timeout=timeout_s)
    except requests.ConnectionError as e:
        reason = "connection refused: nothing listens there" if "refused" in str(e).lower() else f"cannot connect ({e})"
        return None, reason
    except requests.Timeout:
        return None, f"no answer within {timeout_s:g} s"
    except requests.RequestException as e:
        return None, str(e)
    if r.status_code != 200:
        return None, f"GET /server_info answered HTTP {r.status_code}"
    try:
        return r.json(), ""
    except ValueError:
        return None, ""


def launched_flags(info: Mapping[str, Any]) -> set[str] | None:
    """Flag names (no dashes) on the server's launch command; None when the server does not say."""
    cmd = info.get("launch_command")
    if not isinstance(cmd, str) or not cmd.strip():
        return None
    try:
        toks = shlex.split(cmd)
    except ValueError:
        toks = cmd.split()
    return {t[2:].split("=", 1)[0] for t in toks if t.startswith("--") and len(t) > 2}


def mismatches(url_or_info: str | Mapping[str, Any], config: ServerConfig,
               controlled: frozenset[str] = frozenset()) -> list[str] | None:
    """What differs between ``config`` and the server (None: ``/server_info`` unreadable).

    ``controlled``: flags any config of the session sets; the server's launch command must not
    set one of them that ``config`` leaves out.
    """
    info = server_info(url_or_info) if isinstance(url_or_info, str) else url_or_info
    if info is None:
        return None
    probs: list[str] = []
    simulated = bool(info.get("perfgate_simulated"))
    if config.engine == "sim" and not simulated:
        probs.append("engine: the attached server is not perfgate's simulated server (the profile's engine is sim)")
    elif config.engine != "sim" and simulated:
        probs.append(f"engine: the attached server is perfgate's simulated server (the profile's engine is "
                     f"{config.engine})")
    if simulated and config.engine == "sim":
        hw = dict(config.engine_options).get("sim_hardware")
        got_hw = info.get("perfgate_sim_hardware")
        if hw and got_hw and not same_path(hw, got_hw):
            probs.append(f"sim hardware {got_hw} (want {hw})")
    for flag, want in config.flag_dict.items():
        field = field_of(flag)
        if field not in info:
            if want is False:
                continue
            probs.append(f"{field} not reported by the server (want {want!r})")
            continue
        if not _same(want, info[field]):
            probs.append(f"{field}={info[field]!r} (want {want!r})")
    launched = launched_flags(info)
    if launched is not None:
        own = {field_of(f) for f in config.flag_dict}
        ctl = {field_of(f): f for f in controlled}
        per_launch = {field_of(f) for f in _PER_LAUNCH}
        by_field = {field_of(f): f for f in sorted(launched)}
        for field in sorted((set(by_field) & set(ctl)) - own - per_launch):
            flag = by_field[field]
            probs.append(f"{field}={info.get(field)!r} (launched with --{flag}, which {config.name} leaves at "
                         f"SGLang's default)")
    mp = info.get("model_path")
    if mp is not None and not same_path(config.model_path, mp):
        probs.append(f"model_path={mp!r} (want {config.model_path!r})")
    if not config.speculative and info.get("speculative_algorithm") and not any(
            x.startswith("speculative_algorithm=") for x in probs):
        probs.append(f"speculative_algorithm={info['speculative_algorithm']!r} (want none)")
    return probs


def check(info: Mapping[str, Any], config: ServerConfig, session: Sequence[ServerConfig]) -> AttachCheck:
    """Whether ``config``'s records run on the attached server, given every config of the session."""
    controlled = frozenset(k for c in [config, *session] for k in c.flag_dict)
    env_names = sorted({k for c in [config, *session] for k, _ in c.env})
    own_env = config.env_dict
    unverified = tuple(f"env:{k}={own_env.get(k, '<unset>')}" for k in env_names)
    if launched_flags(info) is None:
        unverified += ("flags beyond the config's (no launch_command in /server_info)",)
    probs = mismatches(info, config, controlled)
    assert probs is not None
    if probs:
        return AttachCheck(runs=False, reason=f"attached server runs a different config than {config.name}: "
                                              + "; ".join(probs))
    # configs that match as well differ from this one only in what /server_info cannot show
    twins = [o for o in session if o.key != config.key and not mismatches(info, o, controlled)]
    if twins:
        def rank(c: ServerConfig) -> tuple[int, int, str]:
            return (len(c.env), 0 if c.variant is None else 1, c.name)

        presumed = min([config, *twins], key=rank)
        if presumed.key != config.key:
            diff = sorted(k for k in set(own_env) | set(presumed.env_dict)
                          if own_env.get(k) != presumed.env_dict.get(k))
            shown = ", ".join(f"{k}={own_env.get(k, '<unset>')}" for k in diff) or "engine options"
            return AttachCheck(runs=False, unverified=unverified, reason=(
                f"attach mode cannot verify {config.name}: it differs from {presumed.name} only in environment "
                f"variables ({shown}), which /server_info does not report, so the attached server is taken to be "
                f"{presumed.name}; drop --perfgate-url to launch and measure {config.name}"))
    return AttachCheck(runs=True, unverified=unverified)

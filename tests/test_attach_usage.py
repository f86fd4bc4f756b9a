"""What a session cannot do is said once, before any test or launch: a --perfgate-url where no server answers,
a config the visible GPUs cannot hold; and an attached server's config is compared by meaning (a path spelled
relative or absolute, a flag under any of its aliases)."""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import threading
from pathlib import Path

import pytest

from perfgate.profiles.config import ServerConfig
from perfgate.serving.attach import mismatches, same_path

ROOT = Path(__file__).resolve().parent.parent
PROFILE = ROOT / "baselines" / "h200-x1" / "llama-3.1-8b-dummy.toml"
TEST = "def test_x(perf_server, measure, perf_check):\n    perf_check(measure(perf_server), 'tok_s')\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_url_where_nothing_listens_is_one_usage_error_before_any_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mine=TEST)
    url = f"http://127.0.0.1:{_free_port()}"  # bound, then closed: nothing listens
    r = pytester.runpytest_subprocess(f"--perfgate-url={url}", "-p", "no:cacheprovider")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines([f"*perfgate: --perfgate-url {url}: cannot read {url}/server_info: connection refused*"
                            "fix: start the server there first*"])
    assert "[None]" not in r.stdout.str() and "passed" not in r.stdout.str() and "failed" not in r.stdout.str()


def test_a_url_without_its_scheme_is_a_usage_error_giving_the_url_with_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mine=TEST)
    r = pytester.runpytest_subprocess("--perfgate-url=127.0.0.1:1", "-p", "no:cacheprovider")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*perfgate: --perfgate-url 127.0.0.1:1: cannot read 127.0.0.1:1/server_info: "
                            "'127.0.0.1:1' has no scheme; fix: --perfgate-url http://127.0.0.1:1"])
    assert "start the server" not in r.stderr.str()


@pytest.mark.parametrize(("url", "why", "fix"), [
    ("localhost:30000", "'localhost:30000' has no scheme", "--perfgate-url http://localhost:30000"),
    ("ftp://box:30000", "'ftp://box:30000' is not an http:// or https:// URL", "--perfgate-url http://box:30000"),
    ("http://box:30000", "", ""), ("https://box", "", "")])
def test_a_url_perfgate_cannot_ask_gets_its_own_fix(url: str, why: str, fix: str) -> None:
    from perfgate.serving.attach import url_problem

    got = url_problem(url)
    assert got[0] == why and got[1].startswith(fix)


def test_json_without_sglangs_keys_is_not_an_sglang_server() -> None:
    from perfgate.serving.attach import not_sglang

    assert not_sglang({"model_path": "/m", "tp_size": 1, "port": 30000, "version": "0.5.16"}) == ""
    assert not_sglang({"status": "ok"}) == ("GET /server_info answered JSON without SGLang's model_path, tp_size, port "
                                            "(its keys: status): not an SGLang server")
    assert not_sglang(["a"]) == not_sglang(None) == "GET /server_info did not answer a JSON object: not an SGLang server"


class _NotSGLang(http.server.BaseHTTPRequestHandler):
    """A server that answers JSON on every path, but is not SGLang (a health endpoint, another inference server)."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = json.dumps({"status": "ok", "model": "something"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_url_answering_json_that_is_not_sglang_is_a_usage_error_not_all_skipped(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mine=TEST)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotSGLang)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        r = pytester.runpytest_subprocess(f"--perfgate-url={url}", "-p", "no:cacheprovider")
    finally:
        server.shutdown()
        server.server_close()
    assert r.ret == pytest.ExitCode.USAGE_ERROR, r.stdout.str()
    r.stderr.fnmatch_lines([f"*perfgate: --perfgate-url {url}: cannot read {url}/server_info: GET /server_info "
                            "answered JSON without SGLang's model_path, tp_size, port (its keys: model, status): not "
                            "an SGLang server; fix: point --perfgate-url at the SGLang server's own address*"])
    r.stdout.no_fnmatch_line("*[0-9] skipped*")
    r.stdout.no_fnmatch_line("*[0-9] passed*")


def _real_project(pytester: pytest.Pytester, extra_server: str) -> Path:
    for sub in ("fixtures/models", "fixtures/prompts"):
        shutil.copytree(ROOT / sub, pytester.path / sub)
    prof = pytester.path / "baselines" / "h200-x1" / "m.toml"
    prof.parent.mkdir(parents=True)
    (pytester.path / "baselines" / "variants.toml").write_text((ROOT / "baselines" / "variants.toml").read_text())
    prof.write_text(PROFILE.read_text().replace("[server]\n", f"[server]\n{extra_server}\n"))
    pytester.makepyfile(test_mine="import pytest\n\npytestmark = pytest.mark.perfgate(kind='mine', "
                                  "modes=['baseline'])\n\n" + TEST)
    return prof


def test_a_config_wider_than_the_visible_gpus_is_a_usage_error_before_any_launch(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    import perfgate.host.gpu as gpu

    monkeypatch.setattr(gpu, "visible_entries", lambda: ["0"])  # NVML: one GPU visible
    prof = _real_project(pytester, "tp-size = 2")
    r = pytester.runpytest(f"--perfgate-profile={prof}", "--perfgate-allow-hardware-mismatch", "-p", "no:cacheprovider")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines([f"*perfgate: {prof}: baseline needs 2 GPUs (tp-size x pp-size x dp-size of its flags: "
                            "tp-size = 2) but 1 are visible here (0, *fix: lower tp-size in [[]server[]]*"])


def test_dp_attention_keeps_the_data_parallel_ranks_inside_tp():
    from perfgate.profiles.config import gpus_needed

    assert gpus_needed({"tp-size": 2, "dp-size": 2}) == 4
    assert gpus_needed({"tensor-parallel-size": 2, "data-parallel-size": 2, "enable-dp-attention": True}) == 2
    assert gpus_needed({"tp-size": 2, "pp-size": 2}) == 4 and gpus_needed({}) == 1


MODEL = "/abs/project/fixtures/models/llama"


def _cfg(flags: dict[str, object], sim_hardware: str = "") -> ServerConfig:
    return ServerConfig.build(profile="t", mode="baseline", engine="sim" if sim_hardware else "sglang",
                              model_path=MODEL, flags=flags, env={},
                              engine_options={"sim_hardware": sim_hardware} if sim_hardware else {})


def test_a_path_is_compared_by_the_file_it_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fixtures" / "sim").mkdir(parents=True)
    box = tmp_path / "fixtures" / "sim" / "x.toml"
    box.write_text("")
    monkeypatch.chdir(tmp_path)
    assert same_path(str(box), "fixtures/sim/x.toml") and same_path(str(box), "./fixtures/sim/x.toml")
    assert same_path("/elsewhere/fixtures/sim/x.toml", "fixtures/sim/x.toml")  # the server's cwd is not known here
    assert not same_path(str(box), "fixtures/sim/y.toml") and not same_path("/a/x.toml", "/b/x.toml")
    info = {"model_path": "fixtures/models/llama", "tp_size": 8, "perfgate_simulated": True,
            "perfgate_sim_hardware": "fixtures/sim/x.toml"}
    assert mismatches(info, _cfg({"tp-size": 8}, sim_hardware=str(box))) == []
    assert mismatches(info, _cfg({"tp-size": 8}, sim_hardware="/b/other.toml")) == [
        "sim hardware fixtures/sim/x.toml (want /b/other.toml)"]


def test_a_flag_is_known_by_any_of_its_aliases():
    info = {"model_path": MODEL, "tp_size": 2, "dp_size": 1, "disable_custom_all_reduce": False,
            "launch_command": f"python -m sglang.launch_server --model {MODEL} --tensor-parallel-size 2"}
    assert mismatches(info, _cfg({"tp-size": 2})) == []
    assert mismatches(info, _cfg({"tensor-parallel-size": 2})) == []
    # launched with an alias of a flag another config controls: still not this config
    got = mismatches(info, _cfg({}), controlled=frozenset({"tp-size"}))
    assert got == ["tp_size=2 (launched with --tensor-parallel-size, which baseline leaves at SGLang's default)"]


def test_a_simulator_started_with_a_relative_box_path_is_the_profiles_config(
        pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's case: `python -m perfgate.sim --sim-hardware fixtures/sim/x.toml` in their checkout, the profile
    naming the same file absolutely; every record was skipped as 'a different config'."""
    from perfgate.serving.simprocess import SimProcess
    from tests.test_measurement import BASE_FLAGS, MODEL, make_project, records, run

    prof = make_project(pytester)
    monkeypatch.chdir(ROOT)  # the simulator resolves its relative path here
    with SimProcess.start(BASE_FLAGS, log_path=tmp_path / "sim.log", model_path=MODEL,
                          hardware="fixtures/sim/rtxpro6000-x8-pcie.toml") as sim:
        sim.wait_ready()
        monkeypatch.chdir(pytester.path)
        r = run(pytester, prof, "-m", "baseline",
                f"--perfgate-url=http://127.0.0.1:{sim.port}")
    r.assert_outcomes(passed=1)
    assert records(pytester)["test_decode_floor[m:baseline]"]["outcome"] == "pass"


def test_a_log_dir_keeps_one_folder_per_session(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mine=TEST)
    logs = pytester.path / "logs"
    seen = []
    for _ in range(2):  # two sessions in one process and (likely) one second: still two folders
        r = pytester.runpytest(f"--perfgate-log-dir={logs}", "--collect-only", "-q", "-p", "no:cacheprovider")
        assert r.ret == pytest.ExitCode.OK, r.stdout.str()
        (line,) = {x for x in r.stdout.lines if x.startswith("perfgate: server logs in ")}  # header and summary
        seen.append(Path(line.removeprefix("perfgate: server logs in ")))
    assert seen[0] != seen[1] and all(p.parent == logs.resolve() and p.name.startswith("run-") for p in seen), seen


@pytest.mark.parametrize(("answer", "fix"), [
    ((None, "GET /server_info answered HTTP 404"), "point --perfgate-url at the SGLang server's own address"),
    ((None, "GET /server_info answered HTTP 503"), "start the server there first"),
    ((None, "connection refused: nothing listens there"), "start the server there first"),
    (({"status": "ok"}, ""), "point --perfgate-url at the SGLang server's own address"),
    (({"model_path": "/m", "tp_size": 1, "port": 1}, ""), "")])
def test_each_unreadable_server_info_gets_its_own_fix(monkeypatch: pytest.MonkeyPatch, answer: tuple[object, str],
                                                      fix: str) -> None:
    import perfgate.serving.attach as attach

    monkeypatch.setattr(attach, "_get_info", lambda url, timeout_s: answer)
    info, why, got = attach.probe("http://box:30000")
    assert got.startswith(fix) and (info is None) == bool(why)

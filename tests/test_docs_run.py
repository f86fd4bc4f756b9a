"""Every code block of the README and docs/ that a user would run is run, in the doc's order, against the built
wheel (tests/wheelenv.py) in an empty directory that becomes the user's project as the doc says
(``perfgate init myperf && cd myperf``). Blocks are collected from the Markdown by Sybil (tests/docblocks.py says
what each language gets); a block that cannot run here says why in an HTML comment before it, which is checked.
A report that only a skipped block writes (on a GPU box, under two stacks, or in minutes) and a later block reads is
the checkout's evidence of such a run (:data:`STAND_INS`).
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import tomlkit

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from tests.docblocks import DIRECTIVES, DOCS, LANGUAGES, ROOT, Block, blocks, commands, directives, indented_blocks
from tests.wheelenv import Result, WheelEnv

#: what a clone has besides the package (the wheel gives that): a ``checkout`` block runs in a copy of these
CHECKOUT = ("baselines", "evidence", "fixtures", "perftests")

#: reports a doc's commands read that only its skipped commands write (on GPU boxes, under two stacks, or in
#: minutes): the checkout's evidence of such a run stands in, put where the doc's commands look before its blocks run
STAND_INS: dict[str, dict[str, str]] = {
    # `pytest perftests/ --junitxml=...` of each side on two boxes: two H200 machines' reports, the candidate the
    # current stack again (an A/A gate)
    "docs/gate.md": {
        "box-a/current.xml": "evidence/h200-x1/machines-2026-12-01/call1/h200-junit.xml",
        "box-a/candidate.xml": "evidence/h200-x1/machines-2026-12-01/call1/h200-junit.xml",
        "box-b/current.xml": "evidence/h200-x1/machines-2026-12-01/call2/h200-junit.xml",
        "box-b/candidate.xml": "evidence/h200-x1/machines-2026-12-01/call2/h200-junit.xml",
        # the runs of one profile over time (the H200 worked example, its client run, two machines' floors)
        "runs/2026-11-29.xml": "evidence/h200-x1/junit-2026-11-29.xml",
        "runs/2026-12-01-client.xml": "evidence/h200-x1/client-2026-12-01/h200-junit.xml",
        "runs/2026-12-01-call1.xml": "evidence/h200-x1/machines-2026-12-01/call1/h200-junit.xml",
        "runs/2026-12-01-call2.xml": "evidence/h200-x1/machines-2026-12-01/call2/h200-junit.xml",
    },
    # `pytest perftests/ -m load --junitxml=load.xml` (~11 min here): its committed report (evidence/README.md)
    "docs/load.md": {"load.xml": "evidence/sim-rtxpro6000-x8/load-2026-12-01.xml"},
}

RUN = [d for d in DOCS if any(not b.skipped and b.language != "text" for b in blocks(d))]

#: what each TOML check runs with the wheel's python: argv[1] is the file
_LOAD = {
    "profile": "import sys; from perfgate.profiles.load import load_profile; p = load_profile(sys.argv[1]); "
               "print('loaded', p.name)",
    "variants": "import sys; from perfgate.profiles.variants import load_variants; v = load_variants(sys.argv[1]); "
                "print('loaded', *sorted(v.variants))",
    "pyproject": "import sys; from pathlib import Path; from perfgate.report.policy import load_policy; "
                 "print('loaded', load_policy(Path(sys.argv[1])))",
}


def _tail(r: Result, n: int = 4000) -> str:
    return f"exit {r.rc}\n--- stdout\n{r.stdout[-n:]}\n--- stderr\n{r.stderr[-n:]}"


def _merge(doc: Any, over: dict[str, Any]) -> None:
    """``over``'s tables into the tomlkit document ``doc``: tables merge, values replace."""
    for k, v in over.items():
        if isinstance(v, dict) and k in doc and isinstance(doc[k], dict):
            _merge(doc[k], v)
        else:
            doc[k] = v


class DocRun:
    """One doc's blocks, run in order: a shell's working directory carried from block to block (``cd``)."""

    def __init__(self, env: WheelEnv, doc: str) -> None:
        self.env, self.doc = env, doc
        self.home = env.empty_dir(re.sub(r"\W", "-", Path(doc).stem))
        self.cwd = self.home
        self._scratch: Path | None = None
        for rel, src in STAND_INS.get(doc, {}).items():
            (self.home / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / src, self.home / rel)

    # -------------------------------------------------------------- where

    def project(self) -> Path:
        """The user's project the doc set up: the working directory or the one directory under it that has a
        pytest.ini (``perfgate init myperf`` without ``cd``)."""
        if (self.cwd / "pytest.ini").is_file():
            return self.cwd
        found = [p.parent for p in self.cwd.glob("*/pytest.ini")]
        assert len(found) == 1, f"{self.doc}: a block needs the user's project, and none was set up before it"
        return found[0]

    def scratch(self) -> Path:
        """A project of the user's for the TOML checks (``perfgate init``), copied fresh for each check."""
        if self._scratch is None:
            self._scratch = self.home.parent / f"{self.home.name}-init"
            r = self.env.sh(f"perfgate init {shlex.quote(str(self._scratch))}", cwd=self.home.parent)
            assert r.rc == 0, _tail(r)
        return self._scratch

    def checkout(self) -> Path:
        """What a clone has besides the package (the wheel gives that): :data:`CHECKOUT`, copied once a doc."""
        d = self.home.parent / f"{self.home.name}-checkout"
        if not d.exists():
            for tree in CHECKOUT:
                shutil.copytree(ROOT / tree, d / tree, ignore=shutil.ignore_patterns("__pycache__"))
        return d

    # -------------------------------------------------------------- the blocks

    def run(self, b: Block) -> None:
        if b.skipped or b.language == "text":
            return
        getattr(self, f"_{b.language}")(b)

    def _bash(self, b: Block) -> None:
        state = self.home.parent / f"{self.home.name}.cwd"
        where = self.checkout() if b.directive is not None and b.directive.name == "checkout" else self.cwd
        for cmd, want in commands(b):
            script = f'cd {shlex.quote(str(where))} || exit 97\n{cmd}\nrc=$?\npwd > {shlex.quote(str(state))}\nexit $rc\n'
            r = self.env.sh(script, cwd=self.home)
            assert r.rc == want, f"{b.where}: `{cmd}` should exit {want}: {_tail(r)}"
            where = Path(state.read_text().strip())
        if b.directive is None or b.directive.name != "checkout":
            self.cwd = where

    def _python(self, b: Block) -> None:
        stem = re.sub(r"\W", "_", Path(b.doc).stem)
        name = f"{stem}_{b.line}"
        if re.search(r"^def test_\w+\(", b.source, flags=re.M):  # a test file: written into the project, collected
            proj = self.project()
            f = proj / "doctests" / f"test_{name}.py"
            f.parent.mkdir(exist_ok=True)
            f.write_text(b.source)
            # every kind switched on: the cross-check's record runs by default only where SGLang serves
            r = self.env.sh(f"pytest {shlex.quote(str(f.relative_to(proj)))} --collect-only -q -p no:cacheprovider "
                            "--perfgate-crosscheck on", cwd=proj)
            n = re.search(r"(\d+) tests? collected", r.stdout)
            assert r.rc == 0 and n and int(n.group(1)) >= 1, f"{b.where}: the test file does not collect: {_tail(r)}"
            return
        where = self.checkout() if b.directive is not None and b.directive.name == "checkout" else self.cwd
        f = where / f"doc_{name}.py"
        f.write_text(b.source)
        r = self.env.sh(f"python {shlex.quote(f.name)}", cwd=where)
        assert r.rc == 0, f"{b.where}: {_tail(r)}"

    def _toml(self, b: Block) -> None:
        data = tomllib.loads(b.source)  # a TOML error names the block
        if "tool" in data:  # a pyproject table: perfgate's gate policy
            assert set(data["tool"]) == {"perfgate"}, f"{b.where}: a pyproject table perfgate does not read"
            d = self.env.empty_dir("pyproject")
            (d / "pyproject.toml").write_text(b.source)
            self._load(b, "pyproject", d / "pyproject.toml")
            return
        proj = self.home.parent / f"{self.home.name}-toml-{b.line}"
        shutil.copytree(self.scratch(), proj)
        if "variants" in data and set(data) <= {"schema_version", "spellings", "variants"}:  # a variants file
            target, what = proj / "baselines" / "variants.toml", "variants"
        else:  # a profile's tables, merged into the project's profile
            ini = (proj / "pytest.ini").read_text()
            name = re.search(r"perfgate_profile = (\S+)", ini)
            assert name, ini
            target, what = proj / "baselines" / f"{name.group(1)}.toml", "profile"
        doc = tomlkit.parse(target.read_text())
        _merge(doc, data)
        target.write_text(tomlkit.dumps(doc))
        r = self._load(b, what, target)
        if what == "variants":
            assert all(v in r.stdout.split() for v in data["variants"]), f"{b.where}: {_tail(r)}"

    def _load(self, b: Block, what: str, path: Path) -> Result:
        r = self.env.sh(f"python -c {shlex.quote(_LOAD[what])} {shlex.quote(str(path))}", cwd=path.parent)
        assert r.rc == 0 and r.stdout.startswith("loaded"), f"{b.where}: the {what} does not load: {_tail(r)}"
        return r


@pytest.mark.slow
@pytest.mark.parametrize("doc", RUN)
def test_the_docs_blocks_run_as_a_user_runs_them(wheel_env: WheelEnv, doc: str) -> None:
    run = DocRun(wheel_env, doc)
    for b in blocks(doc):
        run.run(b)


def test_every_block_is_collected_and_every_skip_says_why() -> None:
    for doc in DOCS:
        for b in blocks(doc):
            assert b.language in LANGUAGES, f"{b.where}: a block of language {b.language!r} ({', '.join(LANGUAGES)})"
            if b.directive is not None and b.directive.name in ("skip", "checkout"):
                assert len(b.directive.reason) >= 8, f"{b.where}: `perfgate-docs: {b.directive.name}` without a why"
        for d in directives(doc):
            assert d.name in DIRECTIVES, f"{doc}:{d.line}: unknown directive {d.name!r} ({', '.join(DIRECTIVES)})"
        # a directive that does not stand right before a block applies to nothing
        attached = {b.directive.line for b in blocks(doc) if b.directive is not None}
        assert [d.line for d in directives(doc) if d.line not in attached] == [], doc
    for doc in DOCS:
        assert indented_blocks(doc) == [], f"{doc}: indented code blocks are not collected: fence them"
    # a stand-in is committed evidence, for a file (or a folder's files) that a block run here reads
    for doc, files in STAND_INS.items():
        run = "".join(b.source for b in blocks(doc) if not b.skipped and b.language == "bash")
        for rel, src in files.items():
            assert (ROOT / src).is_file(), f"{doc}: the stand-in for {rel}, {src}, is not in the checkout"
            read = rel if "/" not in rel else rel.split("/")[0] + "/"
            assert read in run, f"{doc}: no block run here reads {rel}: drop its stand-in"


def test_the_collector_honours_a_skip_and_reads_exit_codes() -> None:
    readme = blocks("README.md")
    gpu = next(b for b in readme if "h200-x1/llama-3.1-8b-dummy" in b.source and b.language == "bash")
    assert gpu.skipped and "GPU" in gpu.directive.reason  # type: ignore[union-attr]
    slow = next(b for b in blocks("docs/writing-tests.md") if "PERFGATE_SIM_SCALE=0.9" in b.source)
    # "the latency ceilings fail", "# exit 1: regressed"
    assert [code for _, code in commands(slow)] == [0, 0, 0, 1, 1]
    assert not slow.skipped


def test_the_quick_start_main_job_runs_from_the_wheel(wheel_env: WheelEnv) -> None:
    """The README's main job is a checkout's (its set-up block is skipped): its pytest command, with the wheel, in a
    directory holding a copy of the checkout's perftests/ and nothing else (the wheel ships the simulated seed box)."""
    d = wheel_env.empty_dir("main-job")
    shutil.copytree(ROOT / "perftests", d / "perftests", ignore=shutil.ignore_patterns("__pycache__"))
    main = next(b for b in blocks("README.md") if "pytest perftests/ -m baseline" in b.source)
    cmd = main.source.strip().split(" && ")[-1]
    assert cmd == "pytest perftests/ -m baseline"
    r = wheel_env.sh(cmd + " -p no:cacheprovider", cwd=d)
    assert r.rc == 0 and "1 passed" in r.stdout and "SIMULATED" in r.stdout, _tail(r)

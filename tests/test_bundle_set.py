"""ci/device/bundle/check_set.py: a release's start-up set checked against its wheels' own metadata before a bundle
is packed (issue 31). Small stand-in wheels (a METADATA with the real releases' pins) and the shipped requirements
files; the script runs as build.sh runs it, in a subprocess."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "ci" / "device" / "bundle"
SCRIPT = BUNDLE / "check_set.py"
BASE = BUNDLE / "requirements-sglang-0.5.17-h200.txt"


def wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    meta = "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(folder / f"{dist}-{version}-py3-none-any.whl", "w") as z:
        z.writestr(f"{dist}-{version}.dist-info/METADATA",
                   f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{meta}")


#: what SGLang 0.5.16's METADATA pins among the start-up set (and one it leaves to the box's image)
SGLANG_016 = ("flashinfer_python[cu13]==0.6.14", "sgl-deep-gemm==0.1.4.post1", "sglang-kernel==0.4.5",
              "transformers==5.12.1", "torch==2.11.0", 'av==16.1.0; platform_machine == "aarch64"')


def overlay_016(folder: Path, flashinfer: str = "0.6.14") -> None:
    wheel(folder, "sglang", "0.5.16", SGLANG_016)
    wheel(folder, "flashinfer-python", flashinfer, ("apache-tvm-ffi<0.2,>=0.1.6",))
    wheel(folder, "sgl-deep-gemm", "0.1.4.post1", ("apache-tvm-ffi==0.1.11",))


def check(req: Path, wheels: Path, base: Path | None = BASE) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, str(SCRIPT), str(req), str(wheels), *(["--base", str(base)] if base else [])]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("release", ["0.5.16", "0.5.15"])
def test_each_shipped_overlay_set_names_its_release_and_every_package_of_its_base(release: str) -> None:
    req = BUNDLE / f"requirements-sglang-{release}-h200.txt"
    assert req.read_text().startswith("# overlay-on: 0.5.17\n")
    pins = {ln.split("==")[0] for ln in req.read_text().splitlines() if ln and not ln.startswith("#")}
    base = {ln.split("==")[0] for ln in BASE.read_text().splitlines() if ln and not ln.startswith("#")}
    assert pins == base and f"sglang=={release}" in req.read_text()


def test_the_016_overlay_set_is_complete_against_its_wheels_metadata(tmp_path: Path) -> None:
    overlay_016(tmp_path / "w")
    r = check(BUNDLE / "requirements-sglang-0.5.16-h200.txt", tmp_path / "w")
    assert r.returncode == 0, r.stderr
    assert "SGLang 0.5.16: 43 pins, 3 wheel(s) here" in r.stdout and "torch==2.11.0" in r.stdout
    assert "av==" not in r.stdout  # an aarch64-only requirement is not the box's


def test_a_pin_the_release_does_not_accept_stops_the_build_naming_the_file_the_package_and_the_fix(
        tmp_path: Path) -> None:
    """The 0.5.16 set with 0.5.17's FlashInfer: SGLang 0.5.16's METADATA pins 0.6.14."""
    req = tmp_path / "requirements-sglang-0.5.16-h200.txt"
    req.write_text((BUNDLE / req.name).read_text().replace("flashinfer-python==0.6.14", "flashinfer-python==0.6.15.post1"))
    overlay_016(tmp_path / "w", flashinfer="0.6.15.post1")
    r = check(req, tmp_path / "w")
    assert r.returncode == 1
    assert f"{req}:" in r.stderr and "flashinfer-python==0.6.15.post1, but sglang 0.5.16 requires" in r.stderr
    assert "fix: pin flashinfer-python to a version in ==0.6.14" in r.stderr


def test_an_overlay_that_leaves_out_a_package_of_its_base_or_a_wheel_is_incomplete(tmp_path: Path) -> None:
    req = tmp_path / "requirements-sglang-0.5.16-h200.txt"
    req.write_text("\n".join(ln for ln in (BUNDLE / req.name).read_text().splitlines()
                             if not ln.startswith("tokenizers==")) + "\n")
    wheel(tmp_path / "w", "sglang", "0.5.16", SGLANG_016)  # flashinfer and deep-gemm not downloaded
    r = check(req, tmp_path / "w")
    assert r.returncode == 1
    assert "tokenizers (0.22.2 in requirements-sglang-0.5.17-h200.txt) is not in this set" in r.stderr
    assert "flashinfer-python==0.6.14 has no wheel" in r.stderr and "sgl-deep-gemm==0.1.4.post1 has no wheel" in r.stderr

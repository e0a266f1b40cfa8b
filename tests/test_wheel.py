"""The wheel as users get it: tools/wheel_check.py builds a wheel of this checkout,
repairs it with auditwheel, installs it into a fresh virtual environment with no
compiler reachable, and runs the main job and the smoke subset against it."""

from __future__ import annotations

import functools
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHECK = ROOT / "tools" / "wheel_check.py"
#: Wall-clock limit of the whole check (a full build of the extension included).
CHECK_TIMEOUT_S = 3600


@functools.cache
def _smoke_ids() -> tuple[str, ...]:
    """The node ids pytest collects under ``-m smoke`` here (collected once)."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "smoke",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return tuple(line for line in out.splitlines() if "::" in line)


@pytest.mark.skipif(not CHECK.exists(), reason="needs the source checkout (tools/)")
def test_smoke_subset_covers_the_main_entry_points():
    files = {i.split("::")[0] for i in _smoke_ids()}
    for name in ("package", "fit", "loo", "kfold", "tune", "estimators"):
        assert f"tests/test_{name}.py" in files, name


@pytest.mark.slow
@pytest.mark.skipif(not CHECK.exists(), reason="needs the source checkout (tools/)")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="auditwheel repairs Linux wheels")
def test_wheel_installs_and_runs_without_a_compiler(tmp_path):
    work = tmp_path / "check"
    proc = subprocess.run(
        [sys.executable, str(CHECK), "--work-dir", str(work)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=CHECK_TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    # the stages ran, against the repaired wheel, from the fresh environment
    assert "no compiler reachable" in out
    assert f"aloocv imported from {work / 'venv'}" in out
    (repaired,) = (work / "wheelhouse").glob("aloocv-*manylinux*.whl")
    assert repaired.name in out
    summary = [line for line in out.splitlines() if " passed" in line and " in " in line]
    assert summary, out
    n_smoke = len(_smoke_ids())
    assert summary[-1].strip().startswith(f"{n_smoke} passed"), (summary[-1], n_smoke)
    assert "wheel check passed" in out

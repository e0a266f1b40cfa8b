"""Build a wheel of this checkout, repair it, install it where no compiler exists, test it.

Usage::

    python tools/wheel_check.py [--wheel FILE] [--no-build-isolation | --build-isolation]
                                [--work-dir DIR]

The stages, each announced with its wall time:

1. build: ``pip wheel . --no-deps`` (skipped with ``--wheel FILE``). Without build
   isolation the build reuses ``build/{wheel_tag}`` from earlier non-isolated builds in
   the same environment; by default the build is non-isolated when the build
   requirements are installed here (pip checks their versions), isolated otherwise. An
   isolated build is a full one: scikit-build-core clears the CMake cache and objects of
   a build directory configured from another (temporary) build environment.
2. repair (Linux): ``auditwheel repair``, which vendors the OpenMP runtime and tags the
   wheel manylinux; the repaired wheel must need no library outside the policy.
3. install: a fresh virtual environment whose PATH holds its own ``bin`` and links to the
   system's programs less compilers and build tools (no ``cc``, ``c++``, ``gcc``,
   ``cmake``, ``ninja``, ``make``, ``ld``), and whose ``CC``/``CXX`` are ``false``; the
   wheel, its dependencies, pytest and hypothesis are installed with
   ``--only-binary :all:``, so nothing can be compiled.
4. main job: ``python -m aloocv`` from an empty directory, after checking that
   ``import aloocv`` resolves to the installed wheel.
5. smoke: ``pytest -m smoke`` on a copy of ``tests/`` and ``pyproject.toml`` in a
   temporary directory (so the import is the wheel's, not this checkout's).

Exit status 0 when every stage passed; the first failing stage's output is printed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: Distributions the smoke subset needs besides the wheel's own requirements.
SMOKE_REQUIREMENTS = ("pytest>=7", "hypothesis>=6")
#: Distributions a non-isolated build needs (pyproject's build-system; pip checks versions).
BUILD_DISTRIBUTIONS = ("scikit-build-core", "pybind11", "cmeel-eigen")
#: Programs that must not be reachable from the fresh environment.
COMPILERS = ("cc", "c++", "gcc", "g++", "clang", "clang++", "cmake", "ninja", "make")
#: Names of compilers and build tools, with target prefixes and version suffixes
#: (x86_64-linux-gnu-g++-12, clang-17, ...): left out of the fresh environment's PATH.
COMPILER_NAME = re.compile(
    r"^(.*-)?(cc|c\+\+|gcc|g\+\+|cpp|tcc|clang|clang\+\+|ccache|cmake|ninja|g?make|ld|ld\.\w+|lld)"
    r"(-[0-9][0-9.]*)?$"
)


class CheckError(RuntimeError):
    """A stage failed: its message says which and why."""


def _stage(name: str):
    print(f"\n== {name}", flush=True)
    return time.perf_counter()


def _done(t0: float) -> None:
    print(f"   ({time.perf_counter() - t0:.1f} s)", flush=True)


def _run(cmd, *, cwd=None, env=None, what: str) -> str:
    print("   $ " + " ".join(str(c) for c in cmd), flush=True)
    proc = subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise CheckError(f"{what} failed (exit {proc.returncode}):\n{proc.stdout}")
    return proc.stdout


def _build_requirements_installed() -> bool:
    try:
        for name in BUILD_DISTRIBUTIONS:
            importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def build(out: pathlib.Path, isolation: bool | None) -> pathlib.Path:
    """``pip wheel`` of the checkout into ``out``: the one wheel it wrote."""
    if isolation is None:
        isolation = not _build_requirements_installed()
    cmd = [sys.executable, "-m", "pip", "wheel", ROOT, "--no-deps", "-w", out]
    if not isolation:
        cmd += ["--no-build-isolation", "--check-build-dependencies"]
    print(f"   build isolation: {'on' if isolation else 'off'}", flush=True)
    _run(cmd, what="building the wheel")
    wheels = sorted(out.glob("aloocv-*.whl"))
    if len(wheels) != 1:
        raise CheckError(f"expected one aloocv wheel in {out}, found {wheels}")
    return wheels[0]


def repair(wheel: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """``auditwheel repair`` (Linux); elsewhere the wheel as built."""
    if not sys.platform.startswith("linux"):
        print("   not Linux: no auditwheel repair (cibuildwheel repairs these)", flush=True)
        return wheel
    print(_run([sys.executable, "-m", "auditwheel", "show", wheel], what="auditwheel show"))
    _run([sys.executable, "-m", "auditwheel", "repair", "-w", out, wheel], what="auditwheel")
    repaired = sorted(out.glob("aloocv-*.whl"))
    if len(repaired) != 1:
        raise CheckError(f"expected one repaired wheel in {out}, found {repaired}")
    with zipfile.ZipFile(repaired[0]) as z:
        vendored = [n for n in z.namelist() if n.startswith("aloocv.libs/") and not n.endswith("/")]
    print(f"   repaired: {repaired[0].name}; vendored: {vendored or 'nothing'}", flush=True)
    return repaired[0]


def _tools_without_compilers(tools: pathlib.Path) -> pathlib.Path:
    """A directory of links to the programs on PATH, compilers and build tools left out
    (the tests' dependencies call system tools such as ``lscpu``)."""
    tools.mkdir()
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        folder_path = pathlib.Path(folder)
        if not folder or not folder_path.is_dir():
            continue
        for prog in folder_path.iterdir():
            link = tools / prog.name
            if COMPILER_NAME.match(prog.name) or link.exists() or link.is_symlink():
                continue
            if prog.is_file() and os.access(prog, os.X_OK):
                link.symlink_to(prog.resolve())
    return tools


def _no_compiler_env(venv: pathlib.Path, tools: pathlib.Path) -> dict[str, str]:
    scripts = venv / ("Scripts" if os.name == "nt" else "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.pop("VIRTUAL_ENV", None)
    false = shutil.which("false") or "false"
    path = os.pathsep.join([str(scripts), str(tools)])
    env.update(PATH=path, CC=false, CXX=false, VIRTUAL_ENV=str(venv))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def install(wheel: pathlib.Path, venv: pathlib.Path) -> tuple[pathlib.Path, dict[str, str]]:
    """A fresh venv with the wheel installed from binaries only: (its python, its env)."""
    _run([sys.executable, "-m", "venv", venv], what="creating the virtual environment")
    env = _no_compiler_env(venv, _tools_without_compilers(venv.parent / "tools"))
    scripts = venv / ("Scripts" if os.name == "nt" else "bin")
    python = scripts / ("python.exe" if os.name == "nt" else "python")
    reachable = _run(
        [
            python,
            "-c",
            f"import shutil, sys; print(' '.join(c for c in {COMPILERS!r} if shutil.which(c)))",
        ],
        env=env,
        what="looking for compilers",
    ).strip()
    if reachable:
        raise CheckError(f"compilers reachable from the fresh environment: {reachable}")
    print(
        "   no compiler reachable (PATH: the venv's scripts and the system's programs "
        "less compilers and build tools; CC = CXX = false)",
        flush=True,
    )
    _run(
        # --no-compile: no byte-compiling of numpy, scipy and scikit-learn (seconds of CPU)
        [
            python,
            "-m",
            "pip",
            "install",
            "--no-compile",
            "--only-binary",
            ":all:",
            wheel,
            *SMOKE_REQUIREMENTS,
        ],
        env=env,
        what="installing the wheel",
    )
    return python, env


def main_job(python: pathlib.Path, env: dict[str, str], cwd: pathlib.Path) -> None:
    """``python -m aloocv`` against the installed wheel."""
    where = _run(
        [python, "-c", "import aloocv, aloocv._core as c; print(aloocv.__file__, c.__file__)"],
        cwd=cwd,
        env=env,
        what="importing aloocv",
    ).split()
    purelib = pathlib.Path(
        _run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            env=env,
            what="locating site-packages",
        ).strip()
    )
    for path in where:
        if purelib not in pathlib.Path(path).parents:
            raise CheckError(f"aloocv imported from {path}, not from the wheel in {purelib}")
    print(f"   aloocv imported from {pathlib.Path(where[0]).parent}", flush=True)
    out = _run([python, "-m", "aloocv"], cwd=cwd, env=env, what="python -m aloocv")
    print("   " + "\n   ".join(out.strip().splitlines()[-4:]), flush=True)


def smoke(python: pathlib.Path, env: dict[str, str], cwd: pathlib.Path) -> str:
    """The smoke subset of a copy of the tests: pytest's summary line."""
    shutil.copytree(ROOT / "tests", cwd / "tests")
    shutil.copy2(ROOT / "pyproject.toml", cwd / "pyproject.toml")
    out = _run(
        [python, "-m", "pytest", "-m", "smoke", "-p", "no:cacheprovider", "-q", "tests"],
        cwd=cwd,
        env=env,
        what="the smoke tests",
    )
    summary = out.strip().splitlines()[-1]
    print(f"   {summary}", flush=True)
    return summary


def check(wheel: pathlib.Path | None, isolation: bool | None, work: pathlib.Path) -> None:
    """Run every stage in the directory ``work``."""
    t_all = time.perf_counter()
    print(f"aloocv wheel check: {ROOT} with {sys.executable} ({sysconfig.get_platform()})")
    if wheel is None:
        t0 = _stage("build")
        wheel = build(work / "dist", isolation)
        _done(t0)
    t0 = _stage(f"repair {wheel.name}")
    wheel = repair(wheel, work / "wheelhouse")
    _done(t0)
    t0 = _stage("install into a fresh environment without a compiler")
    python, env = install(wheel, work / "venv")
    _done(t0)
    t0 = _stage("main job: python -m aloocv")
    (work / "run").mkdir()
    main_job(python, env, work / "run")
    _done(t0)
    t0 = _stage("smoke tests: pytest -m smoke")
    smoke(python, env, work / "run")
    _done(t0)
    print(f"\nwheel check passed ({time.perf_counter() - t_all:.1f} s)", flush=True)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--wheel", type=pathlib.Path, help="check this wheel instead of building")
    iso = p.add_mutually_exclusive_group()
    iso.add_argument(
        "--build-isolation",
        dest="isolation",
        action="store_true",
        default=None,
        help="build in an isolated environment (a full build)",
    )
    iso.add_argument(
        "--no-build-isolation",
        dest="isolation",
        action="store_false",
        help="build with this environment's build requirements (reuses build/{wheel_tag})",
    )
    p.add_argument(
        "--work-dir",
        type=pathlib.Path,
        help="an empty or absent directory to work in, kept afterwards (default: a "
        "temporary one, removed)",
    )
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    wheel = args.wheel.resolve() if args.wheel is not None else None
    try:
        if args.work_dir is not None:
            args.work_dir.mkdir(parents=True, exist_ok=True)
            if any(args.work_dir.iterdir()):
                raise CheckError(f"--work-dir {args.work_dir} is not empty")
            check(wheel, args.isolation, args.work_dir.resolve())
        else:
            with tempfile.TemporaryDirectory(prefix="aloocv-wheel-check-") as tmp:
                check(wheel, args.isolation, pathlib.Path(tmp))
    except CheckError as err:
        print(f"\nwheel check FAILED: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

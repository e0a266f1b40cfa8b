"""The wheel as users get it: tools/wheel_check.py repairs a wheel of this checkout with
auditwheel, installs it into a fresh virtual environment with no compiler reachable, and
runs the main job and the smoke subset against it.

Where aloocv is imported from an installed distribution (the CI's ``pip install
".[test]"``), the wheel checked is the one that install built, packed back from the
installed files (``--from-installed``): no second build. From the source tree
(``PYTHONPATH=python``) there is no such wheel, and the check is skipped unless
``ALOOCV_WHEEL_BUILD=1`` asks for a full build here; ``python tools/wheel_check.py``
runs that build on its own.
"""

from __future__ import annotations

import base64
import csv
import functools
import hashlib
import importlib.metadata
import importlib.util
import io
import os
import pathlib
import subprocess
import sys
import types
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHECK = ROOT / "tools" / "wheel_check.py"
#: Wall-clock limit of the whole check (a full build of the extension included).
CHECK_TIMEOUT_S = 3600
#: Set to 1 to build the wheel in the test when aloocv is not installed.
BUILD_ENV = "ALOOCV_WHEEL_BUILD"
needs_checkout = pytest.mark.skipif(not CHECK.exists(), reason="needs the source checkout (tools/)")


@functools.cache
def _tool() -> types.ModuleType:
    """tools/wheel_check.py as a module."""
    spec = importlib.util.spec_from_file_location("wheel_check", CHECK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _not_installed_reason() -> str | None:
    """``None`` when ``import aloocv`` is the installed distribution's (its files under
    site-packages, as its RECORD lists them); otherwise why the installed wheel cannot
    be checked."""
    import aloocv

    here = pathlib.Path(aloocv.__file__).resolve()
    instead = (
        "there is no installed wheel to check: run `python tools/wheel_check.py` (builds "
        f"a wheel of this checkout and checks it), or set {BUILD_ENV}=1 to build it here"
    )
    if ROOT / "python" in here.parents:
        return f"aloocv is imported from the source tree ({here.parent}); {instead}"
    try:
        dist = importlib.metadata.distribution("aloocv")
    except importlib.metadata.PackageNotFoundError:
        return f"aloocv is imported from {here.parent}, of no installed distribution; {instead}"
    installed = pathlib.Path(str(dist.locate_file("aloocv/__init__.py"))).resolve()
    if installed != here:
        return (
            f"aloocv is imported from {here.parent}, not from the installed "
            f"distribution's {installed.parent}; {instead}"
        )
    return None


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


def _checkout_only(ids: tuple[str, ...]) -> list[str]:
    """The node ids among ``ids`` whose test skips where the checkout's files beyond tests/
    are absent, as in the wheel check's copy of tests/ (a ``skipif`` on the test giving
    "needs the source checkout" as its reason)."""
    found = []
    for node in ids:
        file, _, name = node.partition("::")
        module = importlib.import_module(pathlib.PurePosixPath(file).stem)
        test = getattr(module, name.partition("[")[0])
        if any(
            m.name == "skipif" and "needs the source checkout" in m.kwargs.get("reason", "")
            for m in getattr(test, "pytestmark", [])
        ):
            found.append(node)
    return found


@needs_checkout
def test_smoke_subset_covers_the_main_entry_points():
    files = {i.split("::")[0] for i in _smoke_ids()}
    for name in ("package", "fit", "loo", "kfold", "tune", "estimators"):
        assert f"tests/test_{name}.py" in files, name
    # the checks of the checkout's files are known to the wheel check's count
    assert sorted(_checkout_only(_smoke_ids())) == [
        "tests/test_package.py::test_changelog_has_a_section_per_version_newest_first",
        "tests/test_package.py::test_release_workflow_reads_the_single_sourced_version",
    ]


@pytest.mark.slow
@needs_checkout
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="auditwheel repairs Linux wheels")
def test_wheel_installs_and_runs_without_a_compiler(tmp_path):
    build = os.environ.get(BUILD_ENV) == "1"
    if not build and (reason := _not_installed_reason()) is not None:
        pytest.skip(reason)
    work = tmp_path / "check"
    proc = subprocess.run(
        [sys.executable, str(CHECK), "--work-dir", str(work)]
        + ([] if build else ["--from-installed"]),
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
    assert ("== build" in out) == build
    assert ("repacked aloocv-" in out) == (not build)
    assert f"aloocv imported from {work / 'venv'}" in out
    (repaired,) = (work / "wheelhouse").glob("aloocv-*manylinux*.whl")
    assert repaired.name in out
    summary = [line for line in out.splitlines() if " passed" in line and " in " in line]
    assert summary, out
    # every smoke test passed but those that need the checkout's other files
    n_smoke = len(_smoke_ids()) - len(_checkout_only(_smoke_ids()))
    assert summary[-1].strip().startswith(f"{n_smoke} passed"), (summary[-1], n_smoke)
    assert "failed" not in summary[-1] and "error" not in summary[-1], summary[-1]
    assert "wheel check passed" in out


def _digest(data: bytes) -> str:
    """The wheel specification's RECORD hash, computed here independently of the tool."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")


#: The content of a fake installed distribution's files, paths relative to site-packages.
FAKE_FILES = {
    "fakepkg/__init__.py": b"def main():\n    return 0\n",
    "fakepkg/_core.cpython-311-x86_64-linux-gnu.so": bytes(range(256)) * 3,
    "fakepkg/data/table.csv": b"a,b\n1,2\n",
    "fakepkg-1.2.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.2.0\n",
    "fakepkg-1.2.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
    b"Root-Is-Purelib: false\nTag: py3-none-any\n",
    "fakepkg-1.2.0.dist-info/entry_points.txt": b"[console_scripts]\nfakepkg = fakepkg:main\n",
}
#: What an installer adds: byte-compiled files, the entry point's script, its own records.
FAKE_INSTALLER_FILES = {
    "fakepkg/__pycache__/__init__.cpython-311.pyc": b"\x00pyc",
    "../../../bin/fakepkg": b"#!/usr/bin/python\nfrom fakepkg import main\n",
    "fakepkg-1.2.0.dist-info/INSTALLER": b"pip\n",
    "fakepkg-1.2.0.dist-info/REQUESTED": b"",
    "fakepkg-1.2.0.dist-info/direct_url.json": b'{"url": "file:///src", "dir_info": {}}',
}


def _fake_install(
    prefix: pathlib.Path, monkeypatch: pytest.MonkeyPatch, extra: dict[str, bytes] | None = None
) -> pathlib.Path:
    """A distribution ``fakepkg`` installed as pip installs one, under ``prefix`` (its
    site-packages first on sys.path): the site-packages directory."""
    site = prefix / "lib" / "python3" / "site-packages"
    rows = []
    for rel, data in {**FAKE_FILES, **FAKE_INSTALLER_FILES, **(extra or {})}.items():
        path = pathlib.Path(os.path.normpath(site / rel))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        hashed = not rel.endswith(".pyc")
        rows.append((rel, _digest(data) if hashed else "", str(len(data)) if hashed else ""))
    (site / "fakepkg/_core.cpython-311-x86_64-linux-gnu.so").chmod(0o755)
    rows.append(("fakepkg-1.2.0.dist-info/RECORD", "", ""))
    with open(site / "fakepkg-1.2.0.dist-info/RECORD", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    monkeypatch.syspath_prepend(str(site))
    return site


@needs_checkout
def test_record_digest_is_the_wheel_specs_hash():
    # sha256 of nothing, as pip records an empty REQUESTED file
    assert _tool().record_digest(b"") == "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"
    for data in (b"a", b"ab" * 1000, bytes(range(256))):
        assert _tool().record_digest(data) == _digest(data)
        assert "=" not in _tool().record_digest(data).partition("=")[2]


@needs_checkout
def test_wheel_file_name_from_the_wheel_tags(tmp_path):
    dist_info = tmp_path / "fakepkg-1.2.0.dist-info"
    dist_info.mkdir()
    wheel = dist_info / "WHEEL"
    wheel.write_text("Wheel-Version: 1.0\nTag: cp311-cp311-linux_x86_64\n")
    assert _tool().wheel_file_name(dist_info) == "fakepkg-1.2.0-cp311-cp311-linux_x86_64.whl"
    wheel.write_text("Wheel-Version: 1.0\nBuild: 7\nTag: py3-none-any\nTag: py2-none-any\n")
    assert _tool().wheel_file_name(dist_info) == "fakepkg-1.2.0-7-py2.py3-none-any.whl"
    wheel.write_text("Wheel-Version: 1.0\n")
    with pytest.raises(_tool().CheckError, match="Tag"):
        _tool().wheel_file_name(dist_info)


@needs_checkout
def test_repack_gives_back_the_installed_wheel(tmp_path, monkeypatch):
    site = _fake_install(tmp_path / "env", monkeypatch)
    wheel = _tool().repack_installed(tmp_path / "out", "fakepkg", scripts=tmp_path / "env" / "bin")
    assert wheel.name == "fakepkg-1.2.0-py3-none-any.whl"
    record_name = "fakepkg-1.2.0.dist-info/RECORD"
    with zipfile.ZipFile(wheel) as z:
        assert z.testzip() is None
        names = z.namelist()
        # the wheel's files, nothing the installer added; RECORD last
        assert sorted(names) == sorted([*FAKE_FILES, record_name])
        assert names[-1] == record_name
        for rel, data in FAKE_FILES.items():
            assert z.read(rel) == data, rel
        so = z.getinfo("fakepkg/_core.cpython-311-x86_64-linux-gnu.so")
        assert (so.external_attr >> 16) & 0o777 == 0o755
        rows = list(csv.reader(io.StringIO(z.read(record_name).decode())))
    assert sorted(r[0] for r in rows) == sorted(names)
    for path, digest, size in rows:
        if path == record_name:
            assert (digest, size) == ("", "")
        else:
            assert (digest, int(size)) == (_digest(FAKE_FILES[path]), len(FAKE_FILES[path]))
    # pip installs the repacked wheel to the same files
    target = tmp_path / "target"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-compile"),
            *("--disable-pip-version-check", "--quiet", "--target", str(target), str(wheel)),
        ],
        check=True,
        capture_output=True,
    )
    for rel in FAKE_FILES:
        if not rel.endswith(("RECORD", "INSTALLER", "REQUESTED")):
            assert (target / rel).read_bytes() == (site / rel).read_bytes(), rel


@needs_checkout
def test_repack_refuses_a_modified_install(tmp_path, monkeypatch):
    site = _fake_install(tmp_path / "env", monkeypatch)
    (site / "fakepkg/__init__.py").write_bytes(b"def main():\n    return 1\n")
    with pytest.raises(_tool().CheckError, match="differs from the file pip installed"):
        _tool().repack_installed(tmp_path / "out", "fakepkg", scripts=tmp_path / "env" / "bin")


@needs_checkout
def test_repack_refuses_files_installed_elsewhere(tmp_path, monkeypatch):
    _fake_install(tmp_path / "env", monkeypatch, {"../../../share/fakepkg/notes.txt": b"x"})
    with pytest.raises(_tool().CheckError, match="outside site-packages"):
        _tool().repack_installed(tmp_path / "out", "fakepkg", scripts=tmp_path / "env" / "bin")


@needs_checkout
def test_repack_refuses_an_editable_install(tmp_path, monkeypatch):
    site = tmp_path / "site-packages"
    dist_info = site / "fakepkg-1.2.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.2.0\n")
    (site / "_fakepkg_editable.pth").write_text("/src/python\n")
    (dist_info / "RECORD").write_text(
        f"_fakepkg_editable.pth,{_digest(b'/src/python' + bytes([10]))},12\n"
        "fakepkg-1.2.0.dist-info/RECORD,,\n"
    )
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(_tool().CheckError, match="editable"):
        _tool().repack_installed(tmp_path / "out", "fakepkg")
    with pytest.raises(_tool().CheckError, match="not installed"):
        _tool().repack_installed(tmp_path / "out", "no-such-distribution-here")


@needs_checkout
def test_repack_of_the_installed_aloocv(tmp_path):
    if (reason := _not_installed_reason()) is not None:
        pytest.skip(reason)
    dist = importlib.metadata.distribution("aloocv")
    wheel = _tool().repack_installed(tmp_path)
    (tag,) = [
        line.split(":")[1].strip()
        for line in dist.read_text("WHEEL").splitlines()
        if line.startswith("Tag:")
    ]
    assert wheel.name == f"aloocv-{dist.version}-{tag}.whl"
    # importlib.metadata's reading of the installed RECORD is the reference
    expected = {}
    for file in dist.files:
        name = file.parts[-1]
        if file.parts[0] == ".." or file.hash is None or name in {"INSTALLER", "REQUESTED"}:
            continue
        if name == "direct_url.json":
            continue
        data = file.read_binary()
        assert (file.hash.mode, file.hash.value, file.size) == (
            *_digest(data).split("=", 1),
            len(data),
        )
        expected[str(file.as_posix())] = data
    assert any(p.startswith("aloocv/_core") for p in expected)
    with zipfile.ZipFile(wheel) as z:
        record = f"aloocv-{dist.version}.dist-info/RECORD"
        assert sorted(z.namelist()) == sorted([*expected, record])
        for rel, data in expected.items():
            assert z.read(rel) == data, rel

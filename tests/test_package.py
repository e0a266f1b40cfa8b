"""The package's public surface: the API contract (the names README.md documents), stubs,
typing marker."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

import aloocv
from aloocv import _core

pytestmark = pytest.mark.smoke


def test_api_contract_names():
    for name in (
        "L2",
        "L1",
        "ElasticNet",
        "fit",
        "loo",
        "kfold",
        "tune",
        "kernel_ridge_loo",
        "ALORidgeCV",
        "ALOLogisticRegressionCV",
        "ALOElasticNetCV",
    ):
        assert hasattr(aloocv, name), name
    assert set(aloocv.__all__) <= set(dir(aloocv))


def test_stubs_cover_the_compiled_module():
    pkg = pathlib.Path(aloocv.__file__).parent
    tree = ast.parse((pkg / "_core.pyi").read_text())
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    # module constants, stubbed as annotated names
    stubbed |= {
        n.target.id
        for n in tree.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    stubbed -= {n for n in stubbed if n.startswith("_")}
    public = {n for n in dir(_core) if not n.startswith("_")}
    assert stubbed == public
    assert (pkg / "py.typed").exists()


def test_version_is_single_sourced():
    import importlib.metadata

    assert importlib.metadata.version("aloocv") == aloocv.__version__


#: The checkout's root: absent where the tests run from a copy of tests/ alone (the wheel
#: checks' smoke subset).
_ROOT = pathlib.Path(__file__).resolve().parents[1]
needs_checkout = pytest.mark.skipif(
    not (_ROOT / "CHANGELOG.md").exists() or not (_ROOT / ".github").is_dir(),
    reason="needs the source checkout (CHANGELOG.md, .github/)",
)


def _changelog_versions() -> list[tuple[int, ...]]:
    root = pathlib.Path(__file__).resolve().parents[1]
    text = (root / "CHANGELOG.md").read_text()
    return [
        tuple(int(v) for v in m.split(".")) for m in re.findall(r"(?m)^## (\d+\.\d+\.\d+) ", text)
    ]


@needs_checkout
def test_changelog_has_a_section_per_version_newest_first():
    versions = _changelog_versions()
    current = tuple(int(v) for v in aloocv.__version__.split("."))
    assert versions[0] == current  # the version being released is the top section
    assert versions == sorted(set(versions), reverse=True)  # distinct, newest first
    root = pathlib.Path(__file__).resolve().parents[1]
    assert "## Unreleased" not in (root / "CHANGELOG.md").read_text()


@needs_checkout
def test_release_workflow_reads_the_single_sourced_version():
    """The wheel workflow's tag check parses _version.py as pyproject's regex does."""
    root = pathlib.Path(__file__).resolve().parents[1]
    flow = (root / ".github" / "workflows" / "wheels.yml").read_text()
    assert "python/aloocv/_version.py" in flow and "CHANGELOG.md" in flow
    source = (root / "python" / "aloocv" / "_version.py").read_text()
    assert re.search(r'__version__ = "(.+)"', source).group(1) == aloocv.__version__

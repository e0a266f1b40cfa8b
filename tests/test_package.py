"""The package's public surface: the API contract (the names README.md documents), stubs,
typing marker."""

from __future__ import annotations

import ast
import pathlib

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

"""The examples in the docstrings of the installed package run and print what they say."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import aloocv

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(aloocv.__path__, prefix="aloocv.")
    if not m.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


def test_there_are_examples():
    finder = doctest.DocTestFinder()
    n = sum(len(t.examples) for name in MODULES for t in finder.find(importlib.import_module(name)))
    assert n >= 10

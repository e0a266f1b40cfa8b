"""The command line prints the accuracy certificate and the ALOWarning notes."""

from __future__ import annotations

import re

import numpy as np
import pytest
from sklearn.datasets import load_wine

import aloocv
from aloocv.__main__ import load_default, main


def test_cli_certificate_on_wine(capsys):
    assert main(["--dataset", "wine", "--lam", "0.01", "--methods", "alo", "exact"]) == 0
    out = capsys.readouterr().out
    assert "wine" in out and "accuracy certificate" in out
    # the certificate's estimate of the exact mean against the exact LOO computed here
    d = load_wine()
    X = (d.data - d.data.mean(0)) / d.data.std(0)
    y = (d.target == 0) * 1.0
    exact = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(0.01), method="exact").mean
    with pytest.warns(aloocv.ALOWarning, match="may be off"):
        alo = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(0.01)).mean
    m = re.search(r"exact LOO mean about ([0-9.e+-]+) \(([+-][0-9.]+)%\)", out)
    assert m is not None
    assert abs(float(m.group(1)) - exact) < 0.05 * exact
    assert abs(float(m.group(2)) - 100 * (alo / exact - 1)) < 5.0  # ~ +101%


def test_cli_notes_and_certify_off(capsys):
    # breast cancer at a tiny penalty: a few samples with d_i h_i near 1
    assert main(["--lam", "1e-6", "--no-exact", "--certify", "0"]) == 0
    out = capsys.readouterr().out
    m = re.search(r"note: lambda 1e-06: (\d+) of 569 samples have d_i h_i > 0.99", out)
    assert m is not None
    X, y, _ = load_default()
    X = (X - X.mean(0)) / X.std(0)
    with pytest.warns(aloocv.ALOWarning):
        res = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1e-6))
    assert int(m.group(1)) == int(np.sum(1.0 - res.downdate > aloocv.ALO_UNRELIABLE_DH)) > 0
    assert "accuracy certificate" not in out
    assert main(["--lam", "1", "--certify", "-1"]) == 2

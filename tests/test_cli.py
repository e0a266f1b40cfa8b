"""The command line: python -m aloocv."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

import aloocv
from aloocv.__main__ import main


def test_default_main_job(capsys):
    assert main(["--lam", "0.1", "1", "10"]) == 0
    out = capsys.readouterr().out
    assert "breast cancer" in out and "exact LOO" in out
    # the printed ALOOCV at lambda = 1 is the library's own value on the same data
    d = load_breast_cancer()
    X = (d.data - d.data.mean(0)) / d.data.std(0)
    ref = aloocv.loo(X, d.target.astype(float), loss="logistic", penalty=aloocv.L2(1.0)).mean
    assert f"{ref:.5f}" in out
    assert "lambda chosen by    alo: 1" in out


def test_module_entry_point_runs():
    res = subprocess.run(
        [sys.executable, "-m", "aloocv", "--lam", "1", "--no-exact"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "ALOOCV" in res.stdout


def test_csv_input(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.standard_normal(60)
    path = tmp_path / "d.csv"
    with open(path, "w") as fh:
        fh.write("a,b,target,c\n")
        for xi, yi in zip(X, y):
            fh.write(f"{xi[0]},{xi[1]},{yi},{xi[2]}\n")
    assert main(["--data", str(path), "--target", "target", "--lam", "2", "--no-standardize"]) == 0
    out = capsys.readouterr().out
    ref = aloocv.loo(X, y, loss="squared", penalty=aloocv.L2(2.0))
    assert f"{ref.mean:.5f}" in out
    assert "features: a, b, c" in out


@pytest.mark.parametrize(
    ("content", "args", "msg"),
    [
        (None, ["--target", "y"], "cannot read"),
        ("a,b\n1,2\n", ["--target", "y"], "column 'y' not found"),
        ("a,y\n1,x\n", ["--target", "y"], "not numeric ('x' in data row 1)"),
        ("a,y\n1,2,3\n", ["--target", "y"], "3 fields"),
        ("a,y\n", ["--target", "y"], "no data rows"),
        ("a,y\n1,2\n2,3\n", ["--target", "y", "--lam", "-1"], "--lam values"),
        ("a,y\n1,0.5\n2,1\n3,0\n", ["--target", "y", "--loss", "logistic"], "domain"),
    ],
)
def test_errors(tmp_path, capsys, content, args, msg):
    path = tmp_path / "bad.csv"
    if content is not None:
        path.write_text(content)
    assert main(["--data", str(path), *args]) == 2
    assert msg in capsys.readouterr().err


def test_help_lists_options(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for opt in ("--data", "--target", "--loss", "--lam", "--no-exact", "--n-jobs"):
        assert opt in out


@pytest.mark.parametrize(
    ("args", "loss"),
    [
        (["--loss", "gamma"], "gamma"),
        (["--loss", "tweedie", "--power", "1.3"], aloocv.Tweedie(power=1.3)),
        (["--loss", "huber", "--delta", "0.8"], aloocv.Huber(delta=0.8)),
    ],
)
def test_cli_new_losses(tmp_path, capsys, args, loss):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((50, 2))
    y = rng.gamma(2.0, np.exp(0.3 * X[:, 0]))
    path = tmp_path / "d.csv"
    with open(path, "w") as fh:
        fh.write("a,b,y\n")
        for xi, yi in zip(X, y):
            fh.write(f"{xi[0]},{xi[1]},{yi}\n")
    argv = ["--data", str(path), "--target", "y", "--lam", "2", "--no-standardize", *args]
    assert main(argv) == 0
    ref = aloocv.loo(X, y, loss=loss, penalty=aloocv.L2(2.0))
    assert f"{ref.mean:.5f}" in capsys.readouterr().out


def test_cli_bad_loss_parameter(capsys):
    assert main(["--loss", "tweedie", "--power", "0.5"]) == 2
    assert "power must be >= 1" in capsys.readouterr().err

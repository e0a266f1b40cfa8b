"""The command line's CSV reader (pandas and the standard-library fallback), missing values,
one-hot encoding, multiclass and elastic-net runs, per-lambda flushing, the progress bar
and the speed column."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import aloocv
import aloocv.__main__ as cli
from aloocv.__main__ import main, read_csv


@pytest.fixture(params=["pandas", "csv"])
def reader(request, monkeypatch):
    """Run each test with pandas and with pandas unavailable (the csv-module fallback)."""
    if request.param == "pandas":
        pytest.importorskip("pandas")
    else:
        monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    return request.param


def _write(path, header, rows):
    with open(path, "w") as fh:
        fh.write(",".join(header) + "\n")
        for r in rows:
            fh.write(",".join(str(v) for v in r) + "\n")


def test_missing_values_reported_by_row_and_column(tmp_path, capsys, reader):
    path = tmp_path / "m.csv"
    path.write_text("a,b,y\n1,,2\n3,NA,4\n5,6,nan\n7,8,9\n")
    assert main(["--data", str(path), "--target", "y"]) == 2
    err = capsys.readouterr().err
    assert "3 missing values in 3 rows" in err
    assert "row 1 column 'b', row 2 column 'b', row 3 column 'y'" in err
    assert "--drop-missing" in err
    tab = read_csv(str(path), "y", drop_missing=True)
    assert tab.dropped == 3 and tab.reader == reader
    np.testing.assert_array_equal(tab.X, [[7.0, 8.0]])


def test_drop_missing_runs_on_the_remaining_rows(tmp_path, capsys, reader):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((40, 2))
    y = X @ [1.0, -1.0] + rng.standard_normal(40)
    rows = [[f"{a:.17g}", f"{b:.17g}", f"{c:.17g}"] for (a, b), c in zip(X, y)]
    rows[3][0] = "NA"
    rows[10][2] = ""
    _write(tmp_path / "d.csv", ["a", "b", "y"], rows)
    argv = ["--data", str(tmp_path / "d.csv"), "--target", "y", "--lam", "2"]
    assert main([*argv, "--no-standardize", "--drop-missing", "--no-progress"]) == 0
    out = capsys.readouterr().out
    keep = np.setdiff1d(np.arange(40), [3, 10])
    ref = aloocv.loo(X[keep], y[keep], loss="squared", penalty=aloocv.L2(2.0))
    assert f"{ref.mean:.5f}" in out
    assert "dropped 2 rows with missing values" in out


def test_text_column_error_and_one_hot(tmp_path, capsys, reader):
    rng = np.random.default_rng(6)
    city = rng.choice(["Paris", "Oslo", "Rome"], 60)
    x = rng.standard_normal(60)
    y = x + (city == "Oslo") * 2.0 + 0.3 * rng.standard_normal(60)
    _write(tmp_path / "c.csv", ["x", "city", "y"], zip(x, city, y))
    path = str(tmp_path / "c.csv")
    assert main(["--data", path, "--target", "y"]) == 2
    err = capsys.readouterr().err
    assert f"column 'city' is not numeric ({str(city[0])!r} in data row 1)" in err
    assert "--one-hot" in err
    argv = ["--data", path, "--target", "y", "--one-hot", "--lam", "1", "--no-standardize"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "features: x, city=Oslo, city=Paris, city=Rome" in out
    Xref = np.column_stack([x] + [(city == c) * 1.0 for c in ("Oslo", "Paris", "Rome")])
    tab = read_csv(path, "y", one_hot=True)
    np.testing.assert_allclose(tab.X, Xref, rtol=1e-12)
    ref = aloocv.loo(Xref, y, loss="squared", penalty=aloocv.L2(1.0))
    assert f"{ref.mean:.5f}" in out


def test_multiclass_text_target_is_multinomial(tmp_path, capsys, reader):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((90, 2))
    codes = np.argmax(np.column_stack([X, -X.sum(1)]) + rng.standard_normal((90, 3)), axis=1)
    labels = np.array(["ant", "bee", "cat"])[codes]
    _write(tmp_path / "k.csv", ["u", "v", "kind"], [(a, b, c) for (a, b), c in zip(X, labels)])
    argv = ["--data", str(tmp_path / "k.csv"), "--target", "kind", "--lam", "1"]
    assert main([*argv, "--no-standardize", "--methods", "alo", "exact", "--certify", "0"]) == 0
    out = capsys.readouterr().out
    assert "loss multinomial" in out and "classes: ant=0, bee=1, cat=2" in out
    ref = aloocv.loo(X, codes, loss="multinomial", penalty=aloocv.L2(1.0))
    assert f"{ref.mean:.5f}" in out
    # logistic needs two classes
    assert main([*argv, "--loss", "logistic"]) == 2
    assert "has 3 classes" in capsys.readouterr().err


def test_elastic_net(tmp_path, capsys):
    rng = np.random.default_rng(8)
    X = rng.standard_normal((80, 4))
    y = X[:, 0] - X[:, 1] + 0.5 * rng.standard_normal(80)
    _write(tmp_path / "e.csv", ["a", "b", "c", "d", "y"], [(*xi, yi) for xi, yi in zip(X, y)])
    argv = ["--data", str(tmp_path / "e.csv"), "--target", "y", "--lam", "5", "--no-standardize"]
    assert main([*argv, "--l1-ratio", "0.5", "--methods", "alo", "--certify", "0"]) == 0
    out = capsys.readouterr().out
    assert "elastic net, l1_ratio 0.5" in out
    ref = aloocv.loo(X, y, loss="squared", penalty=aloocv.ElasticNet(2.5, 2.5))
    assert f"{ref.mean:.5f}" in out
    assert main([*argv, "--l1-ratio", "1.5"]) == 2
    assert "--l1-ratio must be in [0, 1]" in capsys.readouterr().err


class _Recorder:
    """A stream that records writes and flushes in order."""

    def __init__(self, events):
        self.events = events

    def write(self, text):
        self.events.append(("write", text))

    def flush(self):
        self.events.append(("flush",))


def test_rows_are_flushed_before_the_next_lambda(monkeypatch):
    """Each lambda's row is written and flushed before the next lambda is computed."""
    events: list = []
    real_loo = cli.loo

    def spy(*args, penalty, **kw):
        events.append(("loo", float(penalty.lam)))
        return real_loo(*args, penalty=penalty, **kw)

    monkeypatch.setattr(cli, "loo", spy)
    X, y, _ = cli.load_default("wine")
    cli.run(cli.standardize(X), y, "logistic", [0.5, 5.0], ["alo"], True, 1, out=_Recorder(events))
    first_loo_2 = events.index(("loo", 5.0))
    before = events[:first_loo_2]
    row1 = max(
        i for i, e in enumerate(before) if e[0] == "write" and e[1].lstrip().startswith("0.5")
    )
    assert ("flush",) in before[row1:]


def test_progress_bar(capsys, monkeypatch):
    pytest.importorskip("tqdm")
    assert main(["--dataset", "wine", "--lam", "1", "3", "--no-exact", "--progress"]) == 0
    err = capsys.readouterr().err
    assert "estimate" in err  # tqdm's unit
    assert main(["--dataset", "wine", "--lam", "1", "--no-exact", "--no-progress"]) == 0
    assert capsys.readouterr().err == ""
    # without tqdm (or a terminal): plain lines, the last one when the run ends
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    assert main(["--dataset", "wine", "--lam", "1", "--no-exact", "--progress"]) == 0
    assert "estimates: 3/3 estimates (100%) in" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("a", "b", "text"),
    [(37.2, 1.0, "37.2x"), (0.5, 1.0, "0.5x"), (1.004, 1.0, "1x"), (12345.0, 1.0, "12345x")],
)
def test_speed_ratio_text(a, b, text):
    assert cli._ratio(a, b) == text


def test_speed_column_is_measured(capsys):
    assert main(["--dataset", "wine", "--lam", "1", "--certify", "0", "--no-progress"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.strip().startswith("1 "))
    t_alo, t_exact, ratio = row.split()[-3:]
    assert ratio.endswith("x")
    # the ratio is that of the printed times (rounded to 3 significant digits each)
    assert float(ratio[:-1]) == pytest.approx(float(t_exact) / float(t_alo), rel=0.02)
    assert "exact/alo: wall time of exact leave-one-out" in out


def test_default_job_runs_without_pandas():
    """README's `python -m aloocv` needs no pandas: the main job on the built-in data."""
    code = (
        "import sys; sys.modules['pandas'] = None\n"
        "from aloocv.__main__ import main\n"
        "sys.exit(main(['--lam', '1', '--no-exact', '--certify', '0']))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "breast cancer" in res.stdout and "ALOOCV" in res.stdout


def test_certificate_line_counts_add_up(capsys):
    """The certificate line's counts: distinct refits = census + distinct drawn samples,
    draws = distinct drawn samples + repeats, census + draws = --certify."""
    argv = ["--lam", "1", "--methods", "alo", "--certify", "20", "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    m = re.search(
        r"exact refits of (\d+) distinct samples of 569: (\d+) with the largest error "
        r"indicator \(refitted for certain\) \+ (\d+) drawn by importance sampling \((\d+) "
        r"draws with replacement, (?:(\d+) of them repeats|no repeats)\)",
        out,
    )
    assert m, out
    total, census, drawn, draws = (int(g) for g in m.groups()[:4])
    repeats = int(m.group(5) or 0)
    assert census + drawn == total and drawn + repeats == draws and census + draws == 20

"""Progress of long calls (aloocv._progress): exact leave-one-out in batches of refits
(the same values as one call, progress after each batch), plain lines without tqdm, and
the command line's progress of a long exact leave-one-out."""

from __future__ import annotations

import io
import re
import sys

import numpy as np
import pytest

import aloocv
import aloocv.__main__ as cli
from aloocv import _progress
from aloocv._progress import Progress
from aloocv.backends.memory.exact_batches import EXACT_PROGRESS_BATCHES, batches
from conftest import make_data


@pytest.fixture
def no_tqdm(monkeypatch):
    """tqdm not installed, and a plain line at every update."""
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    monkeypatch.setattr(_progress, "PLAIN_INTERVAL", 0.0)


def _refit_lines(err: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(r"(\d+)/(\d+) refits", err)]


@pytest.mark.parametrize(
    ("loss", "kw"),
    [
        ("logistic", {}),
        ("logistic", {"solver": "dual"}),
        ("poisson", {}),
        ("squared", {"penalty": aloocv.ElasticNet(2.0, 1.0)}),
        ("multinomial", {}),
    ],
)
def test_exact_in_batches_equals_one_call(loss, kw, no_tqdm, capsys):
    X, y = make_data("logistic" if loss == "multinomial" else loss, 150, 4, seed=501)
    if loss == "multinomial":
        y = np.random.default_rng(502).integers(0, 3, 150).astype(float)
    kw = {"penalty": aloocv.L2(1.0), **kw}
    one = aloocv.loo(X, y, loss=loss, method="exact", n_jobs=1, **kw)
    assert capsys.readouterr().err == ""
    res = aloocv.loo(X, y, loss=loss, method="exact", n_jobs=1, verbose=1, **kw)
    np.testing.assert_allclose(res.losses, one.losses, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(res.predictions, one.predictions, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(res.fit.coef_, one.fit.coef_, rtol=1e-12, atol=1e-14)
    assert res.mean == pytest.approx(one.mean, rel=1e-12)
    # one line per batch, the counts of the batches, the last when it ends
    done = _refit_lines(capsys.readouterr().err)
    sizes = [b.size for b in batches(150, 1)]
    assert [d for d, _ in done] == list(np.cumsum(sizes))
    assert all(t == 150 for _, t in done)


def test_given_coef_is_kept_in_batches(no_tqdm, capsys):
    X, y = make_data("logistic", 120, 3, seed=503)
    f = aloocv.fit(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    kw = dict(loss="logistic", penalty=aloocv.L2(1.0), method="exact", coef=f.coef_)
    one = aloocv.loo(X, y, intercept=f.intercept_, **kw)
    res = aloocv.loo(X, y, intercept=f.intercept_, verbose=True, **kw)
    np.testing.assert_allclose(res.losses, one.losses, rtol=1e-10)
    np.testing.assert_array_equal(res.fit.coef_, one.fit.coef_)


def test_batches_cover_every_sample_once():
    for n, threads in [(1, 1), (7, 4), (150, 1), (1001, 3), (20000, 16)]:
        parts = batches(n, threads)
        np.testing.assert_array_equal(np.concatenate(parts), np.arange(n))
        assert all(p.dtype == np.int64 for p in parts)
        assert len(parts) <= EXACT_PROGRESS_BATCHES
        assert all(p.size >= min(n, 4 * threads) for p in parts[:-1])


def test_singular_refit_in_a_later_batch_names_its_sample(capsys):
    rng = np.random.default_rng(504)
    X = rng.standard_normal((120, 3))
    X[:, 2] = 0.0
    X[100, 2] = 1.0  # without sample 100, feature 2 has no curvature and no penalty
    y = X[:, 0] + rng.standard_normal(120)
    msgs = []
    for verbose in (0, 1):
        with pytest.raises(ValueError, match="singular for sample 100 ") as exc:
            aloocv.loo(
                X,
                y,
                loss="squared",
                penalty=aloocv.L2(0.0),
                method="exact",
                n_jobs=1,
                verbose=verbose,
            )
        msgs.append(str(exc.value))
    assert msgs[0] == msgs[1]
    assert 100 not in batches(120, 1)[0]


def test_verbose_is_validated():
    X, y = make_data("logistic", 40, 2, seed=505)
    with pytest.raises(ValueError, match="verbose must be"):
        aloocv.loo(X, y, method="exact", verbose=-1)


def test_verbose_with_tqdm_shows_a_bar(capsys):
    pytest.importorskip("tqdm")
    X, y = make_data("logistic", 80, 2, seed=506)
    aloocv.loo(X, y, method="exact", verbose=1)
    assert "refit" in capsys.readouterr().err


def test_plain_progress_lines(monkeypatch):
    monkeypatch.setattr(_progress, "PLAIN_INTERVAL", 0.0)
    out = io.StringIO()
    with Progress(10, "work", unit="refit", style="plain", file=out) as p:
        p.update(4)
        p.update(6)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("work: 4/10 refits (40%), ") and "s left" in lines[0]
    assert lines[1].startswith("work: 10/10 refits (100%) in ")
    assert len(lines) == 2
    # a delay hides short calls, a prefix names the call
    out = io.StringIO()
    with _progress.progress_options(delay=60.0, prefix="lambda 1: "):
        with Progress(3, "work", style="plain", file=out) as p:
            p.update(3)
    assert out.getvalue() == ""
    out = io.StringIO()
    with _progress.progress_options(prefix="lambda 1: "):
        with Progress(1, "work", unit="refit", style="plain", file=out) as p:
            p.update(1)
    assert out.getvalue().startswith("lambda 1: work: 1/1 refit (100%) in ")
    with pytest.raises(ValueError, match="style must be"):
        Progress(1, "x", style="fancy")


def test_cli_prints_progress_of_a_long_exact_loo(no_tqdm, monkeypatch, capsys):
    """A run that outlasts the delay prints the exact refits batch by batch on stderr,
    also without tqdm and without a terminal (the default, no --progress)."""
    monkeypatch.setattr(cli, "PROGRESS_DELAY", 0.0)
    argv = ["--dataset", "wine", "--lam", "1", "--methods", "exact", "--certify", "0"]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "exact leave-one-out" in ln]
    assert lines and all(ln.startswith("lambda 1: exact leave-one-out: ") for ln in lines)
    done = _refit_lines(err)
    assert done[-1] == (178, 178) and len(done) > 1
    assert cli.main([*argv, "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    # a run of exact leave-one-out alone prints its table (no ALOOCV column)
    assert "exact LOO" in captured.out and "ALOOCV" not in captured.out

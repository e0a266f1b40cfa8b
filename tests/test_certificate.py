"""The accuracy certificate (``LOOResult.certify``) on real data: the harness of real-data
cases against scikit-learn refits, the design (census by the error indicator, take-all
rule), the estimator's interval and its coverage over repeated draws against exact
leave-one-out computed here, and its refusal to claim what its draws cannot give."""

from __future__ import annotations

import functools
import importlib.util
import math
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import aloocv
from aloocv.results.certificate import CERTIFICATE_DRAW_SHARE
from conftest import loss_value, sklearn_glm

_BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "real_cases.py"


@functools.cache
def real_cases():
    """benchmarks/real_cases.py as a module (it is not part of the package)."""
    spec = importlib.util.spec_from_file_location("real_cases", _BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["real_cases"] = mod  # dataclasses look their module up while defined
    spec.loader.exec_module(mod)
    return mod


def alo_and_exact(case):
    """Plain ALO (its self-check's ALOWarning is not what is tested here) and exact LOO."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", aloocv.ALOWarning)
        res = aloocv.loo(case.X, case.y, loss=case.loss, penalty=case.penalty)
    exact = aloocv.loo(case.X, case.y, loss=case.loss, penalty=case.penalty, method="exact")
    return res, exact


# ----------------------------------------------------------------------------- the harness
def test_real_cases_cover_the_issue_cases():
    rc = real_cases()
    names = {c.name for c in rc.cases(rc.SKLEARN_SETS)}
    for name in (
        "breast_cancer/logistic/lam=1",
        "breast_cancer/logistic/lam=0.1",
        "breast_cancer/logistic/lam=0.001",
        "breast_cancer_deg2/logistic/lam=0.1",
        "wine0_deg2/logistic/lam=0.035",
        "wine3/multinomial/lam=0.01",
        "digits10/multinomial/lam=0.01",
        "diabetes_pos/tweedie3/lam=0.01",
    ):
        assert name in names, name
    c = rc.case("wine0/logistic/lam=1")
    np.testing.assert_allclose(c.X.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(c.X.std(axis=0), 1.0, rtol=1e-12)


def test_exact_loo_of_a_case_equals_sklearn_refits(tmp_path, monkeypatch):
    rc = real_cases()
    monkeypatch.setattr(rc, "CACHE", tmp_path)
    c = rc.case("wine0/logistic/lam=1")
    ex = rc.exact_loo(c)
    assert ex.method == "exact" and len(list(tmp_path.iterdir())) == 1
    # independent reference: all 178 refits by scikit-learn (C = 1 / lambda)
    lam = float(c.penalty.lam)
    ref = np.empty(c.n)
    for i in range(c.n):
        keep = np.arange(c.n) != i
        coef, b = sklearn_glm("logistic", c.X[keep], c.y[keep], lam)
        ref[i] = loss_value("logistic", c.y[i], c.X[i] @ coef + b)
    np.testing.assert_allclose(ex.losses, ref, rtol=1e-6, atol=1e-9)
    again = rc.exact_loo(c)  # from the cache
    np.testing.assert_array_equal(again.losses, ex.losses)


def test_exact_loo_of_a_poisson_case_equals_sklearn_refits(tmp_path, monkeypatch):
    rc = real_cases()
    monkeypatch.setattr(rc, "CACHE", tmp_path)
    c = rc.case("diabetes_count/poisson/lam=0.01")
    ex = rc.exact_loo(c)
    lam = float(c.penalty.lam)
    rows = np.random.default_rng(0).choice(c.n, size=25, replace=False)
    for i in rows:
        keep = np.arange(c.n) != i
        coef, b = sklearn_glm("poisson", c.X[keep], c.y[keep], lam)
        assert ex.predictions[i] == pytest.approx(c.X[i] @ coef + b, rel=1e-6, abs=1e-8)


# ----------------------------------------------------------------------------- design
def test_census_is_ranked_by_the_indicator_and_grows_by_the_take_all_rule():
    rc = real_cases()
    c = rc.case("breast_cancer/logistic/lam=0.001")
    res, _ = alo_and_exact(c)
    m = 20
    cert = res.certify(n_samples=m, random_state=0)
    k = cert.n_worst
    order = np.argsort(-res.indicator, kind="stable")
    np.testing.assert_array_equal(cert.indices[:k], order[:k])
    assert m // 5 <= k <= m - math.ceil(CERTIFICATE_DRAW_SHARE * m)
    assert cert.n_draws == m - k and cert.score == "indicator"
    # the take-all rule: each census sample beyond the minimum would be drawn at least once
    # in expectation, and the first one left out would not (unless the census is full)
    s = res.indicator[order]
    tail = np.cumsum(s[::-1])[::-1]
    for j in range(m // 5, k):
        assert (m - j) * s[j] >= tail[j]
    if k < m - math.ceil(CERTIFICATE_DRAW_SHARE * m):
        assert (m - k) * s[k] < tail[k]
    # concentrated errors: the census grows past the minimum here
    assert k > m // 5


def test_squared_loss_ranks_by_the_loss_change_and_covers_rounding():
    rc = real_cases()
    c = rc.case("diabetes/squared/lam=0.1")
    res, exact = alo_and_exact(c)
    assert not np.any(res.indicator)  # ALO is exact for the squared loss with an L2 penalty
    truth = res.mean - exact.mean
    for s in range(5):
        cert = res.certify(n_samples=10, random_state=s)
        assert cert.score == "change" and "largest loss change" in str(cert)
        assert cert.ci_low <= truth <= cert.ci_high
        assert cert.ci_high - cert.ci_low < 1e-10 * exact.mean


# ----------------------------------------------------------------------------- coverage
# Cases where the former certificate (census by the loss change, t-interval of the draws
# alone) covered the true error in 78-88% of 50 seeds: breast cancer at lambda = 1 (ALO
# +0.3%) and 0.1 (-1.9%), iris (versicolor vs rest) at lambda = 1 (-0.03%), 3-class wine at
# lambda = 1 (+1.8%). The present design covers each in 100% of 50 seeds
# (benchmarks/certificate_coverage.py).
COVERAGE_CASES = (
    "breast_cancer/logistic/lam=1",
    "breast_cancer/logistic/lam=0.1",
    "iris_versicolor/logistic/lam=1",
    "wine3/multinomial/lam=1",
)
#: Seeds per case; at the nominal 95% the chance of fewer than 34 hits in 40 is 1.3%.
SEEDS = 40
MIN_HITS = 34


@pytest.mark.parametrize("name", COVERAGE_CASES)
def test_interval_covers_the_true_error_over_repeated_draws(name):
    rc = real_cases()
    c = rc.case(name)
    res, exact = alo_and_exact(c)
    truth = res.mean - exact.mean
    certs = [res.certify(n_samples=20, random_state=s) for s in range(SEEDS)]
    hits = sum(ct.ci_low <= truth <= ct.ci_high for ct in certs)
    assert hits >= MIN_HITS, (name, hits)
    # the estimate is unbiased (Hansen-Hurwitz): the seeds' mean within 4 standard errors
    est = np.array([ct.mean_error for ct in certs])
    assert abs(est.mean() - truth) <= 4.0 * est.std(ddof=1) / math.sqrt(SEEDS) + 1e-12


def test_measured_errors_equal_exact_refits():
    rc = real_cases()
    c = rc.case("wine3/multinomial/lam=0.01")
    res, exact = alo_and_exact(c)
    cert = res.certify(n_samples=20, random_state=3)
    np.testing.assert_allclose(cert.exact_losses, exact.losses[cert.indices], rtol=1e-6)
    np.testing.assert_allclose(cert.errors, res.losses[cert.indices] - exact.losses[cert.indices],
                               rtol=1e-5, atol=1e-9)  # fmt: skip
    assert cert.n_unrefitted == c.n - cert.indices.size


# ----------------------------------------------------------------------------- refusal
def test_too_few_draws_give_no_interval_and_say_so():
    rc = real_cases()
    c = rc.case("wine0/logistic/lam=0.01")
    res, exact = alo_and_exact(c)
    for kw in (dict(n_samples=1), dict(n_samples=2), dict(n_samples=6, n_worst=5)):
        cert = res.certify(**kw)
        assert cert.ci_low is None and cert.ci_high is None, kw
        assert cert.n_draws < 2
        text = str(cert)
        assert "no 95% interval" in text and "at least 2 are needed" in text
        assert math.isfinite(cert.mean_error)
    # a full census is exact, with a zero-width interval
    cert = res.certify(n_samples=c.n)
    assert cert.n_unrefitted == 0 and cert.n_draws == 0
    assert cert.ci_low == cert.ci_high == cert.mean_error
    assert cert.mean_error == pytest.approx(res.mean - exact.mean, rel=1e-6)


# ----------------------------------------------------------------------------- summary
_SUMMARY = re.compile(
    r"exact refits of (\d+) distinct samples of (\d+): (\d+) with the largest error indicator "
    r"\(refitted for certain\) \+ (\d+) drawn by importance sampling \((\d+) draws? with "
    r"replacement, (?:(\d+) of them repeats|no repeats)\)"
)


def test_summary_counts_add_up():
    """The printed counts: distinct refits = census + distinct drawn samples, and draws =
    distinct drawn samples + repeats (draws are with replacement)."""
    from conftest import make_data

    X, y = make_data("logistic", 300, 5, seed=506, scale=3.0)
    res = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(0.3))
    repeats_seen = False
    for n_samples in (5, 20, 60):
        for seed in range(4):
            cert = res.certify(n_samples=n_samples, random_state=seed)
            m = _SUMMARY.search(str(cert))
            assert m, str(cert)
            total, pop, census, drawn, draws = (int(g) for g in m.groups()[:5])
            repeats = int(m.group(6) or 0)
            # against the certificate's own arrays, counted here
            assert total == cert.indices.size == np.unique(cert.indices).size
            assert pop == 300 and census == cert.n_worst and draws == cert.n_draws
            assert census + drawn == total
            assert drawn + repeats == draws
            assert drawn == np.unique(cert.indices[cert.n_worst :]).size == cert.n_drawn_samples
            assert census + draws == n_samples  # the refits asked for
            repeats_seen |= repeats > 0
    assert repeats_seen  # the case the counts once failed to add up in

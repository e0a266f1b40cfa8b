"""The accuracy certificate of an approximate leave-one-out result: which samples to
refit (a census of the worst plus importance sampling) and the estimate of the error of
the mean with its Student-t interval (``docs/math/alo.md``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "CERTIFICATE_PROXY_SHARE",
    "Certificate",
    "CertificateDesign",
    "certificate_design",
    "certificate_from",
    "check_certify_options",
]


#: Share of the certificate's random draws that follow the error proxy (the rest is
#: uniform: a defensive mixture, so that no sample has a tiny inclusion probability).
CERTIFICATE_PROXY_SHARE = 0.95


@dataclass(frozen=True)
class Certificate:
    """ALO-vs-exact accuracy of a leave-one-out result, measured on refitted samples.

    Design: a census plus importance sampling, guided by the error proxy
    ``s_i = w_i |l(y_i, eta~_i) - l(y_i, eta_i)|`` (how far the approximate method moves
    sample i's loss from its in-sample value; the errors concentrate where it is large).
    The ``n_worst`` samples with the largest ``s_i`` are refitted (a census: their errors
    enter exactly); then ``n_draws`` samples are drawn with replacement from the others
    with probabilities ``q_i = 0.95 s_i / sum(s) + 0.05 / N`` (probability proportional to
    size, mixed with uniform). The total error is estimated by the census sum plus the
    Hansen-Hurwitz estimator ``mean_j(w_j e_j / q_j)`` of the rest, unbiased whatever the
    proxy's quality; the confidence interval is a Student-t interval from the sample
    variance of the ``w_j e_j / q_j`` (``n_draws - 1`` degrees of freedom). It is exact
    (zero width) when every sample is refitted. Simulated coverage of the 95% interval
    with 20 refits (4 census, 16 draws) on three logistic problems: 0.92-0.95.

    Attributes
    ----------
    indices : ndarray of int
        The refitted samples (distinct; census first).
    approx_losses, exact_losses : ndarray
        Their approximate and exact leave-one-out losses.
    errors : ndarray
        ``approx_losses - exact_losses``.
    median_abs_error, max_abs_error : float
        Of ``errors``.
    mean_error : float
        Estimated error of the mean: ALO mean minus exact LOO mean.
    ci_low, ci_high : float
        The ``confidence`` interval of ``mean_error``.
    approx_mean : float
        The approximate result's mean.
    relative_error : float
        ``mean_error / (approx_mean - mean_error)``: the estimated relative error of the
        approximate mean against the exact LOO mean.
    confidence : float
    n_worst, n_draws : int
        Census size and number of random draws.
    n_population : int
        Samples with positive weight.
    method : str
        The approximate method certified.
    """

    indices: np.ndarray
    approx_losses: np.ndarray
    exact_losses: np.ndarray
    errors: np.ndarray
    median_abs_error: float
    max_abs_error: float
    mean_error: float
    ci_low: float
    ci_high: float
    approx_mean: float
    relative_error: float
    confidence: float
    n_worst: int
    n_draws: int
    n_population: int
    method: str

    @property
    def exact_mean(self) -> float:
        """Estimated exact LOO mean: ``approx_mean - mean_error``."""
        return self.approx_mean - self.mean_error

    def __str__(self) -> str:
        pct = 100.0 * self.confidence
        return (
            f"accuracy certificate: {self.method} vs exact refits of {self.indices.size} of "
            f"{self.n_population} samples ({self.n_worst} with the largest loss change, "
            f"{self.n_draws} drawn by importance sampling)\n"
            f"  per-sample |error|: median {self.median_abs_error:.3g}, "
            f"max {self.max_abs_error:.3g}\n"
            f"  error of the mean: {self.mean_error:+.4g} ({pct:g}% CI "
            f"[{self.ci_low:+.4g}, {self.ci_high:+.4g}]); {self.method} mean "
            f"{self.approx_mean:.5g}, exact LOO mean about {self.exact_mean:.5g} "
            f"({100.0 * self.relative_error:+.1f}%)"
        )


@dataclass(frozen=True)
class CertificateDesign:
    """The samples a certificate refits and how they were chosen."""

    census: np.ndarray  # refitted with certainty
    draws: np.ndarray  # drawn with replacement (may repeat)
    q: np.ndarray  # their draw probabilities
    n_population: int

    @property
    def refits(self) -> np.ndarray:
        """Distinct samples to refit, census first."""
        d = self.draws[~np.isin(self.draws, self.census)]
        _, first = np.unique(d, return_index=True)
        return np.concatenate([self.census, d[np.sort(first)]]).astype(np.int64)


def check_certify_options(n_samples, n_worst, confidence) -> float:
    """Checks the arguments of ``certify()``; returns the confidence as a float."""
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)):
        raise TypeError(f"n_samples must be an integer, got {n_samples!r}")
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    if n_worst is not None and (
        isinstance(n_worst, bool) or not isinstance(n_worst, (int, np.integer)) or n_worst < 0
    ):
        raise ValueError(f"n_worst must be a non-negative integer, got {n_worst!r}")
    if n_worst is not None and n_worst > n_samples:
        raise ValueError(
            f"n_worst={n_worst} exceeds n_samples={n_samples}: the worst samples are refitted "
            "among the n_samples refits (use n_worst <= n_samples)"
        )
    confidence = float(confidence)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return confidence


def certificate_design(
    proxy: np.ndarray,
    weights: np.ndarray | None,
    n_samples: int,
    n_worst: int | None,
    random_state,
) -> CertificateDesign:
    n = proxy.shape[0]
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    cand = np.flatnonzero(w > 0)
    score = w * np.where(np.isfinite(proxy), np.abs(proxy), np.inf)
    m = min(int(n_samples), cand.size)
    if m == cand.size:  # every sample: an exact census
        return CertificateDesign(cand.astype(np.int64), cand[:0], np.empty(0), cand.size)
    k = max(1, m // 5) if n_worst is None else min(int(n_worst), m)
    order = cand[np.argsort(-score[cand], kind="stable")]
    census, rest = order[:k], np.sort(order[k:])
    if m == k:
        return CertificateDesign(census.astype(np.int64), rest[:0], np.empty(0), cand.size)
    s = score[rest]
    s = np.where(np.isfinite(s), s, np.max(s[np.isfinite(s)], initial=1.0))
    total = s.sum()
    q = np.full(rest.size, 1.0 / rest.size)
    if total > 0:
        q = CERTIFICATE_PROXY_SHARE * s / total + (1.0 - CERTIFICATE_PROXY_SHARE) * q
    q /= q.sum()
    rng = np.random.default_rng(random_state)
    j = rng.choice(rest.size, size=m - k, replace=True, p=q)
    return CertificateDesign(census.astype(np.int64), rest[j].astype(np.int64), q[j], cand.size)


def certificate_from(
    approx: np.ndarray,
    exact: np.ndarray,
    design: CertificateDesign,
    weights: np.ndarray | None,
    approx_mean: float,
    confidence: float,
    method: str,
) -> Certificate:
    from scipy import stats

    n = approx.shape[0]
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    W = float(w.sum())
    idx = design.refits  # exact[k] is the exact LOO loss of sample idx[k]
    e = approx[idx] - exact
    k = design.census.size  # the census comes first in idx
    census = float(np.sum(w[idx[:k]] * e[:k]))
    mb = design.draws.size
    half = 0.0
    total = census
    if mb:
        order = np.argsort(idx)
        pos = order[np.searchsorted(idx, design.draws, sorter=order)]
        z = w[design.draws] * e[pos] / design.q
        total += float(z.mean())
        if mb >= 2:
            t = float(stats.t.ppf(0.5 + confidence / 2.0, mb - 1))
            half = t * float(z.std(ddof=1)) / np.sqrt(mb)
        else:
            half = float("inf")
    mean_error, hw = total / W, half / W
    absd = np.abs(e)
    exact_mean = approx_mean - mean_error
    return Certificate(
        indices=idx,
        approx_losses=approx[idx],
        exact_losses=exact,
        errors=e,
        median_abs_error=float(np.median(absd)),
        max_abs_error=float(absd.max()),
        mean_error=mean_error,
        ci_low=mean_error - hw,
        ci_high=mean_error + hw,
        approx_mean=approx_mean,
        relative_error=mean_error / exact_mean if exact_mean != 0 else float("inf"),
        confidence=confidence,
        n_worst=int(design.census.size),
        n_draws=int(mb),
        n_population=design.n_population,
        method=method,
    )

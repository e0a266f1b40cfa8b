"""The public verbs: :func:`fit`, :func:`loo` and :func:`kfold`.

Each builds one :class:`~aloocv.problem.Problem` (validated once), asks the route table
(:mod:`aloocv.backends.route`) for its route, and hands both to the backend. No verb asks
itself whether the data are on dask, the loss multinomial or y several targets.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._validation import LOO_METHODS, check_bool, check_rtol, check_verbose
from .backends import route
from .backends.common import LOORequest
from .folds import KFOLD_METHODS, FoldRequest, refine_folds
from .losses import Loss
from .penalties import Penalty
from .problem import Problem
from .results import (
    FitResult,
    KFoldResult,
    LOOResult,
    MultiTargetKFoldResult,
    MultiTargetLOOResult,
    trusted,
)

__all__ = ["fit", "kfold", "loo"]


def fit(
    X: ArrayLike,
    y: ArrayLike,
    loss: str | Loss = "logistic",
    penalty: Penalty | float | None = None,
    fit_intercept: bool = True,
    sample_weight: ArrayLike | None = None,
    tol: float = 1e-8,
    max_iter: int = 100,
    n_jobs: int | None = None,
    warm_start: FitResult | None = None,
    solver: str = "auto",
    offset: ArrayLike | None = None,
    memory_limit: float | str | None = None,
) -> FitResult:
    """Fit ``min_beta sum_i w_i l(y_i, x~_i^T beta) + lambda^T r(theta)`` by Newton's method.

    Parameters
    ----------
    X : array_like of shape (n_samples, n_features)
        float64 in C or Fortran order (or any strided view) is used without a
        copy; float32 and integer input are converted once. A dask array chunked by
        rows (or a dask DataFrame) is processed chunk by chunk on the active dask
        scheduler, never gathered (the dask backend, :mod:`aloocv.backends.dask`).
    y : array_like of shape (n_samples,)
        Response in the loss's domain: real (``"squared"``, Huber), in {0, 1}
        (``"logistic"``), proportions in [0, 1] (``"binomial"``, trials as
        ``sample_weight``), counts >= 0 (``"poisson"``), > 0 (``"gamma"``), >= 0 or > 0
        (Tweedie, by its power), integer class labels 0..K-1 (``"multinomial"``).
    loss : str or Loss
        A name of :data:`aloocv.losses.REGISTRY` (``"squared"``, ``"logistic"``,
        ``"poisson"``, ``"gamma"``, ``"binomial"``), ``"multinomial"`` (the softmax
        cross-entropy of K classes: scikit-learn's multinomial
        ``LogisticRegression(C=1/lam)``, ``coef_`` of shape (K, p), ``intercept_`` (K,)
        centered to sum zero, an L2 penalty > 0 on every feature; see
        :class:`aloocv.losses.Multinomial`) or a parametrized loss object
        (``aloocv.Tweedie(power=1.5)``, ``aloocv.Huber(delta=1.35)``).
    penalty : Penalty or float, default L2(1.0)
        ``aloocv.L2(lam)`` with a scalar or per-feature ``lam``; a float means L2.
    fit_intercept : bool
        Fit an unpenalized intercept.
    sample_weight : array_like of shape (n_samples,), optional
        Non-negative weights multiplying each sample's loss.
    tol : float
        Stop when ``max_j |gradient_j| / sum(sample_weight) <= tol``.
    max_iter : int
        Maximum Newton iterations; a ``ConvergenceWarning`` is emitted when reached.
    n_jobs : int, optional
        OpenMP threads (None: OpenMP's default, -1: all cores). For dask input: the
        threads of each chunk task (None: 1; dask runs the chunks in parallel).
    warm_start : FitResult, optional
        Start Newton from this solution (primal solver).
    solver : {"auto", "primal", "dual", "matrix_free"}
        ``"primal"``: Newton on the p x p Hessian, O(n p^2 + p^3) per step.
        ``"dual"``: Newton on the n x n system with ``K = X P^{-1} X^T`` computed once
        (O(n^2 p)), then O(n^3) per step; needs an L2 penalty > 0 on every feature.
        ``"matrix_free"``: Newton-CG from Hessian-vector products, O(nnz) each, no
        p x p or n x n matrix (wide or sparse X; L2 penalties; ``docs/math/matrix_free.md``).
        ``"auto"``: the dual when n < p and it applies; the matrix-free route where its
        modelled cost is lower (:func:`aloocv.backends.route.costs`).
    offset : array_like of shape (n_samples,), optional
        Known part of the linear predictor: ``eta = X coef + intercept + offset``
        (e.g. ``log(exposure)`` with a log link).
    memory_limit : int, float or str, optional
        The memory budget of the route's large matrices (the ``p x p`` Hessian and its
        factor, the dual route's ``n x n`` kernel, the multinomial ``Kp x Kp`` Hessian):
        bytes, or a string such as ``"2GB"``, ``"1.5 GiB"``, ``"500MB"``. None (default):
        the memory available now. Before it allocates them the call compares their size
        with 80% of the budget and raises ``MemoryError`` naming the matrix, its size and
        the route to take instead (e.g. ``solver="matrix_free"``); see
        ``docs/memory.md``.

    Returns
    -------
    FitResult
        With ``coef_``, ``intercept_``, ``n_iter_``, ``converged_``.

    Notes
    -----
    Scaling conventions: ``L2(lam)`` with squared loss equals scikit-learn's
    ``Ridge(alpha=lam)``; with logistic loss ``LogisticRegression(C=1/lam)``; with
    Poisson, gamma and Tweedie losses ``PoissonRegressor`` / ``GammaRegressor`` /
    ``TweedieRegressor(alpha=lam/n_samples)``.

    Examples
    --------
    >>> import numpy as np, aloocv
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 3)); y = (X[:, 0] > 0).astype(float)
    >>> res = aloocv.fit(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    >>> res.converged_
    True
    >>> try:  # the 2001 x 2001 Hessian (and its factor) does not fit 10 MB
    ...     aloocv.fit(np.zeros((10, 2000)), np.zeros(10), loss="squared",
    ...                solver="primal", memory_limit="10MB")
    ... except MemoryError as e:
    ...     print(str(e).split(" (with")[0])
    aloocv.fit: the 2001 x 2001 Hessian of the primal route
    """
    pb = Problem.build(
        X,
        y,
        loss=loss,
        penalty=penalty,
        fit_intercept=fit_intercept,
        sample_weight=sample_weight,
        offset=offset,
        tol=tol,
        max_iter=max_iter,
        n_jobs=n_jobs,
        multi_target=False,
        memory_limit=memory_limit,
    )
    return route.fit(pb, route.choose(pb, "fit", solver=solver), warm_start)


def loo(
    X: ArrayLike,
    y: ArrayLike,
    loss: str | Loss = "logistic",
    penalty: Penalty | float | None = None,
    method: str = "alo",
    fit_intercept: bool = True,
    sample_weight: ArrayLike | None = None,
    coef: ArrayLike | None = None,
    intercept: float | None = None,
    tol: float = 1e-8,
    max_iter: int = 100,
    n_jobs: int | None = None,
    return_gradient: bool = False,
    solver: str = "auto",
    gradient: str = "exact",
    offset: ArrayLike | None = None,
    rtol: float | None = None,
    memory_limit: float | str | None = None,
    verbose: bool | int = 0,
) -> LOOResult | MultiTargetLOOResult:
    """Leave-one-out cross-validation of an L2-penalized GLM.

    Parameters
    ----------
    X, y, loss, penalty, fit_intercept, sample_weight, tol, max_iter, n_jobs, offset
    memory_limit
        As in :func:`aloocv.fit`. ``y`` may also be 2-d, ``(n_samples, n_targets)``, for
        ``loss="squared"`` with an L2 penalty (scalar, or per feature with every entry
        > 0): every target shares one decomposition of ``X`` and the result is a
        :class:`aloocv.MultiTargetLOOResult` (``losses`` and ``predictions`` of shape
        ``(n_samples, n_targets)``, ``mean`` and ``stderr`` of shape ``(n_targets,)``,
        ``coef`` of shape ``(n_targets, n_features)``); ``coef=``, ``intercept=``,
        ``offset=``, ``solver=`` and ``return_gradient=`` are not available there, and
        ``"exact"`` takes the closed form (exact for this model, Corollary 2) instead of
        refits. A column vector ``(n_samples, 1)`` is the 1-d case. Other losses refuse a
        2-d y.
    method : {"alo", "exact", "if", "lemma3"}
        ``"alo"``: the paper's Theorem 1 with the exact rank-one downdate of the
        Hessian, ``eta~_i = eta_i + w_i l'_i h_i / (1 - d_i h_i)``; costs about one
        extra pass over X after the fit (it reuses the fit's Cholesky factor).
        ``"if"``: the influence-function approximation ``eta_i + w_i l'_i h_i`` (no
        downdate). ``"lemma3"``: the first-order expansion
        ``l(y_i, eta_i) + l'_i w_i l'_i h_i / (1 - d_i h_i)``. ``"exact"``: n refits
        without each sample, warm-started from the full fit, solved to ``tol``, in
        parallel over samples.
    coef, intercept : optional
        Bring your own fit: use these coefficients (e.g. from a scikit-learn model
        fitted on the same objective) instead of fitting. They should minimize the
        objective; a ``ConvergenceWarning`` says when their gradient is not small.
    return_gradient : bool
        Also compute the ALO hypergradient (``method="alo"`` only) in the same
        blocked pass that computes the leverages; see :attr:`LOOResult.gradient`.
    solver : {"auto", "primal", "dual", "matrix_free"}
        As in :func:`aloocv.fit`: with ``"dual"`` (default when n < p, L2 > 0 on every
        feature) the leverages come from the n x n system, ``O(n^2 p + n^3)``, also
        at a given ``coef`` and for the hypergradient. With ``"matrix_free"`` (``"alo"``
        and ``"exact"``) the leverages are Hutchinson estimates from 16-128 Rademacher probes
        solved by preconditioned CG, debiased by a jackknife over probe groups; their
        standard error and more are in :attr:`LOOResult.randomized`, and ``rtol=``
        adds probes before exact refits.
    gradient : {"exact", "paper"}
        With ``return_gradient=True``: the exact derivative of :attr:`LOOResult.mean`
        (default; reverse mode, about three passes over X beyond ALO, any number of
        parameters), or the paper's approximation (Lemma 4, eq. 14-16; primal route only).
    rtol : float in (0, 1), optional
        An error budget for ``method="alo"``: the returned :attr:`LOOResult.mean` is
        within ``rtol`` (relative) of exact leave-one-out at 95% confidence. Exact
        warm-started refits of the samples ALO's error indicator ranks first (their
        ``losses`` become exact), the error of the rest estimated by importance sampling;
        the census grows until the interval fits the budget (at worst every sample is
        refitted: exact leave-one-out). :attr:`LOOResult.error_estimate` says which
        samples were refitted and the estimated error with its interval
        (``docs/math/trust.md``). None (default): plain ALO, which checks itself by a few
        exact refits when its indicator says there is risk and warns
        (:class:`aloocv.ALOWarning`) when the error of the mean may exceed 2%. The
        gradient (``return_gradient=True``) stays plain ALO's.

    Returns
    -------
    LOOResult
        ``losses``, ``predictions``, ``leverages``, ``mean``, ``stderr``, ``fit``. For a
        dask X a ``DaskLOOResult``: the per-sample values are dask arrays chunked like
        X's rows; ``"exact"`` refits in parallel tasks, each on the whole X gathered on
        one worker (X must fit in a worker's memory).

    Examples
    --------
    >>> import numpy as np, aloocv
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((300, 5)); y = (X[:, 0] + rng.standard_normal(300) > 0) * 1.0
    >>> res = aloocv.loo(X, y, loss="logistic", penalty=aloocv.L2(1.0))
    >>> res.losses.shape
    (300,)
    """
    if not isinstance(method, str) or method not in LOO_METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(LOO_METHODS)}")
    return_gradient = check_bool(return_gradient, "return_gradient")
    if return_gradient and method != "alo":
        raise ValueError("return_gradient=True needs method='alo'")
    pb = Problem.build(
        X,
        y,
        loss=loss,
        penalty=penalty,
        fit_intercept=fit_intercept,
        sample_weight=sample_weight,
        offset=offset,
        tol=tol,
        max_iter=max_iter,
        n_jobs=n_jobs,
        memory_limit=memory_limit,
    )
    rtol = check_rtol(rtol, method)
    verbose = check_verbose(verbose)
    req = LOORequest(method, coef, intercept, return_gradient, gradient, rtol, verbose)
    res = route.loo(pb, route.choose(pb, "loo", solver=solver, loo=req), req)
    return trusted(res, rtol)


def kfold(
    X: ArrayLike,
    y: ArrayLike,
    loss: Any = "logistic",
    penalty: Penalty | float | None = None,
    n_folds: int | None = None,
    method: str = "alo",
    folds: ArrayLike | None = None,
    random_state: int | np.random.Generator | None = 0,
    fit_intercept: bool = True,
    sample_weight: ArrayLike | None = None,
    tol: float = 1e-8,
    max_iter: int = 100,
    n_jobs: int | None = None,
    offset: ArrayLike | None = None,
    cv: Any = None,
    groups: ArrayLike | None = None,
    rtol: float | None = None,
    memory_limit: float | str | None = None,
) -> KFoldResult | MultiTargetKFoldResult:
    """K-fold (or leave-q-out) cross-validation of a penalized GLM.

    Parameters
    ----------
    X, y, loss, penalty, fit_intercept, sample_weight, tol, max_iter, n_jobs, offset
    memory_limit
        As in :func:`aloocv.fit`. A 2-d ``y`` ``(n_samples, n_targets)`` with
        ``loss="squared"`` and an L2 penalty gives a
        :class:`aloocv.MultiTargetKFoldResult` (per-target losses, fold means, mean and
        stderr; every target shares one decomposition, ``"alo"`` is the exact fold
        downdate, ``"exact"`` one refit per fold for all targets at once; no ``offset=``).
    n_folds : int, optional
        Number of shuffled, nearly equal folds (default 10). With ``folds=`` it may be
        given as a check: it must equal the number of distinct labels. ``n_folds ==
        n_samples`` is leave-one-out.
    method : {"alo", "exact"}
        ``"alo"``: the leave-q-out extension of ALO (the paper's remark after
        Definition 6). From the full fit, one Newton step per fold S on the exact
        Hessian without S (a rank-q downdate of the fit's Cholesky factor), in the
        Woodbury form ``eta~_S = eta_S + K_S (I - D_S K_S)^{-1} g_S`` with ``K_S =
        X~_S H^{-1} X~_S^T`` for small folds, or ``beta~_S = beta + H_{-S}^{-1} X~_S^T
        g_S`` for folds larger than about p/2 (same value, cheaper there). No refit:
        ``O(n p^2)`` plus ``O(n q^2)`` or ``O(K p^3)``; exact for squared loss with an L2
        penalty. ``"exact"``: one refit per fold (the full problem with the fold's
        weights set to 0), warm-started from the full fit and solved to ``tol``.
    folds : array_like of shape (n_samples,), optional
        A fold label per sample (ints, strings, any mutually comparable values):
        grouped data (all samples of a group held out together) or leave-q-out with
        user-made folds. Folds may have different sizes.
    random_state : int, numpy Generator or None, default 0
        Seeds ``numpy.random.default_rng`` for the shuffled folds (ignored with
        ``folds=`` and ``cv=``).
    cv : int, scikit-learn splitter or iterable of (train, test), optional
        The folds as ``sklearn.model_selection.check_cv`` reads them (instead of
        ``n_folds``/``folds``): an int is an unshuffled ``StratifiedKFold`` for class
        labels of the logistic and multinomial losses and ``KFold`` otherwise, as
        scikit-learn does for classifiers; a splitter (``GroupKFold``,
        ``LeaveOneGroupOut``, ``TimeSeriesSplit``, ``ShuffleSplit``, ...) is called as
        ``cv.split(X, y, groups)``. When the test sets partition the samples and each
        training set is the complement of its test set, the result is that of
        ``folds=``. Otherwise (``TimeSeriesSplit``, ``ShuffleSplit``: test sets that
        overlap or miss samples, training sets that leave samples out) every split is
        computed on its own: ``"alo"`` takes one Newton step from the full fit on the
        problem without all the samples outside the training set (the same downdate,
        of that set), ``"exact"`` refits on the training set; :attr:`KFoldResult.
        fold_means` are the per-split test losses and ``split_predictions`` the
        per-split predictions. A split whose training set is a small part of the data
        is far from the full fit, where the one-step approximation is weakest (it is
        exact for squared loss with an L2 penalty).
    groups : array_like of shape (n_samples,), optional
        Group labels passed to ``cv.split`` (``GroupKFold``, ``LeaveOneGroupOut``,
        ``LeavePGroupsOut``, ``StratifiedGroupKFold``). Only with ``cv=``.
        Approximate leave-one-group-out (blocked leave-one-out for grouped data and
        time series cut into blocks) is ``cv=LeaveOneGroupOut(), groups=g``, the same
        as ``folds=g``: one downdate per group, no refit.
    rtol : float in (0, 1), optional
        An error budget for ``method="alo"``: the folds (or splits) are ranked by the sum
        of their samples' weighted error indicator (ALO's indicator of
        :func:`aloocv.loo`, evaluated at the fold's held-out prediction: the square of the
        fold's shift of the sample over its leverage, ``docs/math/kfold.md``), and the
        ones ranked first are refitted exactly (their samples' ``losses`` and
        ``predictions`` become exact K-fold's) until the estimated error of the rest --
        their summed indicator times the largest measured error/indicator ratio of the
        refitted folds, over the total weight: a conservative calibration -- is within
        ``rtol`` of the refined mean. With few folds (``n_folds <= 10``) this often refits
        every fold: exact K-fold. :attr:`KFoldResult.refinement` says which folds were
        refitted and whether every one was. In memory (not for dask input); where the
        approximation is exact (the squared loss with an L2 penalty, several targets)
        nothing is refitted and ``refinement`` is None.

    Returns
    -------
    KFoldResult
        ``losses``, ``predictions``, ``folds``, ``fold_means``, ``mean``, ``stderr``,
        ``fit``.

    Raises
    ------
    ValueError
        For ``n_folds < 2`` or ``> n_samples``, ``folds`` of the wrong length or with a
        single label, ``n_folds`` inconsistent with ``folds``, a fold with zero total
        sample weight, an unknown ``method``, or (``"alo"``) a fold without which the
        problem has no unique minimizer.

    Examples
    --------
    >>> import numpy as np, aloocv
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((500, 5)); y = (X[:, 0] + rng.standard_normal(500) > 0) * 1.0
    >>> cv = aloocv.kfold(X, y, loss="logistic", penalty=aloocv.L2(1.0), n_folds=5)
    >>> cv.fold_means.shape
    (5,)
    >>> groups = np.repeat(np.arange(50), 10)  # leave-one-group-out
    >>> aloocv.kfold(X, y, loss="logistic", folds=groups).n_folds
    50
    >>> from sklearn.model_selection import LeaveOneGroupOut, TimeSeriesSplit
    >>> aloocv.kfold(X, y, loss="logistic", cv=LeaveOneGroupOut(), groups=groups).n_folds
    50
    >>> ts = aloocv.kfold(X, y, loss="logistic", cv=TimeSeriesSplit(4))
    >>> ts.partition, ts.fold_means.shape
    (False, (4,))
    """
    if not isinstance(method, str) or method not in KFOLD_METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(KFOLD_METHODS)}")
    if cv is not None and (n_folds is not None or folds is not None):
        raise ValueError("pass the folds as cv= or as n_folds=/folds=, not both")
    if cv is None and groups is not None:
        raise ValueError(
            "groups= goes with cv= (e.g. cv=GroupKFold(5) or cv=LeaveOneGroupOut()); "
            "folds=groups holds out each group"
        )
    pb = Problem.build(
        X,
        y,
        loss=loss,
        penalty=penalty,
        fit_intercept=fit_intercept,
        sample_weight=sample_weight,
        offset=offset,
        tol=tol,
        max_iter=max_iter,
        n_jobs=n_jobs,
        memory_limit=memory_limit,
    )
    rtol = check_rtol(rtol, method)
    if rtol is not None and pb.is_dask:
        raise ValueError(
            "kfold(rtol=) refits folds in memory; for dask input use method='exact' (every "
            "fold refitted) or rtol=None"
        )
    req = FoldRequest(method, n_folds, folds, random_state, cv, groups)
    r = route.choose(pb, "kfold", kfold_splits=cv is not None, folds=req)
    res = route.kfold(pb, r, req)
    if rtol is None or getattr(res, "_refits", None) is None:
        return res
    return refine_folds(res, rtol)

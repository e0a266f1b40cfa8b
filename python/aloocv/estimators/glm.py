"""The log-link GLM regressors with ``alpha`` chosen by ALOOCV: Poisson, gamma and
Tweedie, one base class (:class:`_ALOGLMRegressorCV`) that differs per family only by
its loss and its deviance power."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.metrics import d2_tweedie_score
from sklearn.utils.validation import _check_sample_weight, validate_data

from .. import _scoring
from .._validation import check_choice, check_vector
from ..losses import Tweedie, get_loss
from ..penalties import L2
from ._base import _ALORegressor, _checked_input, _precheck, _search_results
from ._grids import _positive_grid

__all__ = ["ALOGammaRegressorCV", "ALOPoissonRegressorCV", "ALOTweedieRegressorCV"]

#: Default ``alphas`` of the GLM regressors (scikit-learn's convention: mean deviance / 2
#: + alpha / 2 ||w||^2).
GLM_DEFAULT_ALPHAS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)


class _ALOGLMRegressorCV(_ALORegressor):
    """Shared logic of the log-link GLM regressors (Poisson, gamma, Tweedie).

    scikit-learn's objective ``1/(2 s) sum_i s_i dev_i + alpha/2 ||w||^2`` (``s`` the
    sample weights, ``dev`` the unit deviance) times ``s = sum(s_i)`` is the summed
    objective here with ``aloocv.L2(alpha * s)``: the same minimizer.
    """

    def __init__(
        self,
        alphas: ArrayLike = GLM_DEFAULT_ALPHAS,
        *,
        fit_intercept: bool = True,
        scoring: Any = None,
        store_loo: bool = False,
        search: str = "grid",
        rule: str = "min",
        tol: float = 1e-8,
        max_iter: int = 100,
        n_jobs: int | None = None,
        verbose: int = 0,
        rtol: float | None = None,
        memory_limit: float | str | None = None,
        cv: Any = None,
    ):
        self.alphas = alphas
        self.fit_intercept = fit_intercept
        self.scoring = scoring
        self.store_loo = store_loo
        self.search = search
        self.rule = rule
        self.tol = tol
        self.max_iter = max_iter
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.rtol = rtol
        self.memory_limit = memory_limit
        self.cv = cv

    def _loss(self) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def _check_params(self) -> None:
        pass

    def _loss_score(self, acv: Any, weight_mean: float) -> Any:
        """``best_score_`` without a scorer: minus the mean deviance of the leave-one-out
        means (scikit-learn's ``neg_mean_poisson_deviance`` / ``neg_mean_gamma_deviance``
        / Tweedie deviance scorers): the deviance is twice the loss above the saturated
        model's, whose weighted mean is ``_saturated`` (zero for the half-deviance losses,
        the log-likelihood constant for the Poisson one)."""
        return -2.0 * (np.asarray(acv, dtype=np.float64) - self._saturated)

    def fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        sample_weight: ArrayLike | None = None,
        offset: ArrayLike | None = None,
        **params: Any,
    ):
        """Fit, choosing ``alpha`` by ALOOCV (or by the folds of ``cv=``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Responses in the loss's domain (counts >= 0, y > 0 for gamma, ...).
        sample_weight : array-like of shape (n_samples,), optional
        offset : array-like of shape (n_samples,), optional
            Known part of the linear predictor (e.g. ``log(exposure)``).
        **params
            ``groups`` for the splitter of ``cv=`` (``GroupKFold``,
            ``LeaveOneGroupOut``, ...); with scikit-learn's metadata routing enabled,
            what the splitter requests.

        Returns
        -------
        self
        """
        _precheck(X)
        X, y = validate_data(
            self,
            X,
            y,
            accept_sparse=["csr", "csc", "coo"],
            y_numeric=True,
            dtype=[np.float64, np.float32],
        )
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
        _checked_input(self, X, y, sample_weight)
        self._check_params()
        loss = self._loss()
        yd = np.asarray(y, dtype=np.float64)
        loss.check_y(yd)
        # the loss of the saturated model (mean = y; y = 0 at the smallest normal mean)
        sat = get_loss(loss).value(yd, np.log(np.maximum(yd, np.finfo(np.float64).tiny)))
        self._saturated = float(np.average(sat, weights=sample_weight))
        alphas = _positive_grid("alphas", self.alphas)
        s = float(X.shape[0] if sample_weight is None else np.sum(sample_weight))
        grid = [L2(float(a) * s) for a in alphas]
        with self._folds(X, y, sample_weight, params):
            search = self._search(
                X, y, loss, grid, sample_weight, offset=offset, score_weight=sample_weight
            )
        res = search.res
        self._store(search, {"alpha": alphas})

        def to_alpha(lam: float) -> float:
            # the grid's own alpha when lam came from it (no rounding in lam / s)
            near = np.flatnonzero(np.isclose(alphas * s, lam, rtol=1e-12, atol=0.0))
            return float(alphas[near[0]]) if near.size else float(lam) / s

        self.alpha_ = to_alpha(float(res.penalty.lam))
        self.coef_ = res.fit.coef_.copy()
        self.intercept_ = float(res.fit.intercept_)
        self.search_results_ = _search_results(
            res, ["alpha"], lambda row: [to_alpha(row[0])], search.row_score, search.n_grid
        )
        return self

    def _replay(self, eta: np.ndarray, n: int, offset=None) -> Any:
        # the leave-one-out linear predictors include the offset: the mean response
        return _scoring.LOORegressor(n, get_loss(self._loss()).mean(eta))

    def predict(self, X: ArrayLike, offset: ArrayLike | None = None) -> np.ndarray:
        """Mean response ``exp(X coef_ + intercept_ (+ offset))``."""
        eta = super().predict(X)
        if offset is not None:
            eta = eta + check_vector(offset, eta.shape[0], "offset")
        return get_loss(self._loss()).mean(eta)

    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """D^2, the fraction of deviance explained (scikit-learn's GLM score)."""
        return float(
            d2_tweedie_score(y, self.predict(X), sample_weight=sample_weight, power=self._power())
        )

    def _power(self) -> float:  # pragma: no cover - overridden
        raise NotImplementedError

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True
        return tags


_GLM_DOC = """
    Parameters
    ----------
    alphas : array_like of positive floats
        Candidate ``alpha`` in scikit-learn's ``{sk}`` convention
        ``1/(2 sum(s)) sum_i s_i deviance_i + alpha/2 ||w||^2``; it is
        ``aloocv.L2(alpha * sum(sample_weight))`` in the summed objective here.{extra}
    fit_intercept : bool
    scoring : str, callable or None
        A scikit-learn scorer name (e.g. ``"neg_mean_poisson_deviance"``, ``"r2"``) or a
        callable ``scorer(estimator, X, y)``, evaluated on the leave-one-out mean
        responses of each alpha (with ``sample_weight`` when fit got one); the alpha of
        the highest score is chosen (``search="grid"``, ``rule="min"``). None: the
        lowest leave-one-out loss; ``best_score_`` is then minus that loss.
    store_loo : bool
        Keep the per-sample arrays (``loo_predictions_``, ``tune_result_.loo``).
    search : {{"grid", "gradient"}}
        ``"gradient"``: the grid brackets the minimum, then steps on the exact
        derivative of ALOOCV in log(alpha) refine it.
    rule : {{"min", "1se"}}
        The minimum, or the largest alpha within one standard error of it.
    tol, max_iter
        Tolerance and Newton iterations of each fit.
    n_jobs : int, optional
        OpenMP threads.
    verbose : int
        A progress bar per search (tqdm, when installed) when positive.
    rtol : float in (0, 1), optional
        Choose on the trusted estimate (the deviance refined to within ``rtol`` of exact
        leave-one-out near ALO's choice), as in :class:`ALOLogisticRegressionCV`.
    memory_limit : int, float or str, optional
        The memory budget of the search's large matrices, as in :class:`ALORidgeCV`.
    cv : int, scikit-learn splitter or iterable of (train, test), optional
        None (default): leave-one-out by ALO. Otherwise the folds of an approximate
        K-fold (or leave-group-out) cross-validation that selects ``alpha`` instead, with
        ``groups`` passed to ``fit``, as in :class:`ALORidgeCV` (an int is ``KFold(k)``):
        one fit per candidate and one Newton step per fold, no refit (with ``offset``
        too). ``best_score_``, ``best_stderr_``, ``search_results_`` and
        ``loo_predictions_`` then hold the K-fold estimates. ``search="gradient"``: a
        bounded scalar search of the K-fold estimate between the grid neighbours of the
        grid's choice, as in :class:`ALORidgeCV`.

    Attributes
    ----------
    alpha_ : float
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    best_score_ : float
        Score at ``alpha_``, higher is better: the scorer's, or minus the mean deviance of
        the approximate leave-one-out means ({dev}; ``search_results_["loss"]`` holds the
        mean leave-one-out {what}).
    best_stderr_ : float
        Standard error of that mean loss.
    search_results_ : dict of 1-d ndarray
        ``"alpha"``, ``"loss"``, ``"loss_stderr"``, ``"score"`` per evaluation (grid
        point or gradient iterate).
    n_iter_ : int
        Iterations of the final fit (scikit-learn's meaning).
    n_fits_ : int
        Warm-started fits during the search.
    passes_per_candidate_ : float or None
        Mean passes over X per grid candidate (``O(n p^2)`` each: the Hessian passes of
        the warm-started fit, from the core's counters, plus ALO's leverage pass); None
        where the route does not count them (squared-loss ridge path, gradient search).
    loo_predictions_ : ndarray of shape (n_samples,)
        Only with ``store_loo=True``: leave-one-out linear predictors (log means).
    tune_result_ : TuneResult
"""


class ALOPoissonRegressorCV(_ALOGLMRegressorCV):
    __doc__ = (
        """Poisson regression (log link) with ``alpha`` chosen by ALOOCV.

    Mirrors scikit-learn's ``PoissonRegressor``; ``fit`` and ``predict`` take an
    optional ``offset`` (e.g. ``log(exposure)``).
"""
        + _GLM_DOC.format(
            sk="PoissonRegressor",
            extra="",
            what="Poisson negative log-likelihood",
            dev='scikit-learn\'s ``"neg_mean_poisson_deviance"``',
        )
        + """
    Examples
    --------
    Counts observed over different exposures, with ``log(exposure)`` as the offset:

    >>> import numpy as np, aloocv
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((500, 3))
    >>> exposure = rng.uniform(0.5, 2.0, 500)
    >>> y = rng.poisson(exposure * np.exp(0.5 + X @ [0.3, -0.2, 0.0]))
    >>> model = aloocv.ALOPoissonRegressorCV(alphas=np.logspace(-4, 0, 5))
    >>> model = model.fit(X, y, offset=np.log(exposure))
    >>> print(model.alpha_, np.round(model.coef_, 2) + 0.0)
    0.01 [ 0.32 -0.22  0.  ]

    ``predict`` gives the rate per unit of exposure, or with the offset the expected
    count over each sample's own exposure:

    >>> model.predict(X[:2]).round(2), model.predict(X[:2], offset=np.log(exposure[:2])).round(2)
    (array([1.76, 1.91]), array([1.46, 2.86]))
    """
    )

    def _loss(self) -> Any:
        return get_loss("poisson")

    def _power(self) -> float:
        return 1.0


class ALOGammaRegressorCV(_ALOGLMRegressorCV):
    __doc__ = (
        """Gamma regression (log link, y > 0) with ``alpha`` chosen by ALOOCV.

    Mirrors scikit-learn's ``GammaRegressor``; ``fit`` and ``predict`` take an optional
    ``offset``.
"""
        + _GLM_DOC.format(
            sk="GammaRegressor",
            extra="",
            what="gamma half deviance",
            dev='scikit-learn\'s ``"neg_mean_gamma_deviance"``',
        )
        + """
    Examples
    --------
    >>> import numpy as np, aloocv
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((500, 3))
    >>> mean = np.exp(0.5 + X @ [0.3, -0.2, 0.0])
    >>> y = rng.gamma(shape=2.0, scale=mean / 2.0)  # positive, variance ~ mean^2
    >>> model = aloocv.ALOGammaRegressorCV(alphas=np.logspace(-4, 0, 5)).fit(X, y)
    >>> print(model.alpha_, np.round(model.coef_, 2) + 0.0)
    0.01 [ 0.29 -0.14 -0.01]
    >>> round(model.score(X, y), 3)  # D^2, the fraction of deviance explained
    0.149
    """
    )

    def _loss(self) -> Any:
        return get_loss("gamma")

    def _power(self) -> float:
        return 2.0


class ALOTweedieRegressorCV(_ALOGLMRegressorCV):
    __doc__ = (
        """Tweedie regression (log link) with ``alpha`` chosen by ALOOCV.

    Mirrors scikit-learn's ``TweedieRegressor`` with ``power >= 1`` and the log link;
    ``fit`` and ``predict`` take an optional ``offset``.
"""
        + _GLM_DOC.format(
            sk="TweedieRegressor",
            extra="""
    power : float, default 0.0 in scikit-learn, 1.5 here
        Tweedie variance power, >= 1 (1: Poisson, 2: gamma, in between: compound
        Poisson-gamma with exact zeros allowed).
    link : {"log", "auto"}
        Only the log link is implemented (``"auto"`` is the log link for power >= 1).""",
            what="Tweedie half deviance",
            dev="``mean_tweedie_deviance`` with ``power``",
        )
        + """
    Examples
    --------
    Compound Poisson-gamma data (power between 1 and 2): exact zeros and positive
    amounts, as in insurance claim totals:

    >>> import numpy as np, aloocv
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((500, 3))
    >>> counts = rng.poisson(np.exp(0.5 + X @ [0.3, -0.2, 0.0]))
    >>> y = np.array([rng.gamma(2.0, 0.5, k).sum() for k in counts])
    >>> float((y == 0).mean())  # a fifth of the amounts are exactly zero
    0.206
    >>> model = aloocv.ALOTweedieRegressorCV(power=1.5, alphas=np.logspace(-4, 0, 5))
    >>> model = model.fit(X, y)
    >>> print(model.alpha_, np.round(model.coef_, 2) + 0.0)
    0.1 [ 0.31 -0.14  0.  ]
    """
    )

    def __init__(
        self,
        alphas: ArrayLike = GLM_DEFAULT_ALPHAS,
        *,
        power: float = 1.5,
        link: str = "log",
        fit_intercept: bool = True,
        scoring: Any = None,
        store_loo: bool = False,
        search: str = "grid",
        rule: str = "min",
        tol: float = 1e-8,
        max_iter: int = 100,
        n_jobs: int | None = None,
        verbose: int = 0,
        rtol: float | None = None,
        memory_limit: float | str | None = None,
        cv: Any = None,
    ):
        # scikit-learn reads an estimator's parameters from its __init__'s signature, so
        # Tweedie's two extra ones need this signature; the shared ones are the base's
        super().__init__(
            alphas,
            fit_intercept=fit_intercept,
            scoring=scoring,
            store_loo=store_loo,
            search=search,
            rule=rule,
            tol=tol,
            max_iter=max_iter,
            n_jobs=n_jobs,
            verbose=verbose,
            rtol=rtol,
            memory_limit=memory_limit,
            cv=cv,
        )
        self.power = power
        self.link = link

    def _check_params(self) -> None:
        check_choice("link", self.link, ("log", "auto"))
        Tweedie(power=self.power)

    def _loss(self) -> Any:
        return Tweedie(power=self.power)

    def _power(self) -> float:
        return float(self.power)

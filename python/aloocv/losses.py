"""The public registry of losses, mirroring one C++ struct per loss (``losses.hpp``;
notation in ``docs/math/index.md``, the multinomial loss in ``docs/math/multinomial.md``).

Parameter-free losses are named by strings (``loss="gamma"``); parametrized ones are
objects (``loss=aloocv.Tweedie(power=1.5)``, ``loss=aloocv.Huber(delta=1.35)``). Every
entry point resolves its ``loss`` argument through :func:`get_loss`, which raises on an
unknown name: there is no silent fallback.

Adding a scalar-eta family: one C++ struct in ``cpp/include/aloocv/losses.hpp``, one
entry in :data:`REGISTRY` below, and a test data generator in ``tests/test_losses.py``.

Examples
--------
>>> import aloocv
>>> aloocv.losses.get_loss("gamma").link
'log'
>>> aloocv.losses.get_loss(aloocv.Tweedie(power=1.5))
Tweedie(power=1.5)
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _core

__all__ = [
    "REGISTRY",
    "Huber",
    "Loss",
    "Multinomial",
    "Tweedie",
    "cross_entropy",
    "get_loss",
    "names",
    "pack_beta",
    "softmax",
]

#: Default Tweedie variance power of the string name ``"tweedie"``.
DEFAULT_TWEEDIE_POWER = 1.5
#: Default Huber threshold of the string name ``"huber"`` (95% efficiency at the normal).
DEFAULT_HUBER_DELTA = 1.345


@dataclass(frozen=True, eq=False)
class Loss:
    """A registered per-sample loss l(y, eta) of the linear predictor eta.

    Parameters
    ----------
    name : str
        The registry name (also the C++ struct's ``name``).
    link : {"identity", "logit", "log"}
        The link: ``mean = inverse_link(eta)``.
    domain : str
        The allowed responses, in words.
    description : str
        One line for the docs and the CLI.

    Notes
    -----
    A loss compares equal to its name when it has no parameters (``get_loss("gamma") ==
    "gamma"``), so code may test ``loss == "logistic"``.
    """

    name: str
    link: str
    domain: str
    description: str = ""

    #: Outputs of the linear predictor per sample: 1 for the scalar-eta losses, K for
    #: :class:`Multinomial`.
    n_outputs = 1
    #: True for a loss with several outputs per sample (its own core routines).
    vector_valued = False

    # --- parameters and the core's view of them
    def params(self) -> dict[str, float]:
        """The loss's runtime parameters (empty for the parameter-free losses)."""
        return {}

    @property
    def core(self) -> Any:
        """The argument the C++ core takes: the name, or (name, power, delta)."""
        return self.name

    # --- math through the core (one implementation of every formula)
    @staticmethod
    def _inputs(y: Any, eta: Any) -> tuple[np.ndarray, np.ndarray]:
        # C-contiguous and aligned: arrays unpickled from dask workers may be unaligned
        y = np.broadcast_to(np.asarray(y, dtype=np.float64), np.shape(eta))
        y = np.require(y, np.float64, ["C", "A"])
        eta = np.require(eta, np.float64, ["C", "A"])
        return y.ravel(), eta.ravel()

    def value(self, y: Any, eta: Any) -> np.ndarray:
        """Per-sample loss l(y, eta)."""
        return _core.loss_value(self.core, *self._inputs(y, eta)).reshape(np.shape(eta))

    def derivatives(
        self, y: Any, eta: Any, orders: tuple[int, ...] = (0, 1, 2, 3, 4)
    ) -> tuple[np.ndarray, ...]:
        """The loss (order 0) and its derivatives in eta of the given ``orders`` (1 to 4),
        one array of eta's shape each, in that order: ``(l, l', l'', l''', l'''')`` by
        default."""
        out = _core.loss_derivatives(self.core, *self._inputs(y, eta), orders=orders)
        return tuple(a.reshape(np.shape(eta)) for a in out)

    def mean(self, eta: Any) -> np.ndarray:
        """The inverse link: the mean response at eta."""
        eta = np.asarray(eta, dtype=np.float64)
        if self.link == "identity":
            return eta.copy()
        if self.link == "logit":
            return 0.5 * (1.0 + np.tanh(0.5 * eta))
        return np.exp(eta)

    def check_y(self, y: np.ndarray) -> None:
        """Raise ValueError naming the first y outside the loss's domain."""
        _core.loss_valid(self.core, np.ascontiguousarray(y, dtype=np.float64))

    # --- identity
    def _key(self) -> tuple:
        return (self.name, *sorted(self.params().items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return not self.params() and other == self.name
        if isinstance(other, Loss):
            return self._key() == other._key()
        return NotImplemented

    def __hash__(self) -> int:
        # equal to its name's hash when it compares equal to the name
        return hash(self.name) if not self.params() else hash(self._key())

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return repr(self.name)


def _check_param(value: Any, name: str, owner: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {name} must be a real number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{owner}: {name} must be finite, got {value!r}")
    return v


class Tweedie(Loss):
    """Tweedie deviance with log link and variance power ``power`` (>= 1).

    The half unit deviance ``y^(2-p)/((1-p)(2-p)) - y mu^(1-p)/(1-p) + mu^(2-p)/(2-p)``
    with ``mu = exp(eta)``; ``power=1`` gives the Poisson and ``power=2`` the gamma
    model (same fits; the reported losses differ by terms free of eta). y >= 0 for
    ``power < 2``, y > 0 for ``power >= 2``.

    Parameters
    ----------
    power : float, default 1.5
        Variance power p (Var y = phi mu^p); p >= 1.
    """

    def __init__(self, power: float = DEFAULT_TWEEDIE_POWER) -> None:
        p = _check_param(power, "power", "Tweedie")
        if p < 1.0:
            raise ValueError(
                f"Tweedie: power must be >= 1 (1 <= power < 2 compound Poisson-gamma, "
                f"power >= 2 positive responses), got {power!r}"
            )
        super().__init__(
            "tweedie", "log", "y >= 0 (y > 0 when power >= 2)", "Tweedie deviance, log link"
        )
        object.__setattr__(self, "power", p)

    def params(self) -> dict[str, float]:
        """``{"power": power}``."""
        return {"power": self.power}

    @property
    def core(self) -> Any:
        """(name, power, delta) for the core."""
        return ("tweedie", self.power, DEFAULT_HUBER_DELTA)

    def __repr__(self) -> str:
        return f"Tweedie(power={self.power!r})"


class Huber(Loss):
    """Huber loss of the residual ``r = y - eta`` (identity link).

    ``r^2 / 2`` for ``|r| <= delta``, else ``delta (|r| - delta / 2)``. Its second
    derivative is piecewise constant (1 inside the threshold, 0 outside): the LOO
    formulas use it as is.

    Parameters
    ----------
    delta : float, default 1.345
        Threshold on ``|y - eta|`` in the units of y; > 0.
    """

    def __init__(self, delta: float = DEFAULT_HUBER_DELTA) -> None:
        d = _check_param(delta, "delta", "Huber")
        if d <= 0.0:
            raise ValueError(f"Huber: delta must be > 0, got {delta!r}")
        super().__init__("huber", "identity", "finite real y", "Huber loss, identity link")
        object.__setattr__(self, "delta", d)

    def params(self) -> dict[str, float]:
        """``{"delta": delta}``."""
        return {"delta": self.delta}

    @property
    def core(self) -> Any:
        """(name, power, delta) for the core."""
        return ("huber", DEFAULT_TWEEDIE_POWER, self.delta)

    def __repr__(self) -> str:
        return f"Huber(delta={self.delta!r})"


def softmax(eta: np.ndarray) -> np.ndarray:
    """Row-wise softmax of class scores (n, K)."""
    z = np.exp(eta - eta.max(axis=1, keepdims=True))
    return z / z.sum(axis=1, keepdims=True)


def cross_entropy(eta: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-sample cross-entropy of class scores eta (n, K) at class codes y."""
    m = eta.max(axis=1)
    yi = np.asarray(y).astype(np.intp)
    return m + np.log(np.exp(eta - m[:, None]).sum(axis=1)) - eta[np.arange(yi.size), yi]


def pack_beta(coef: Any, intercept: Any, K: int, p: int, fit_intercept: bool) -> np.ndarray:
    """Class-major (K, p1) multinomial coefficients, flattened, from a user's coef (K, p)
    and intercept (K,) (centered to sum zero: the gauge the fits use)."""
    c = np.asarray(coef, dtype=np.float64)
    if c.shape != (K, p):
        raise ValueError(f"coef must have shape ({K}, {p}) for the multinomial loss, got {c.shape}")
    if not np.isfinite(c).all():
        raise ValueError("coef contains NaN or inf")
    if not fit_intercept:
        if intercept is not None and np.any(np.asarray(intercept) != 0):
            raise ValueError("intercept given with fit_intercept=False")
        return np.ascontiguousarray(c.ravel())
    b = np.zeros(K) if intercept is None else np.asarray(intercept, dtype=np.float64)
    if b.shape != (K,) or not np.isfinite(b).all():
        raise ValueError(f"intercept must be a finite array of shape ({K},)")
    return np.ascontiguousarray(np.column_stack([b - b.mean(), c]).ravel())


class Multinomial(Loss):
    """Softmax cross-entropy of K classes: a loss with K outputs per sample.

    ``l(y, eta) = logsumexp(eta) - eta_y`` with ``eta in R^K`` (scikit-learn's multinomial
    ``LogisticRegression``: the full K-class parametrization, intercepts centered). The
    per-sample curvature is the K x K block ``diag(p) - p p^T`` (``p = softmax(eta)``);
    see ``docs/math/multinomial.md``. Named ``"multinomial"``; the number of classes is
    learned from the labels 0..K-1 when a problem is built (it is not a parameter: a
    ``Multinomial`` compares equal to its name whatever K).

    Parameters
    ----------
    n_classes : int, optional
        K, once known.
    """

    vector_valued = True

    def __init__(self, n_classes: int | None = None) -> None:
        super().__init__(
            "multinomial",
            "softmax",
            "integer class labels 0..K-1",
            "softmax cross-entropy of K classes",
        )
        object.__setattr__(self, "n_classes", None if n_classes is None else int(n_classes))

    @property
    def n_outputs(self) -> int:  # type: ignore[override]
        """K (0 while the classes are unknown)."""
        return self.n_classes or 0

    @property
    def core(self) -> Any:
        """The multinomial loss has its own core entry points (``multinomial_*``)."""
        raise TypeError("the multinomial loss has its own core routines (K outputs per sample)")

    def value(self, y: Any, eta: Any) -> np.ndarray:
        """Per-sample cross-entropy at class codes y, scores eta (n, K)."""
        return cross_entropy(np.asarray(eta, dtype=np.float64), y)

    def derivatives(self, y: Any, eta: Any) -> tuple[np.ndarray, ...]:
        """Not available: the derivatives in eta are K-vectors and K x K blocks."""
        raise TypeError("the multinomial loss has vector derivatives (K outputs per sample)")

    def mean(self, eta: Any) -> np.ndarray:
        """Class probabilities softmax(eta), shape (n, K)."""
        return softmax(np.asarray(eta, dtype=np.float64))

    def check_y(self, y: np.ndarray) -> None:
        """Raise ValueError naming the first label that is not an integer >= 0."""
        lab = np.asarray(y, dtype=np.float64)
        bad = np.flatnonzero((lab != np.floor(lab)) | (lab < 0) | ~np.isfinite(lab))
        if bad.size:
            raise ValueError(
                f"y must hold integer class labels 0..K-1 for the multinomial loss: "
                f"y[{bad[0]}] = {np.asarray(y).ravel()[bad[0]].item()!r}"
            )

    def __repr__(self) -> str:
        return (
            "Multinomial()"
            if self.n_classes is None
            else f"Multinomial(n_classes={self.n_classes})"
        )


#: Name -> the loss (parameter-free) or its class (parametrized, default parameters
#: when named by the string).
REGISTRY: dict[str, Loss | type[Loss]] = {
    "squared": Loss("squared", "identity", "finite real y", "1/2 (y - eta)^2"),
    "logistic": Loss("logistic", "logit", "y in {0, 1}", "Bernoulli log-loss, logit link"),
    "poisson": Loss("poisson", "log", "y >= 0", "Poisson negative log-likelihood, log link"),
    "gamma": Loss("gamma", "log", "y > 0", "gamma half deviance, log link"),
    "binomial": Loss(
        "binomial",
        "logit",
        "y in [0, 1] (proportions; trials as sample weights)",
        "binomial log-loss of proportions, logit link",
    ),
    "tweedie": Tweedie,
    "huber": Huber,
    "multinomial": Multinomial,
}


def names() -> list[str]:
    """The registered loss names."""
    return list(REGISTRY)


def get_loss(loss: Any) -> Loss:
    """Resolve a ``loss`` argument to a registered :class:`Loss`.

    Parameters
    ----------
    loss : str or Loss
        A registered name (``"tweedie"`` and ``"huber"`` take their default
        parameters) or a loss object such as ``Tweedie(power=1.5)``.

    Returns
    -------
    Loss

    Raises
    ------
    TypeError
        When ``loss`` is neither a string nor a :class:`Loss`.
    ValueError
        When the name is not registered.
    """
    if isinstance(loss, Loss):
        if loss.name not in REGISTRY:
            raise ValueError(f"unknown loss {loss.name!r}; expected one of {names()}")
        return loss
    if not isinstance(loss, str):
        raise TypeError(
            f"loss must be a loss name or an aloocv loss object such as "
            f"aloocv.Tweedie(power=1.5), got {type(loss).__name__}"
        )
    entry = REGISTRY.get(loss)
    if entry is None:
        raise ValueError(f"unknown loss {loss!r}; expected one of {names()}")
    return entry() if isinstance(entry, type) else entry

"""Every result type of aloocv, in one place (this package; import them from here):
plain dataclasses of arrays, None (never NaN) in a field that does not apply.

- :mod:`.fits`: :class:`FitResult`, :class:`MultinomialFitResult`, and
  :class:`StateOutput` (what a tuning state hands the tuning package);
- :mod:`.loo`: :class:`LOOResult`, :class:`DaskLOOResult`, :class:`MultiTargetLOOResult`;
  a leave-one-out result carries its backend's exact refits (:class:`SubsetRefits`), so
  :meth:`LOOResult.certify` asks no route question;
- :mod:`.certificate`: :class:`Certificate` and the design and estimator behind it;
- :mod:`.trust`: ALO's error indicator, its self-check and the refinement to a relative
  tolerance (``rtol=``), with their :class:`ErrorEstimate`;
- :mod:`.kfold`: :class:`KFoldResult`, :class:`MultiTargetKFoldResult`;
- :mod:`.tuning`: :class:`TuneResult`; :mod:`.nested`: :class:`NestedCVResult`,
  :class:`DevSetResult`.
"""

from .certificate import (
    CERTIFICATE_PROXY_SHARE,
    Certificate,
    CertificateDesign,
    certificate_design,
    certificate_from,
    check_certify_options,
)
from .fits import (
    FitFields,
    FitResult,
    MultinomialFitResult,
    StateOutput,
    fit_result,
    multinomial_fit_result,
)
from .kfold import FoldRefinement, FoldRefits, KFoldResult, MultiTargetKFoldResult
from .loo import DaskLOOResult, LOOResult, MultiTargetLOOResult, SubsetRefits, trusted
from .nested import DevSetResult, NestedCVResult
from .trust import ErrorEstimate
from .tuning import TuneResult

__all__ = [
    "CERTIFICATE_PROXY_SHARE",
    "Certificate",
    "CertificateDesign",
    "DaskLOOResult",
    "DevSetResult",
    "ErrorEstimate",
    "FitFields",
    "FitResult",
    "FoldRefinement",
    "FoldRefits",
    "KFoldResult",
    "LOOResult",
    "MultiTargetKFoldResult",
    "MultiTargetLOOResult",
    "MultinomialFitResult",
    "NestedCVResult",
    "StateOutput",
    "SubsetRefits",
    "TuneResult",
    "certificate_design",
    "certificate_from",
    "check_certify_options",
    "fit_result",
    "multinomial_fit_result",
    "trusted",
]

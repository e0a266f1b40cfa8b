"""The full tier of the main jobs (``_jobs.py``) at sizes where the passes over X
dominate; ``quick.py`` has the same jobs small. Selected with ``-b '^bench_'`` together
with ``bench_core.py`` and ``bench_designs.py``.
"""

from __future__ import annotations

from typing import ClassVar

from ._jobs import (
    _GLM,
    _Dask,
    _Estimators,
    _ExactLOO,
    _Float32,
    _KFold,
    _MatrixFree,
    _Multinomial,
    _Nested,
    _Sparse,
    _Tune,
)


class GLM(_GLM):
    size: ClassVar[dict[str, int]] = {"n": 100000, "p": 200}


class ExactLOO(_ExactLOO):
    size: ClassVar[dict[str, int]] = {"n": 5000, "p": 20}


class KFold(_KFold):
    size: ClassVar[dict[str, int]] = {"n": 50000, "p": 200}


class Nested(_Nested):
    size: ClassVar[dict[str, int]] = {"n": 20000, "p": 100}


class Tune(_Tune):
    size: ClassVar[dict[str, int]] = {"n": 50000, "p": 100}


class Estimators(_Estimators):
    size: ClassVar[dict[str, int]] = {"n": 20000, "p": 100}


class Multinomial(_Multinomial):
    size: ClassVar[dict[str, int]] = {"n": 50000, "p": 100, "k": 10}


class Float32(_Float32):
    size: ClassVar[dict[str, int]] = {"n": 200000, "p": 200}


class Sparse(_Sparse):
    size: ClassVar[dict[str, int]] = {"n": 50000, "p": 5000}


class MatrixFree(_MatrixFree):
    size: ClassVar[dict[str, int]] = {"n": 20000, "p": 100000}


class Dask(_Dask):
    size: ClassVar[dict[str, int]] = {"n": 200000, "p": 100, "chunk": 25000}

"""The quick tier: every main job of aloocv at small sizes (``_jobs.py``).

Selected by the benchmark-name regex ``^quick\\.``::

    cd benchmarks && asv machine --yes && asv run --quick -b '^quick\\.'
    cd benchmarks && PYTHONPATH=../python asv dev -b '^quick\\.'   # current tree, no results saved

It runs in a few minutes on 2 cores (one thread, CPU seconds; see benchmarks/README.md
for the measured time). The full tier is the ``bench_*`` modules (``-b '^bench_'``).
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
    size: ClassVar[dict[str, int]] = {"n": 20000, "p": 50}


class ExactLOO(_ExactLOO):
    size: ClassVar[dict[str, int]] = {"n": 500, "p": 10}


class KFold(_KFold):
    size: ClassVar[dict[str, int]] = {"n": 5000, "p": 30}


class Nested(_Nested):
    size: ClassVar[dict[str, int]] = {"n": 2000, "p": 20}


class Tune(_Tune):
    size: ClassVar[dict[str, int]] = {"n": 5000, "p": 20}


class Estimators(_Estimators):
    size: ClassVar[dict[str, int]] = {"n": 2000, "p": 20}


class Multinomial(_Multinomial):
    size: ClassVar[dict[str, int]] = {"n": 5000, "p": 20, "k": 5}


class Float32(_Float32):
    size: ClassVar[dict[str, int]] = {"n": 20000, "p": 50}


class Sparse(_Sparse):
    size: ClassVar[dict[str, int]] = {"n": 20000, "p": 2000}


class MatrixFree(_MatrixFree):
    size: ClassVar[dict[str, int]] = {"n": 2000, "p": 20000}


class Dask(_Dask):
    size: ClassVar[dict[str, int]] = {"n": 20000, "p": 20, "chunk": 5000}

"""Backends: where a :class:`~aloocv.problem.Problem` is solved (in memory or on dask), and
the route table (:mod:`aloocv.backends.route`) that picks one."""

"""The backends of aloocv's verbs: in memory and on dask (each a package implementing
the same operations: passes, fit, ALO, refits)."""

"""Backends that run aloocv's operations: in memory and on dask collections."""

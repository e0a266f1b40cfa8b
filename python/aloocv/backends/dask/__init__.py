"""The dask backend: chunk-by-chunk passes over a dask design."""

"""The package version, single-sourced (pyproject.toml reads it from here)."""

__version__ = "0.11.0"

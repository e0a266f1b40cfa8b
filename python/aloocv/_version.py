"""The package version, single-sourced (pyproject.toml reads it from here)."""

#: The version of the installed package, as in ``pyproject.toml``'s metadata.
__version__ = "0.11.0"

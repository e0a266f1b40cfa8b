"""Sphinx configuration of the aloocv documentation.

Build with ``python -m sphinx -W --keep-going docs docs/_build/html`` from the repository
root (the ``docs`` extra installs what it needs). The package is imported as installed;
the gallery under ``gallery/`` runs at build time, offline, and any Python warning raised
by one of its examples fails the build.
"""

from __future__ import annotations

import pathlib
import sys

from sphinx.pycode import ModuleAnalyzer

import aloocv

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

project = "aloocv"
author = "aloocv developers"
copyright = "aloocv developers"
release = aloocv.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "gallery/*.py", "gallery/GALLERY_HEADER.rst"]
templates_path = ["_templates"]

# -- API reference ---------------------------------------------------------------------
autosummary_generate = True
autodoc_default_options = {"members": False}
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
numpydoc_show_class_members = False  # the class templates list their members
numpydoc_xref_param_type = False

# -- Markdown (the math pages, the memory notes) ----------------------------------------
myst_heading_anchors = 3

# -- Gallery ----------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": ["gallery"],
    "gallery_dirs": ["auto_examples"],
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "backreferences_dir": "generated/backreferences",
    "doc_module": ("aloocv",),
    "remove_config_comments": True,
    "reset_modules": ("matplotlib", "gallery_warnings.strict_warnings"),
    "reset_modules_order": "both",
    "abort_on_example_error": False,
    "only_warn_on_example_error": False,
    "show_memory": False,
    "plot_gallery": "True",
}

# -- HTML -------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"aloocv {release}"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_static_path: list[str] = []


# -- Constants re-exported by the package ------------------------------------------------
def _attribute_doc(name: str) -> list[str] | None:
    """The ``#:`` comment of ``aloocv.<name>`` where a submodule defines it, or None."""
    value = getattr(aloocv, name)
    for modname, module in sorted(sys.modules.items()):
        if not modname.startswith("aloocv.") or getattr(module, name, None) is not value:
            continue
        doc = ModuleAnalyzer.for_module(modname).find_attr_docs().get(("", name))
        if doc:
            return list(doc)
    return None


def _constant_docstring(app, what, name, obj, options, lines):
    """A constant's page shows its own comment, not the docstring of ``float``/``str``."""
    if what == "data" and name.startswith("aloocv."):
        doc = _attribute_doc(name.removeprefix("aloocv."))
        if doc is not None:
            lines[:] = doc


def setup(app):
    app.connect("autodoc-process-docstring", _constant_docstring)

"""The documentation.

The derivations the code relies on live in the repository (docs/math/), and the sources
cite them: no citation of the old out-of-tree design notes, no citation of a missing file,
no link between the notes that leads nowhere.

The site (docs/, Sphinx) builds with warnings as errors, documents every public name of
the package, and runs its gallery offline; every estimator's docstring carries a doctested
example; the user guide speaks plainly (no paper notation).
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import os
import pathlib
import pkgutil
import re
import shutil
import subprocess
import sys
import zlib

import pytest

import aloocv

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MATH = DOCS / "math"

#: Where citations are looked for: the source trees and the README.
SOURCE_DIRS = ("cpp", "src", "python", "tests")
SOURCE_FILES = ("README.md",)
#: Text files among them (compiled extensions, caches and data are skipped).
TEXT_SUFFIXES = {".py", ".pyi", ".cpp", ".hpp", ".h", ".cc", ".txt", ".md", ".toml", ".cmake"}

#: The out-of-tree design notes that sources must no longer cite (spelled in two parts so
#: that this file does not cite them itself).
OLD_NOTES = "DESIGN" + ".md"
#: A citation of a derivation file, e.g. "docs/math/alo.md".
CITATION = re.compile(r"docs/math/[A-Za-z0-9_.\-]+?\.md")
#: A relative Markdown link to another Markdown file: "[text](name.md)" or "(name.md#part)".
LOCAL_LINK = re.compile(r"\]\(([A-Za-z0-9_.\-/]+\.md)(?:#[^)]*)?\)")


def source_files(root: pathlib.Path) -> list[pathlib.Path]:
    """The text files of the source trees (and the README) under `root`."""
    out = [root / f for f in SOURCE_FILES if (root / f).is_file()]
    for d in SOURCE_DIRS:
        base = root / d
        if not base.is_dir():
            continue
        for f in sorted(base.rglob("*")):
            if f.is_file() and f.suffix in TEXT_SUFFIXES and "__pycache__" not in f.parts:
                out.append(f)
    return out


def old_note_citations(root: pathlib.Path) -> list[str]:
    """'path:line' of every line under `root` that cites the old design notes."""
    hits = []
    for f in source_files(root):
        for k, line in enumerate(f.read_text(encoding="utf-8", errors="replace").splitlines()):
            if OLD_NOTES in line:
                hits.append(f"{f.relative_to(root)}:{k + 1}")
    return hits


def cited_math_docs(root: pathlib.Path) -> dict[str, list[str]]:
    """Every docs/math file cited under `root`, with the 'path:line' places citing it."""
    cited: dict[str, list[str]] = {}
    for f in source_files(root):
        for k, line in enumerate(f.read_text(encoding="utf-8", errors="replace").splitlines()):
            for m in CITATION.finditer(line):
                cited.setdefault(m.group(0), []).append(f"{f.relative_to(root)}:{k + 1}")
    return cited


def missing_citations(root: pathlib.Path) -> list[str]:
    """Citations under `root` of docs/math files that do not exist there."""
    return [
        f"{doc} (cited at {', '.join(where)})"
        for doc, where in sorted(cited_math_docs(root).items())
        if not (root / doc).is_file()
    ]


def broken_links(math_dir: pathlib.Path) -> list[str]:
    """Relative Markdown links between the notes in `math_dir` whose target is missing."""
    bad = []
    for f in sorted(math_dir.glob("*.md")):
        for m in LOCAL_LINK.finditer(f.read_text(encoding="utf-8")):
            if not (f.parent / m.group(1)).is_file():
                bad.append(f"{f.name} -> {m.group(1)}")
    return bad


def test_no_citation_of_the_old_design_notes():
    assert old_note_citations(ROOT) == []


def test_every_cited_math_doc_exists():
    assert cited_math_docs(ROOT), "no source cites docs/math/ (the regex or the layout broke)"
    assert missing_citations(ROOT) == []


@pytest.mark.parametrize(
    "name", ["index", "alo", "hypergradient", "multinomial", "kfold", "dual", "newton"]
)
def test_each_derivation_exists_and_is_cited(name):
    doc = f"docs/math/{name}.md"
    assert (ROOT / doc).is_file(), doc
    assert doc in cited_math_docs(ROOT), f"no source cites {doc}"


def test_links_between_the_notes_resolve():
    assert broken_links(MATH) == []


def test_the_checks_catch_defects(tmp_path):
    # a tree with one stale citation, one missing derivation, one present, one dead link
    (tmp_path / "cpp").mkdir()
    (tmp_path / "python" / "pkg").mkdir(parents=True)
    math = tmp_path / "docs" / "math"
    math.mkdir(parents=True)
    (math / "here.md").write_text("see [there](there.md) and [self](here.md#top)\n")
    d = "docs" + "/math/"  # spelled in parts: this file must not cite a missing note
    (tmp_path / "cpp" / "a.hpp").write_text(f"// as in {OLD_NOTES} section 2\n")
    (tmp_path / "python" / "pkg" / "m.py").write_text(f'"""See {d}here.md and {d}gone.md."""\n')
    (tmp_path / "python" / "pkg" / "blob.so").write_bytes(f"{d}binary.md".encode())
    assert old_note_citations(tmp_path) == ["cpp/a.hpp:1"]
    assert set(cited_math_docs(tmp_path)) == {f"{d}here.md", f"{d}gone.md"}
    assert missing_citations(tmp_path) == [f"{d}gone.md (cited at python/pkg/m.py:1)"]
    assert broken_links(math) == ["here.md -> there.md"]


# ----------------------------------------------------------------------------- the site
#: What the build writes into the source tree (sphinx-gallery, autosummary): not copied.
GENERATED = ("_build", "generated", "auto_examples", "sg_execution_times.rst", "__pycache__")
#: A line of Sphinx's output that reports a problem: "path:line: WARNING: ...", "WARNING:
#: ..." (also ERROR, CRITICAL, SEVERE), or a traceback. Log lines of libraries that the
#: gallery runs ("... - distributed.core - WARNING - ...") are not Sphinx's verdict; a
#: Python warning raised in an example is an error there and fails the build.
PROBLEM = re.compile(r"(^|: )(WARNING|ERROR|CRITICAL|SEVERE):|^Traceback")
#: Paper notation the user guide must not use (it is the derivations' language).
PAPER_NOTATION = re.compile(r"Lemma ?\d|Theorem ?\d|Corollary|eta~|x~|\bACV\b|\bIF\b")


def inventory(html: pathlib.Path) -> dict[str, str]:
    """Sphinx's ``objects.inv`` of a built site: object name -> ``domain:role``."""
    header, _, body = (
        html.joinpath("objects.inv").read_bytes().partition(b"compressed using zlib.\n")
    )
    assert header.startswith(b"# Sphinx inventory version 2"), header[:40]
    out = {}
    for line in zlib.decompress(body).decode().splitlines():
        name, role = line.split(" ", 2)[:2]
        out[name] = role
    return out


def problems(log: str) -> list[str]:
    """The lines of a Sphinx log that report a warning, an error or a traceback."""
    return [line for line in log.splitlines() if PROBLEM.search(line)]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built from a copy of docs/ (the source tree stays clean), with warnings as
    errors, the gallery run, and no network: an unreachable proxy and an empty
    scikit-learn data home make any download fail."""
    pytest.importorskip("sphinx")
    tmp = tmp_path_factory.mktemp("docs")
    src, html = tmp / "src", tmp / "html"
    shutil.copytree(DOCS, src, ignore=shutil.ignore_patterns(*GENERATED))
    env = dict(os.environ)
    package_root = str(pathlib.Path(aloocv.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.update(
        MPLBACKEND="Agg",
        SCIKIT_LEARN_DATA=str(tmp / "sklearn_data"),
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        http_proxy="http://127.0.0.1:9",
        https_proxy="http://127.0.0.1:9",
        NO_PROXY="",
        no_proxy="",
    )
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html"]
    cmd += ["-d", str(tmp / "doctrees"), str(src), str(html)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    return {
        "src": src,
        "html": html,
        "returncode": proc.returncode,
        "log": proc.stdout + proc.stderr,
    }


def test_the_site_builds_without_a_warning(site):
    assert problems(site["log"]) == [], site["log"][-5000:]
    assert site["returncode"] == 0, site["log"][-5000:]
    assert (site["html"] / "index.html").is_file()


def test_every_public_name_is_documented(site):
    documented = inventory(site["html"])
    missing = [name for name in aloocv.__all__ if f"aloocv.{name}" not in documented]
    assert missing == []
    page = site["html"] / "generated" / "aloocv.ALO_MIN_RCOND.html"
    # a constant shows its own comment, not the docstring of float
    assert "reciprocal condition" in page.read_text(encoding="utf-8")


def test_every_page_is_built(site):
    """The guide, the math notes, the memory notes and the API pages are in the site."""
    sources = [p for p in DOCS.rglob("*") if p.suffix in {".md", ".rst"}]
    sources = [p.relative_to(DOCS) for p in sources if not set(p.parts) & set(GENERATED)]
    sources = [p for p in sources if p.parts[0] not in {"_templates", "gallery"}]
    assert pathlib.Path("math/alo.md") in sources and pathlib.Path("memory.md") in sources
    missing = [str(p) for p in sources if not (site["html"] / p.with_suffix(".html")).is_file()]
    assert missing == []


def test_the_gallery_runs_offline(site):
    """Every example ran (its output, and the figure of each that draws one, are in its
    page) with no network and an empty scikit-learn data home."""
    scripts = sorted((DOCS / "gallery").glob("plot_*.py"))
    assert len(scripts) >= 6
    for script in scripts:
        page = (site["html"] / "auto_examples" / script.stem).with_suffix(".html")
        assert page.is_file(), script.name
        assert "sphx-glr-script-out" in page.read_text(encoding="utf-8"), script.name
        if "plt.show()" in script.read_text(encoding="utf-8"):
            figure = site["html"] / "_images" / f"sphx_glr_{script.stem}_001.png"
            assert figure.is_file(), script.name
    data_home = site["src"].parent / "sklearn_data"
    assert not data_home.exists() or not any(data_home.iterdir()), "a data set was fetched"


def test_the_checks_catch_a_broken_site(tmp_path):
    """The helpers see a warning line and a missing name."""
    log = "reading sources... [100%]\n/x/api.rst:3: WARNING: undefined label: 'nope'\n"
    assert problems(log) == ["/x/api.rst:3: WARNING: undefined label: 'nope'"]
    assert problems("Traceback (most recent call last):") != []
    assert problems("WARNING: html_static_path entry 'x' does not exist") != []
    assert problems("/x/index.rst:: ERROR: Unknown target name: 'n_iter'.") != []
    assert problems("build succeeded.") == []
    assert problems("2026-01-01 - distributed.core - WARNING - Event loop was slow") == []
    body = zlib.compress(b"aloocv.fit py:function 1 generated/aloocv.fit.html#$ -\n")
    header = b"# Sphinx inventory version 2\n# Project: x\n# Version: 1\n"
    (tmp_path / "objects.inv").write_bytes(
        header + b"# The remainder of this file is compressed using zlib.\n" + body
    )
    assert inventory(tmp_path) == {"aloocv.fit": "py:function"}
    assert PAPER_NOTATION.search("the ACV of Lemma 3") and not PAPER_NOTATION.search("ACVs")


# ------------------------------------------------------------------- docstrings, guide
ESTIMATORS = [
    aloocv.ALORidgeCV,
    aloocv.ALOLogisticRegressionCV,
    aloocv.ALOElasticNetCV,
    aloocv.ALOPoissonRegressorCV,
    aloocv.ALOGammaRegressorCV,
    aloocv.ALOTweedieRegressorCV,
]


def test_the_estimators_are_the_public_ones():
    public = {
        name
        for name, obj in inspect.getmembers(aloocv.estimators, inspect.isclass)
        if name in aloocv.__all__
    }
    assert public == {cls.__name__ for cls in ESTIMATORS}


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_every_estimator_has_a_doctested_example(cls):
    """An Examples section with at least one checked output, in a module that
    tests/test_doctests.py runs."""
    doc = inspect.getdoc(cls)
    assert re.search(r"^Examples\n--------$", doc, re.MULTILINE), cls.__name__
    tests = doctest.DocTestFinder().find(cls, cls.__name__, module=sys.modules[cls.__module__])
    own = [t for t in tests if t.name == cls.__name__]
    assert own and any(e.want.strip() for e in own[0].examples), cls.__name__
    modules = {m.name for m in pkgutil.walk_packages(aloocv.__path__, prefix="aloocv.")}
    assert cls.__module__ in modules
    assert importlib.import_module(cls.__module__) is sys.modules[cls.__module__]


def test_the_guide_speaks_plainly():
    pages = sorted((DOCS / "guide").glob("*.rst"))
    assert len(pages) >= 5
    hits = [
        f"{p.name}:{k + 1}: {m.group(0)}"
        for p in pages
        for k, line in enumerate(p.read_text(encoding="utf-8").splitlines())
        for m in PAPER_NOTATION.finditer(line)
    ]
    assert hits == []


@pytest.mark.parametrize("page", sorted(p.name for p in (DOCS / "guide").glob("*.rst")))
def test_the_guide_examples_run(page):
    """The ``>>>`` examples of the user guide run and print what they say."""
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testfile(str(DOCS / "guide" / page), module_relative=False, optionflags=flags)
    assert result.failed == 0

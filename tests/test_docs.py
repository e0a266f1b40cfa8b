"""The derivations the code relies on live in the repository (docs/math/), and the sources
cite them: no citation of the old out-of-tree design notes, no citation of a missing file,
no link between the notes that leads nowhere."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
MATH = ROOT / "docs" / "math"

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

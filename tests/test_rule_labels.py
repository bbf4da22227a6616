"""Every rule label cited in src/, docs/, tests/ and benchmarks/ is defined in docs/rules/.

A label is defined by the heading that starts with it (docs/rules/README.md,
"Labels"): ``#### L.16 — modified``, ``## J — Session name``, ``## §3.4 — ...``,
``#### D-7 — ...``, ``## seed:listing — ...``, ``## spec:stores — ...``.

Citations checked:

* a prefixed label anywhere (``seed:<name>``, ``spec:<name>``, and the
  ``ref:``/``dec:`` prefixes should they ever be used): defined in some file
  of docs/rules/;
* ``docs/rules/<file>.md`` followed by labels (``docs/rules/tree.md F.1, F.6``,
  ``docs/rules/projection.md P.4-P.7``, ``docs/rules/decisions.md D-11``): the
  file exists and defines each label;
* inside docs/rules/, ``<file>.md <labels>`` naming a sibling file the same way,
  a bare ``D-N`` (a decision in decisions.md), and a bare ``X.N`` (defined in
  the file of its group, README.md's group-to-file map).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "docs" / "rules"
SCANNED = ("src", "docs", "tests", "benchmarks")
SUFFIXES = {".py", ".md", ".html", ".js", ".css", ".txt", ".toml"}

#: Group letter -> file (docs/rules/README.md, "Group-to-file map").
GROUP_FILE = {
    **dict.fromkeys("ABDE", "format.md"), "C": "versions.md", **dict.fromkeys("FGHI", "tree.md"),
    **dict.fromkeys("JKLMO", "listing.md"), **dict.fromkeys("NT", "manager.md"),
    **dict.fromkeys("PQRS", "projection.md"), "U": "errors.md",
}

_HEADING = re.compile(r"^#{1,6}\s+`?([^\s`]+?)`?\s+—\s", re.MULTILINE)
_PREFIXED = r"(?:seed|spec|ref|dec):[a-z0-9][a-z0-9-]*"
_ONE = rf"(?:{_PREFIXED}|§\d+(?:\.\d+)*|D-\d+|[A-U]\.\d+|[A-U](?![\w.§-]))"
_LIST = rf"{_ONE}(?:\s*(?:,|/|;|-|\u2013|\band\b)\s*{_ONE})*"
_PREFIXED_CITE = re.compile(rf"(?<![\w:/.-])({_PREFIXED})")
_PATH_CITE = re.compile(rf"docs/rules/([\w-]+\.md)(?:\s+({_LIST}))?")
_SIBLING_CITE = re.compile(rf"(?<![\w/.-])([a-z]+\.md)\)?\s+({_LIST})")
_BARE_DECISION = re.compile(r"(?<![\w.-])(D-\d+)(?!\w|\.\d)")
_BARE_RULE = re.compile(r"(?<![\w.§-])([A-U]\.\d+)(?!\w|\.\d)")
_ONE_RE = re.compile(_ONE)


@dataclass(frozen=True)
class Citation:
    where: str  # "path:line"
    label: str
    file: str | None  # the docs/rules file that must define it; None: any file


def defined_labels(rules: Path = RULES) -> dict[str, set[str]]:
    """Labels per docs/rules file name, from the headings that start with one."""
    return {path.name: set(_HEADING.findall(path.read_text(encoding="utf-8")))
            for path in sorted(rules.glob("*.md"))}


def _listed(at: str, name: str, listed: str) -> list[Citation]:
    """The labels listed after a file name: a decision is always in decisions.md; a
    prefixed label is in the named file when it comes first, anywhere after a comma
    (``docs/rules/stores.md §3.1, spec:stores`` and ``... §2.3, seed:listing`` alike)."""
    found = []
    for i, label in enumerate(_ONE_RE.findall(listed)):
        if label.startswith("D-"):
            found.append(Citation(at, label, "decisions.md"))
        elif ":" in label and i > 0:
            found.append(Citation(at, label, None))
        else:
            found.append(Citation(at, label, name))
    return found


def citations_in(text: str, where: str, *, in_rules: bool) -> list[Citation]:
    """The rule citations of one file's text (``where``: its path, for messages)."""
    found: list[Citation] = []
    for number, line in enumerate(text.splitlines(), 1):
        at = f"{where}:{number}"
        found += [Citation(at, label, None) for label in _PREFIXED_CITE.findall(line)]
        for name, listed in _PATH_CITE.findall(line):
            found.append(Citation(at, "", name))  # the file itself must exist
            found += _listed(at, name, listed)
        if in_rules:
            for name, listed in _SIBLING_CITE.findall(line):
                found += _listed(at, name, listed)
            found += [Citation(at, label, "decisions.md") for label in _BARE_DECISION.findall(line)]
            found += [Citation(at, label, GROUP_FILE[label[0]]) for label in _BARE_RULE.findall(line)]
    return found


def unknown_citations(citations: list[Citation], defined: dict[str, set[str]]) -> list[Citation]:
    """The citations whose file does not exist or does not define the label."""
    everywhere = set().union(*defined.values())
    bad = []
    for cite in citations:
        if cite.file is None:
            ok = cite.label in everywhere
        elif cite.file not in defined:
            ok = False
        else:
            ok = cite.label == "" or cite.label in defined[cite.file]
        if not ok:
            bad.append(cite)
    return bad


def _scanned_files() -> list[Path]:
    this = Path(__file__).resolve()  # its examples of unknown labels are meant to fail
    files = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            # benchmarks/.work holds downloaded third-party packages, not our text.
            if (path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts
                    and ".work" not in path.parts and path.resolve() != this):
                files.append(path)
    return files


def all_citations() -> list[Citation]:
    """Every citation in src/, docs/, tests/ and benchmarks/."""
    found = []
    for path in _scanned_files():
        relative = path.relative_to(ROOT).as_posix()
        found += citations_in(path.read_text(encoding="utf-8", errors="replace"), relative,
                              in_rules=path.parent == RULES)
    return found


def test_rules_define_labels():
    defined = defined_labels()
    assert {"seed:context-building", "spec:stores", "L.16", "D-11", "§2.6", "J"} <= set().union(*defined.values())
    # Every group has its file.
    for letter, name in GROUP_FILE.items():
        assert letter in defined[name], (letter, name)


def test_every_cited_label_is_defined():
    citations = all_citations()
    assert len(citations) > 300  # the scan sees the code's and the docs' citations
    bad = unknown_citations(citations, defined_labels())
    assert not bad, "labels cited but not defined in docs/rules/:\n" + "\n".join(
        f"  {c.where}: {c.label or '(file)'} in {c.file or 'any rules file'}" for c in bad)


@pytest.mark.parametrize("text, in_rules", [
    # An unknown prefixed label anywhere.
    ("context rebuilt (" + "seed" + ":no-such-rule)", False),
    ("see " + "spec" + ":nothing-here", False),
    ("a " + "ref" + ":anything prefix is checked too", False),
    # A label the cited file does not define, or a file that does not exist.
    ("(docs/rules/tree.md F.99)", False),
    ("(docs/rules/tree.md F.1, F.99)", False),
    ("(docs/rules/projection.md P.4-P.99)", False),
    ("(docs/rules/tree.md L.16)", False),  # defined, but in listing.md
    ("(docs/rules/decisions.md D-99)", False),
    ("(docs/rules/manager.md N.9, D-99)", False),
    ("(docs/rules/nowhere.md)", False),
    # Inside docs/rules: sibling files, bare decisions and bare rules.
    ("as tree.md F.99 says", True),
    ("settled by D-99.", True),
    ("see F.99 below", True),
])
def test_an_unknown_label_fails(text, in_rules):
    citations = citations_in(text, "example.md", in_rules=in_rules)
    assert citations
    assert unknown_citations(citations, defined_labels())


def test_known_labels_pass():
    text = ("(docs/rules/tree.md F.1, F.6, H.1-H.5), docs/rules/decisions.md D-11, "
            "docs/rules/format.md spec:data-model, docs/rules/transcript.md §2.3, " + "seed" + ":listing")
    citations = citations_in(text, "example.py", in_rules=False)
    assert {c.label for c in citations} >= {"F.1", "F.6", "H.1", "H.5", "D-11", "spec:data-model", "§2.3",
                                            "seed:listing"}
    assert unknown_citations(citations, defined_labels()) == []

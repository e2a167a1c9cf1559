"""The documentation the code points at exists: every `docs/<file>.md` cited in apexrl/ or
tests/ (and every "docs/facts.md section N") names a file and a section that are there, no
code cites a file outside the repository (the old "FACTS.md"), every relative link in the
README and docs/ resolves, and the README stays short (the detail lives in docs/)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITED = re.compile(r"\bdocs/([\w./-]+?\.md)(?: section (\d+))?")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def sources() -> list[Path]:
    files = [*(ROOT / "apexrl").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    return sorted(f for f in files if f != Path(__file__).resolve())


def citations() -> list[tuple[str, str, str | None]]:
    out = []
    for f in sources():
        for m in CITED.finditer(f.read_text("utf-8")):
            out.append((str(f.relative_to(ROOT)), m.group(1), m.group(2)))
    return out


def test_every_cited_doc_exists():
    cites = citations()
    assert any(doc == "facts.md" for _, doc, _ in cites)  # the scan sees the citations
    missing = [(src, doc) for src, doc, _ in cites if not (ROOT / "docs" / doc).is_file()]
    assert missing == []


def test_every_cited_facts_section_exists():
    headings = set(re.findall(r"^## (\d+)\. ", (ROOT / "docs/facts.md").read_text(), re.M))
    cited = {(src, n) for src, doc, n in citations() if doc == "facts.md"}
    assert all(n for _, n in cited), "cite a section: docs/facts.md section N"
    assert [(src, n) for src, n in cited if n not in headings] == []


def test_no_citation_of_a_file_outside_the_repository():
    old = re.compile(r"\bFACTS\b")
    stale = [str(f.relative_to(ROOT)) for f in sources() if old.search(f.read_text("utf-8"))]
    assert stale == [], "cite docs/facts.md section N instead"


def test_relative_links_resolve():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in LINK.findall(page.read_text("utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append((page.name, target))
    assert broken == []


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_cli_reference_is_current():
    from apexrl import clidocs

    assert (ROOT / clidocs.OUT).read_text("utf-8") == clidocs.render(), (
        "docs/cli.md is stale: run `make cli-docs`"
    )


def test_cli_reference_covers_every_command():
    from apexrl import clidocs

    text = (ROOT / clidocs.OUT).read_text("utf-8")
    paths = clidocs.command_paths()
    assert ("eval", "run") in paths and ("image", "push") in paths
    assert all(f"`{' '.join(('apexrl', *p))}`" in text for p in paths)


def test_quick_start_is_two_commands_and_ci_runs_the_test_one():
    """A fresh machine needs two commands, `make demo` and the test command; CI
    (.ci/run) runs that same test command."""
    readme = (ROOT / "README.md").read_text("utf-8")
    block = readme.split("## Quick start", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    ci = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    assert "make test" in ci

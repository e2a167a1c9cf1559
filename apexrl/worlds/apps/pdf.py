"""PDF files (pypdf): read pages as text, search text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from apexrl.errors import ApexError
from apexrl.worlds.world import World


def _reader(p: Path):
    from pypdf import PdfReader

    try:
        return PdfReader(str(p))
    except Exception as e:
        raise ApexError(f"cannot open {p.name} as a PDF: {e}") from e


def pdf_text(p: Path) -> str:
    r = _reader(p)
    return "\n".join(
        f"[page {i}]\n{pg.extract_text() or ''}" for i, pg in enumerate(r.pages, start=1)
    )


def _pdf(world: World, path: str) -> Path:
    if not path.lower().endswith(".pdf"):
        raise ApexError(f"{path!r} is not a .pdf file")
    return world.fs_path(path, must_exist=True)


def tools(world: World) -> list:
    def read_pages(path: str, start: int = 1, end: int | None = None) -> dict[str, Any]:
        """Read the text of pages `start`..`end` (inclusive, numbered from 1; default: up to
        10 pages from `start`) of a PDF."""
        r = _reader(_pdf(world, path))
        n = len(r.pages)
        if not 1 <= start <= n:
            raise ApexError(f"page {start} does not exist (the PDF has {n} pages)")
        stop = min(n, end if end is not None else start + 9)
        pages = [
            {"page": i, "text": r.pages[i - 1].extract_text() or ""} for i in range(start, stop + 1)
        ]
        return {"path": path, "n_pages": n, "pages": pages}

    def search(path: str, query: str, max_results: int = 50) -> dict[str, Any]:
        """Find `query` (case-insensitive) in a PDF: page numbers with the matching lines."""
        r = _reader(_pdf(world, path))
        q = query.lower()
        hits = []
        for i, pg in enumerate(r.pages, start=1):
            for line in (pg.extract_text() or "").splitlines():
                if q in line.lower():
                    hits.append({"page": i, "line": line.strip()})
                    if len(hits) >= max_results:
                        return {"query": query, "matches": hits, "truncated": True}
        return {"query": query, "matches": hits}

    return [read_pages, search]


def probe(world: World) -> str:
    import pypdf  # noqa: F401

    n = sum(1 for _ in world.fs_root.rglob("*.pdf")) if world.fs_root.is_dir() else 0
    return f"{n} .pdf files"

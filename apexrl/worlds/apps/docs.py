"""Word documents (.docx via python-docx): overview, read by page, create, add/edit/delete text.

A "page" is a chunk of `PAGE_SIZE` paragraphs (a .docx has no fixed pages).
Paragraphs are numbered from 0 across the document body.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from apexrl.errors import ApexError
from apexrl.worlds.world import World

PAGE_SIZE = 40


def _open(p: Path):
    import docx

    try:
        return docx.Document(str(p))
    except Exception as e:
        raise ApexError(f"cannot open {p.name} as a .docx: {e}") from e


def docx_text(p: Path) -> str:
    d = _open(p)
    parts = [para.text for para in d.paragraphs]
    for ti, table in enumerate(d.tables):
        parts.append(f"[table {ti}]")
        for row in table.rows:
            parts.append(" | ".join(c.text for c in row.cells))
    return "\n".join(parts)


def _docx_path(world: World, path: str, *, must_exist: bool = True) -> Path:
    if not path.lower().endswith(".docx"):
        raise ApexError(f"{path!r} is not a .docx file")
    return world.fs_path(path, must_exist=must_exist)


def _para_index(d, index: int) -> Any:
    paras = d.paragraphs
    if not -len(paras) <= index < len(paras):
        raise ApexError(f"paragraph {index} does not exist (the document has {len(paras)})")
    return paras[index]


def tools(world: World) -> list:
    def overview(path: str) -> dict[str, Any]:
        """Overview of a .docx: paragraph and page counts, headings with their paragraph
        numbers, tables, and core properties (title, author)."""
        d = _open(_docx_path(world, path))
        paras = d.paragraphs
        headings = [
            {"paragraph": i, "level": p.style.name, "text": p.text}
            for i, p in enumerate(paras)
            if p.style is not None
            and (p.style.name.startswith("Heading") or p.style.name == "Title")
        ]
        props = d.core_properties
        return {
            "path": path,
            "paragraphs": len(paras),
            "pages": max(1, -(-len(paras) // PAGE_SIZE)),
            "page_size_paragraphs": PAGE_SIZE,
            "headings": headings[:200],
            "tables": [
                {"table": i, "rows": len(t.rows), "columns": len(t.columns)}
                for i, t in enumerate(d.tables)
            ],
            "title": props.title or None,
            "author": props.author or None,
            "words": sum(len(p.text.split()) for p in paras),
        }

    def read(path: str, page: int = 1) -> str:
        """Read one page of a .docx (page 1 first; a page is 40 paragraphs). Each line is
        '[n] text' with n the paragraph number to use with edit_text/delete_text.
        Tables are appended on the last page."""
        d = _open(_docx_path(world, path))
        paras = d.paragraphs
        pages = max(1, -(-len(paras) // PAGE_SIZE))
        if not 1 <= page <= pages:
            raise ApexError(f"page {page} does not exist (the document has {pages} pages)")
        start = (page - 1) * PAGE_SIZE
        lines = [f"[page {page}/{pages}]"]
        for i, p in enumerate(paras[start : start + PAGE_SIZE], start=start):
            style = p.style.name if p.style is not None else ""
            tag = f" ({style})" if style and style != "Normal" else ""
            lines.append(f"[{i}]{tag} {p.text}")
        if page == pages:
            for ti, table in enumerate(d.tables):
                lines.append(f"[table {ti}]")
                lines.extend(" | ".join(c.text for c in row.cells) for row in table.rows)
        return "\n".join(lines)

    def create(path: str, paragraphs: list[str] | None = None, title: str | None = None) -> str:
        """Create a new .docx at `path` (folders are created), with an optional title
        heading and paragraphs. Refuses to overwrite an existing file."""
        import docx

        p = _docx_path(world, path, must_exist=False)
        if p.exists():
            raise ApexError(f"{path!r} already exists; edit it instead")
        with world.lock:
            d = docx.Document()
            if title:
                d.add_heading(title, level=0)
                d.core_properties.title = title
            for text in paragraphs or []:
                d.add_paragraph(text)
            p.parent.mkdir(parents=True, exist_ok=True)
            d.save(str(p))
        return f"created {world.rel(p)} with {len(d.paragraphs)} paragraphs"

    def add_text(path: str, text: str, after: int | None = None, style: str | None = None) -> str:
        """Add a paragraph to a .docx: at the end, or after paragraph number `after`.
        `style` is a Word style such as 'Heading 1' or 'List Bullet'."""
        p = _docx_path(world, path)
        with world.lock:
            d = _open(p)
            if after is None or after >= len(d.paragraphs) - 1:
                para = d.add_paragraph(text, style=style)
                index = len(d.paragraphs) - 1
            else:
                nxt = _para_index(d, after + 1)
                para = nxt.insert_paragraph_before(text, style=style)
                index = after + 1
            del para
            d.save(str(p))
        return f"added paragraph [{index}] to {world.rel(p)}"

    def edit_text(
        path: str,
        paragraph: int,
        text: str | None = None,
        find: str | None = None,
        replace: str | None = None,
    ) -> str:
        """Edit paragraph number `paragraph` of a .docx: replace its whole text with
        `text`, or replace occurrences of `find` with `replace` inside it."""
        p = _docx_path(world, path)
        with world.lock:
            d = _open(p)
            para = _para_index(d, paragraph)
            if find is not None:
                if find not in para.text:
                    raise ApexError(
                        f"{find!r} is not in paragraph {paragraph}: {para.text[:200]!r}"
                    )
                new = para.text.replace(find, replace or "")
            elif text is not None:
                new = text
            else:
                raise ApexError("give `text`, or `find` and `replace`")
            _set_text(para, new)
            d.save(str(p))
        return f"paragraph [{paragraph}] of {world.rel(p)} is now: {new[:300]}"

    def delete_text(path: str, paragraph: int) -> str:
        """Delete paragraph number `paragraph` from a .docx (later paragraphs move up)."""
        p = _docx_path(world, path)
        with world.lock:
            d = _open(p)
            para = _para_index(d, paragraph)
            old = para.text
            el = para._element
            el.getparent().remove(el)
            d.save(str(p))
        return f"deleted paragraph [{paragraph}] of {world.rel(p)}: {old[:200]}"

    return [overview, read, create, add_text, edit_text, delete_text]


def _set_text(para, text: str) -> None:
    """Replace a paragraph's text, keeping the first run's formatting."""
    runs = para.runs
    if not runs:
        para.add_run(text)
        return
    runs[0].text = text
    for r in runs[1:]:
        r._element.getparent().remove(r._element)


def probe(world: World) -> str:
    import docx  # noqa: F401  (the library must import)

    n = sum(1 for _ in world.fs_root.rglob("*.docx")) if world.fs_root.is_dir() else 0
    return f"{n} .docx files"

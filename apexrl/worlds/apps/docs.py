"""Word documents (.docx via python-docx): opening one, replacing a paragraph's text,
and the readiness check."""

from __future__ import annotations

from pathlib import Path

from apexrl.errors import ApexError
from apexrl.worlds.world import World


def _open(p: Path):
    import docx

    try:
        return docx.Document(str(p))
    except Exception as e:
        raise ApexError(f"cannot open {p.name} as a .docx: {e}") from e


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

"""How `world verify` compares the files both runtimes leave (no peer needed)."""

from __future__ import annotations

from pathlib import Path


def _pdf(path: Path, words: list[str], *, author: str = "", fmt: str = "letter") -> Path:
    from fpdf import FPDF

    doc = FPDF(format=fmt)
    doc.set_author(author)
    doc.add_page()
    doc.set_font("Helvetica", "", 12)
    for w in words:
        doc.multi_cell(0, 8, w, new_x="LMARGIN", new_y="NEXT")
    doc.output(str(path))
    return path


def test_pdfs_compare_by_pages_and_words_not_bytes(tmp_path):
    """Two writers stamp their own dates, ids and producers: a PDF compares by its pages'
    sizes and words, so equal content is equal and different words or pages are not."""
    from apexrl.peer.compare import file_content, file_digest

    a = _pdf(tmp_path / "a.pdf", ["Parity", "Body."], author="one")
    b = _pdf(tmp_path / "b.pdf", ["Parity", "Body."], author="two")
    assert a.read_bytes() != b.read_bytes()
    assert file_content(a) == "[page 0 612x792]\nParity Body."
    assert file_digest(a) == file_digest(b)
    other = _pdf(tmp_path / "c.pdf", ["Parity", "Body!"])
    a4 = _pdf(tmp_path / "d.pdf", ["Parity", "Body."], fmt="a4")
    assert len({file_digest(a), file_digest(other), file_digest(a4)}) == 3
    broken = tmp_path / "e.pdf"
    broken.write_bytes(b"%PDF-1.4 not really")
    assert file_content(broken).startswith("<unreadable ")

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


def test_each_second_stamped_write_starts_in_a_second_of_its_own():
    """A write case runs on apexrl's side then the peer's, milliseconds apart; a second
    boundary between the two made one side's new mail tie with the previous write and
    the other's not, so newest-first listings differed (the mail parity flake). The
    harness waits for a new second after each write; never longer than needed."""
    import asyncio

    from apexrl.peer.verify import next_second

    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(round(s, 3))

    def at(t: float):
        return lambda: t

    asyncio.run(next_second(None, clock=at(100.2), sleep=sleep))  # first write: no wait
    asyncio.run(next_second(99.95, clock=at(99.99), sleep=sleep))  # same second: to 100.0
    asyncio.run(next_second(99.95, clock=at(100.3), sleep=sleep))  # a new second already
    assert slept == [0.01]

"""Formats matched beyond `world verify`'s case set: failures and edge cases of the
filesystem, pdfs and excel (CSV) servers, asked of archipelago's own servers and of
apexrl's over two copies of one world; the replies a model sees must be identical."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytestmark = [pytest.mark.peer, pytest.mark.integration, pytest.mark.timeout(900)]

PDF, CSV = "<pdf>", "<csv>"  # the world's first PDF and CSV, filled in per world
CALLS = {
    "filesystem": [
        ("read_text_file", {"file_path": "/missing.txt"}),
        ("read_text_file", {"file_path": "missing.txt"}),
        ("read_text_file", {"file_path": ""}),
        ("read_text_file", {"file_path": PDF}),
        ("read_text_file", {"file_path": "/t.tsv"}),
        ("read_text_file", {"file_path": "/Makefile"}),
        ("read_text_file", {"file_path": "/empty.txt"}),
        ("read_text_file", {"file_path": "/latin.txt"}),
        ("read_text_file", {"file_path": "/latin.txt", "encoding": "latin-1"}),
        ("read_text_file", {"file_path": "/latin.txt", "encoding": "no-such-codec"}),
        ("read_text_file", {"file_path": "/../x.txt"}),
        ("read_image_file", {"file_path": "/missing.png"}),
        ("read_image_file", {"file_path": "/Marketing/"}),
        ("search_files", {"pattern": ""}),
        ("search_files", {"pattern": "*.md", "path": ""}),
        ("search_files", {"pattern": "*.md", "path": "rel"}),
        ("search_files", {"pattern": "*.zzz", "path": "/Marketing"}),
        ("search_files", {"pattern": "*", "path": "/.."}),
        ("list_files", {"path": "/../"}),
        ("list_files", {"path": ""}),
        ("get_file_metadata", {"file_path": ""}),
        ("get_file_metadata", {"file_path": "rel"}),
        ("get_file_metadata", {"file_path": "/../x"}),
        ("get_directory_tree", {"path": ""}),
        ("get_directory_tree", {"path": "/.."}),
    ],
    "pdfs": [
        ("search_pdf", {"file_path": PDF, "query": "a"}),
        ("search_pdf", {"file_path": PDF, "query": "FY", "max_results": 3, "context_chars": 10}),
        ("search_pdf", {"file_path": PDF, "query": "fy2024a", "case_sensitive": True}),
        ("search_pdf", {"file_path": PDF, "query": "Support", "whole_word": True}),
        ("search_pdf", {"file_path": PDF, "query": ""}),
        ("search_pdf", {"file_path": PDF, "query": "a", "max_results": 0, "context_chars": 0}),
        ("search_pdf", {"file_path": "/missing.pdf", "query": "a"}),
        ("search_pdf", {"file_path": "x.pdf", "query": "a"}),
        ("search_pdf", {"file_path": "/README.md", "query": "a"}),
        ("search_pdf", {"file_path": "/../x.pdf", "query": "a"}),
        ("read_pdf_pages", {"file_path": "x.pdf"}),
        ("read_pdf_pages", {"file_path": "/README.md"}),
        ("read_pdf_pages", {"file_path": "/../x.pdf"}),
        ("read_page_as_image", {"file_path": PDF, "page_number": 0}),
        ("read_page_as_image", {"file_path": "/missing.pdf", "page_number": 1}),
        ("read_page_as_image", {"file_path": "/../x.pdf", "page_number": 1}),
        ("create_pdf", {"directory": "rel", "file_name": "c.pdf", "content": [{"type": "x"}]}),
        ("create_pdf", {"directory": "/", "file_name": "c.txt", "content": []}),
        ("create_pdf", {"directory": "/", "file_name": "a/c.pdf", "content": []}),
        ("create_pdf", {"directory": "/", "file_name": "d.pdf", "content": []}),
        ("create_pdf", {"directory": "/", "file_name": "e.pdf", "content": [{"type": "video"}]}),
        (
            "create_pdf",
            {
                "directory": "/",
                "file_name": "f.pdf",
                "content": [{"type": "paragraph", "text": "x"}],
                "page_size": "legal",
            },
        ),
        (
            "create_pdf",
            {
                "directory": "/new/sub",
                "file_name": "g.pdf",
                "content": [{"type": "heading", "text": "T"}],
            },
        ),
        (
            "create_pdf",
            {
                "directory": "/new/sub",
                "file_name": "g.pdf",
                "content": [{"type": "heading", "text": "U"}],
            },
        ),
        ("read_pdf_pages", {"file_path": "/new/sub/g.pdf"}),
    ],
    "excel": [
        ("read_csv", {"file_path": CSV, "row_limit": 2, "compact": True}),
        ("read_csv", {"file_path": CSV, "compact": True}),
        ("read_csv", {"file_path": CSV, "row_limit": 5}),
        ("read_csv", {"file_path": "/semi.csv", "delimiter": ";"}),
        ("read_csv", {"file_path": "/semi.csv", "delimiter": ";;"}),
        ("read_csv", {"file_path": "/semi.csv", "has_header": False}),
        ("read_csv", {"file_path": "/empty.csv"}),
        ("read_csv", {"file_path": "/latin.csv", "encoding": "no-such-codec"}),
        ("read_csv", {"file_path": "/missing.csv"}),
        ("read_csv", {"file_path": "x.csv"}),
        ("read_csv", {"file_path": "/t.tsv"}),
        ("read_csv", {"file_path": "/Process"}),
    ],
}


def _extras(fs: Path) -> None:
    (fs / "t.tsv").write_text("a\tb\n1\t2\n")
    (fs / "Makefile").write_text("all:\n")
    (fs / "empty.txt").write_bytes(b"")
    (fs / "empty.csv").write_bytes(b"")
    (fs / "latin.txt").write_bytes("café\n".encode("latin-1"))
    (fs / "latin.csv").write_bytes("café,1\n".encode("latin-1"))
    (fs / "semi.csv").write_text("a;b\n1;2\n")


async def _both(server: str, rt, a_root: Path, p_root: Path, calls: list) -> list[tuple]:
    from apexrl.peer.sessions import apexrl_session, peer_session

    out = []
    async with peer_session(rt, p_root) as peer, apexrl_session(server, a_root) as ours:
        for tool, args in calls:
            ra, rp = await ours.call(tool, args), await peer.call(tool, args)
            out.append((tool, args, (ra.error, ra.blocks), (rp.error, rp.blocks)))
    return out


@pytest.mark.parametrize("server", sorted(CALLS))
def test_failures_and_edges_read_as_the_peer_words_them(server, example_worlds, checkout, tmp_path):
    from apexrl.peer.runtime import runtimes
    from apexrl.peer.verify import prepare_copies

    rt = runtimes(checkout, servers=[server])[server]
    a_root, p_root = prepare_copies(example_worlds[0], tmp_path)
    for root in (a_root, p_root):
        _extras(root / "filesystem")
    fs = a_root / "filesystem"
    found = {
        PDF: "/" + next(fs.rglob("*.pdf")).relative_to(fs).as_posix(),
        CSV: "/"
        + next(p for p in fs.rglob("*.csv") if p.stat().st_size > 100).relative_to(fs).as_posix(),
    }
    calls = [
        (t, {k: found.get(v, v) if isinstance(v, str) else v for k, v in a.items()})
        for t, a in CALLS[server]
    ]
    replies = asyncio.run(_both(server, rt, a_root, p_root, calls))
    assert len(replies) == len(CALLS[server])
    # the peer really answered (its own words), then both agree call by call
    assert any(p[0] or p[1] for *_, p in replies)
    assert [(t, a, o) for t, a, o, p in replies if o != p] == []

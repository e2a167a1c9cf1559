"""Archive extraction limits and link checks (`apexrl.artifacts.archive_extract`) and the
no-follow readers (`apexrl.artifacts.nofollow`), called directly and fast (issue 42:
the world-zip compression-ratio limit and a link chain whose target shares a prefix
with the destination folder, `dest` vs `dest-evil`, were checked by no test)."""

from __future__ import annotations

import io
import json
import os
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from apexrl.artifacts import archive_extract as ax
from apexrl.artifacts import nofollow as nf
from apexrl.errors import BadRecordError


def _world_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, body in members.items():
            z.writestr(name, body)
    return path


def test_world_zip_compression_ratio_limit(tmp_path):
    """Zeros deflate ~1000:1: refused past the ratio once past the floor, named; the same
    bytes pass under a higher ratio, and below the floor the ratio is not checked."""
    z = _world_zip(tmp_path / "w.zip", {"filesystem/zeros.bin": bytes(4 << 20)})
    ratio = (4 << 20) / os.path.getsize(z)
    assert ratio > 200
    tight = ax.Limits(max_ratio=100, ratio_floor=1 << 20)
    with pytest.raises(BadRecordError) as e:
        ax.extract_zip(z, tmp_path / "a", where="world w.zip", limits=tight)
    assert "world w.zip" in str(e.value) and "ratio over 100" in str(e.value)
    assert "APEXRL_ARCHIVE_MAX_RATIO" in (e.value.hint or "")
    assert not (tmp_path / "a" / "filesystem").exists()  # refused before writing
    loose = ax.Limits(max_ratio=ratio * 2, ratio_floor=1 << 20)
    assert ax.extract_zip(z, tmp_path / "b", where="w", limits=loose).bytes == 4 << 20
    floor = ax.Limits(max_ratio=100, ratio_floor=8 << 20)
    assert ax.extract_zip(z, tmp_path / "c", where="w", limits=floor).n_files == 1
    # the boundary itself: exactly at the ratio passes, one byte past does not
    lim = ax.Limits(max_ratio=10, ratio_floor=0)
    lim.check_ratio(100, 10, "w")
    with pytest.raises(BadRecordError):
        lim.check_ratio(101, 10, "w")
    ax.Limits(max_ratio=10, ratio_floor=200).check_ratio(199, 1, "w")
    with pytest.raises(BadRecordError):
        ax.Limits(max_ratio=10, ratio_floor=0).check_ratio(11, 0, "w")  # empty input: 1


def test_limits_from_environment_and_bad_values(monkeypatch):
    monkeypatch.setenv("APEXRL_ARCHIVE_MAX_RATIO", "50")
    monkeypatch.setenv("APEXRL_ARCHIVE_MAX_MEMBERS", "7")
    monkeypatch.setenv("APEXRL_ARCHIVE_MAX_MEMBER_BYTES", "1e3")
    monkeypatch.setenv("APEXRL_ARCHIVE_MAX_TOTAL_BYTES", " ")
    lim = ax.Limits.from_env(ratio_floor=5)
    assert (lim.max_ratio, lim.max_members, lim.max_member_bytes) == (50.0, 7, 1000)
    assert lim.max_total_bytes == ax.Limits().max_total_bytes and lim.ratio_floor == 5
    monkeypatch.setenv("APEXRL_ARCHIVE_MAX_MEMBERS", "many")
    with pytest.raises(Exception, match="APEXRL_ARCHIVE_MAX_MEMBERS='many' is not a number"):
        ax.Limits.from_env()


def _tar(members: list[tuple[str, str, str]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:", format=tarfile.PAX_FORMAT) as t:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(payload)
                t.addfile(info, io.BytesIO(payload.encode()))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE}[
                kind
            ]
            info.linkname = payload
            t.addfile(info)
    return buf.getvalue()


def test_a_link_chain_into_a_sibling_that_shares_the_prefix_is_refused(tmp_path):
    """`dest-evil` starts with `dest`: a prefix test without the separator lets a link
    resolve there. Each hop is lexically harmless; the chain is refused after resolution."""
    dest = tmp_path / "dest"
    evil = tmp_path / "dest-evil"
    evil.mkdir()
    (evil / "secret.txt").write_text("host secret")
    blob = _tar([
        ("p/q", "dir", ""),
        ("p/q/A", "sym", "../.."),  # the root itself: allowed
        ("U0", "sym", "p/q/A/.."),  # the root's parent
        ("U1", "sym", "U0/dest-evil"),  # the sibling with the shared prefix
        ("ok", "sym", "p/q"),
    ])  # fmt: skip
    res = ax.extract_tar(blob, dest, where="t", links="in_tree", skip_refused=True)
    assert sorted(r.name for r in res.refused) == ["U0", "U1"]
    assert {r.reason for r in res.refused} == {
        "link to 'p/q/A/..' leaves the tree", "link to 'U0/dest-evil' leaves the tree"
    }  # fmt: skip
    assert not (dest / "U1").is_symlink() and (dest / "ok").is_symlink()
    assert (dest / "p" / "q" / "A").is_symlink()
    with pytest.raises(BadRecordError, match="'U[01]'.*leaves the tree"):
        ax.extract_tar(blob, tmp_path / "dest2", where="t", links="in_tree")


@pytest.mark.parametrize(
    "link,target",
    [("a", "/etc/passwd"), ("a", ".."), ("a", "../x"), ("d/a", "../../x"), ("a", "x\x00y"),
     ("a", "")],
)  # fmt: skip
def test_lexically_escaping_links_are_refused_before_writing(tmp_path, link, target):
    m = [ax.Member("d", "dir", 0, 0o755), ax.Member(link, "symlink", 0, 0o777, target)]
    with pytest.raises(BadRecordError, match="leaves the tree"):
        ax.extract_members(m, tmp_path / "o", where="t", links="in_tree")
    assert not (tmp_path / "o").exists() or list((tmp_path / "o").iterdir()) == []


def test_in_tree_links_and_hard_links(tmp_path):
    blob = _tar([("d/f.txt", "file", "F"), ("d/l", "sym", "f.txt"), ("h", "hard", "d/f.txt"),
                 ("d2/up", "sym", "../d/f.txt")])  # fmt: skip
    res = ax.extract_tar(blob, tmp_path / "o", where="t", links="in_tree")
    assert res.n_links == 3 and res.n_files == 1
    assert (tmp_path / "o" / "h").read_text() == "F" and os.stat(tmp_path / "o" / "h").st_nlink == 2
    bad = _tar([("h", "hard", "missing.txt")])
    with pytest.raises(BadRecordError, match="not in the archive before it"):
        ax.extract_tar(bad, tmp_path / "p", where="t", links="in_tree")
    dirlink = _tar([("d", "dir", ""), ("h", "hard", "d")])
    with pytest.raises(BadRecordError, match="not a regular file"):
        ax.extract_tar(dirlink, tmp_path / "q", where="t", links="in_tree")


def test_member_count_size_and_total_limits(tmp_path):
    files = [ax.Member(f"f{i}", "file", 3, 0o644, data=b"abc") for i in range(3)]
    with pytest.raises(BadRecordError, match=r"3 members \(limit 2\)"):
        ax.extract_members(files, tmp_path / "a", where="t", limits=ax.Limits(max_members=2))
    ax.extract_members(files, tmp_path / "b", where="t", limits=ax.Limits(max_members=3))
    with pytest.raises(BadRecordError, match="3 bytes exceeds the 2-byte limit"):
        ax.extract_members(files, tmp_path / "c", where="t", limits=ax.Limits(max_member_bytes=2))
    with pytest.raises(BadRecordError, match="more than 8 bytes"):
        ax.extract_members(files, tmp_path / "d", where="t", limits=ax.Limits(max_total_bytes=8))
    ax.extract_members(files, tmp_path / "e", where="t", limits=ax.Limits(max_total_bytes=9))
    liar = [ax.Member("x", "file", 2, 0o644, data=b"abc")]
    with pytest.raises(BadRecordError, match="larger than its declared 2 bytes"):
        ax.extract_members(liar, tmp_path / "f", where="t")


@pytest.mark.parametrize(
    "name,ok",
    [("a/b.txt", "a/b.txt"), ("./a//b/", "a/b"), ("a/./b", "a/b"), (".", ""),
     ("/etc/x", None), ("../x", None), ("a/../../x", None), ("a/../b", None), ("a\x00b", None)],
)  # fmt: skip
def test_member_names(name, ok):
    if ok is None:
        with pytest.raises(ValueError):
            ax.check_name(name)
    else:
        assert ax.check_name(name) == ok


def test_zip_drive_letters_links_and_specials_are_refused(tmp_path):
    z = tmp_path / "x.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("C:/win.txt", "x")
        link = zipfile.ZipInfo("l")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "ok.txt")
        fifo = zipfile.ZipInfo("p")
        fifo.external_attr = (stat.S_IFIFO | 0o644) << 16
        zf.writestr(fifo, "")
        zf.writestr("ok.txt", "fine")
    with zipfile.ZipFile(z) as zf:
        members, bad = ax.zip_members(zf, "z")
        assert bad == [
            ("C:/win.txt", "absolute path refused (a drive letter)"),
            ("p", "not a file, folder or link"),
        ]
        assert [(m.name, m.kind, m.linkname) for m in members] == [
            ("l", "symlink", "ok.txt"), ("ok.txt", "file", "")
        ]  # fmt: skip
        res = ax.extract_members(members, tmp_path / "o", where="z", links="in_tree")
    assert os.readlink(tmp_path / "o" / "l") == "ok.txt" and res.n_files == 1
    with pytest.raises(BadRecordError, match="drive letter"):
        ax.extract_zip(z, tmp_path / "o2", where="z", links="in_tree")
    with pytest.raises(BadRecordError, match="not a readable zip"):
        ax.extract_zip(tmp_path / "o" / "ok.txt", tmp_path / "n", where="z")


def test_nofollow_readers_refuse_links_and_specials(tmp_path):
    (tmp_path / "f.txt").write_bytes(b"0123456789")
    (tmp_path / "l").symlink_to(tmp_path / "f.txt")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "d").mkdir()
    assert nf.read_regular(tmp_path / "f.txt") == b"0123456789"
    assert nf.read_regular(tmp_path / "f.txt", max_bytes=3) == b"012"
    assert nf.read_tail(tmp_path / "f.txt", 4) == b"6789"
    assert nf.read_tail(tmp_path / "f.txt", 40) == b"0123456789"
    for bad, why in (("l", "a link"), ("fifo", "not a regular file"), ("d", "not a regular")):
        with pytest.raises(nf.RefusedPath, match=why):
            nf.read_regular(tmp_path / bad)
    with pytest.raises(FileNotFoundError):
        nf.read_regular(tmp_path / "missing")
    assert nf.is_regular(tmp_path / "f.txt") and not nf.is_regular(tmp_path / "l")
    assert not nf.is_regular(tmp_path / "missing")
    with nf.pinned(tmp_path / "f.txt") as p:
        assert p.startswith("/proc/self/fd/") and Path(p).read_bytes() == b"0123456789"
    with nf.open_nofollow(tmp_path / "f.txt") as fh:
        assert fh.read() == b"0123456789"


def test_walks_never_descend_through_links_and_scrub_records(tmp_path):
    root = tmp_path / "logs"
    (root / "a" / "b").mkdir(parents=True)
    (root / "z.txt").write_text("z")
    (root / "a" / "b" / "y.txt").write_text("y")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    (root / "a" / "out").symlink_to(outside)
    (root / "a" / "f").symlink_to(outside / "secret")
    os.mkfifo(root / "a" / "pipe")
    files = [p.relative_to(root).as_posix() for p in nf.regular_files(root)]
    assert files == ["z.txt", "a/b/y.txt"] or files == ["a/b/y.txt", "z.txt"]
    assert "secret" not in " ".join(files)
    assert list(nf.regular_files(root / "a" / "out")) == []  # a link root: nothing
    removed = nf.scrub(root)
    assert sorted((r["path"], r["kind"], r.get("link_to")) for r in removed) == [
        ("a/f", "link", str(outside / "secret")), ("a/out", "link", str(outside)),
        ("a/pipe", "special", None),
    ]  # fmt: skip
    assert json.loads((root / nf.REFUSED_FILE).read_text()) == {"refused": removed}
    assert (outside / "secret").read_text() == "s"
    assert nf.scrub(root / "missing") == []
    assert nf.scrub(root, record=False) == []


def test_copy_regular_keeps_mode_and_replaces_a_link_at_the_destination(tmp_path):
    src = tmp_path / "s"
    src.write_bytes(b"data")
    src.chmod(0o750)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    dst = tmp_path / "d"
    dst.symlink_to(victim)
    nf.copy_regular(src, dst)
    assert dst.read_bytes() == b"data" and not dst.is_symlink()
    assert stat.S_IMODE(dst.stat().st_mode) == 0o750 and victim.read_text() == "keep"
    (tmp_path / "l").symlink_to(src)
    with pytest.raises(nf.RefusedPath):
        nf.copy_regular(tmp_path / "l", tmp_path / "d2")


# --- what mutation testing found untested (make mutate MODULES=nofollow) -----------------


def test_refusals_carry_errno_message_and_path(tmp_path):
    import errno

    (tmp_path / "f").write_text("x")
    (tmp_path / "l").symlink_to(tmp_path / "f")
    (tmp_path / "d").mkdir()
    with pytest.raises(nf.RefusedPath) as e:
        nf.open_regular(tmp_path / "l")
    assert (e.value.errno, e.value.strerror, e.value.filename) == (
        errno.ELOOP, "a link (not followed)", str(tmp_path / "l")
    )  # fmt: skip
    with pytest.raises(nf.RefusedPath) as e:
        nf.open_regular(tmp_path / "d")
    assert (e.value.errno, e.value.strerror, e.value.filename) == (
        errno.EINVAL, "not a regular file", str(tmp_path / "d")
    )  # fmt: skip


def test_an_entry_that_cannot_be_stat_is_neither_read_nor_removed(tmp_path, monkeypatch):
    root = tmp_path / "logs"
    root.mkdir()
    (root / "gone.txt").write_text("g")
    (root / "ok.txt").write_text("o")
    real = os.lstat

    def lstat(p, *a, **kw):
        if str(p).endswith("gone.txt"):
            raise FileNotFoundError(p)  # vanished between the listing and the check
        return real(p, *a, **kw)

    monkeypatch.setattr(nf.os, "lstat", lstat)
    assert [p.name for p in nf.regular_files(root)] == ["ok.txt"]
    assert nf.scrub(root) == [] and (root / "gone.txt").exists()
    assert not (root / nf.REFUSED_FILE).exists()  # nothing refused: no record written


def test_copy_over_a_longer_file_leaves_no_tail(tmp_path):
    (tmp_path / "src").write_bytes(b"new")
    (tmp_path / "dst").write_bytes(b"an older and longer content")
    nf.copy_regular(tmp_path / "src", tmp_path / "dst")
    assert (tmp_path / "dst").read_bytes() == b"new"


# --- what mutation testing found untested (make mutate MODULES=archive_extract) ----------


@pytest.mark.parametrize(
    "name,out",
    [("a\\b.txt", "a/b.txt"), ("a//b", "a/b"), ("a/", "a"), ("x/./y", "x/y"), ("./q", "q"),
     ("a\\..\\..\\x", "path traversal ('..') refused"), ("\\etc\\x", "absolute path refused"),
     ("a\x00b", "NUL in name"), ("/x", "absolute path refused"),
     ("..", "path traversal ('..') refused")],
)  # fmt: skip
def test_member_names_exactly(name, out):
    if out.endswith("refused") or out == "NUL in name":
        with pytest.raises(ValueError) as e:
            ax.check_name(name)
        assert str(e.value) == out
    else:
        assert ax.check_name(name) == out


def test_refusals_name_the_member_the_reason_and_the_setting(tmp_path):
    def refused(members, limits=None, links="none", skip=False):
        if skip:
            return ax.extract_members(members, tmp_path / "s", where="ds#3", links=links,
                                      limits=limits, skip_refused=True).refused  # fmt: skip
        with pytest.raises(BadRecordError) as e:
            ax.extract_members(members, tmp_path / "o", where="ds#3", links=links, limits=limits)
        return e.value

    f = ax.Member("f", "file", 3, 0o644, data=b"abc", label="./f")
    e = refused([f, f], ax.Limits(max_members=1))
    assert "ds#3" in str(e) and "2 members (limit 1)" in str(e)
    assert e.hint == "raise APEXRL_ARCHIVE_MAX_MEMBERS if the data is genuine"
    e = refused([f], ax.Limits(max_member_bytes=2))
    assert "ds#3 member './f'" in str(e) and "3 bytes exceeds the 2-byte limit" in str(e)
    assert e.hint == "raise APEXRL_ARCHIVE_MAX_MEMBER_BYTES if the data is genuine"
    e = refused([f], ax.Limits(max_total_bytes=2))
    assert "expands to more than 2 bytes" in str(e)
    assert e.hint == "raise APEXRL_ARCHIVE_MAX_TOTAL_BYTES if the data is genuine"
    link = ax.Member("l", "symlink", 0, 0o777, "f", label="./l")
    e = refused([f, link])
    assert "ds#3 member './l'" in str(
        e
    ) and "link to 'f' refused (links are not allowed here)" in str(e)
    got = refused([f, link, ax.Member("../x", "file", 1, 0o644, data=b"x")], skip=True)
    assert [(r.name, r.reason) for r in got] == [
        ("./l", "link to 'f' refused (links are not allowed here)"),
        ("../x", "path traversal ('..') refused"),
    ]
    assert (tmp_path / "s" / "f").read_bytes() == b"abc" and not (tmp_path / "s" / "l").exists()
    res = ax.extract_members([ax.Member("d", "dir", 0, 0o755), f], tmp_path / "c", where="w")
    assert (res.n_dirs, res.n_files, res.bytes, res.n_links) == (1, 1, 3, 0)
    hard = ax.Member("h", "hardlink", 0, 0o644, "d/../f")  # relative to the root, not its dir
    ax.extract_members([f, hard], tmp_path / "h", where="w", links="in_tree")
    assert (tmp_path / "h" / "h").read_bytes() == b"abc"


def test_a_file_where_a_folder_is_expected_is_refused(tmp_path):
    a = ax.Member("a", "file", 1, 0o644, data=b"x")
    b = ax.Member("a/b", "file", 1, 0o644, data=b"y")
    with pytest.raises(BadRecordError, match=r"path goes through a link or a file \('a'\)"):
        ax.extract_members([a, b], tmp_path / "o", where="w")
    res = ax.extract_members([ax.Member("p/q/r", "file", 1, 0o644, data=b"z")], tmp_path / "n",
                             where="w")  # fmt: skip
    assert stat.S_IMODE(os.stat(tmp_path / "n" / "p" / "q").st_mode) == 0o755 & ~ax._umask()
    assert res.n_files == 1


def test_the_ratio_floor_is_exclusive():
    ax.Limits(max_ratio=1, ratio_floor=100).check_ratio(100, 1, "w")  # at the floor: not checked
    with pytest.raises(BadRecordError, match="a compression bomb") as e:
        ax.Limits(max_ratio=1, ratio_floor=99).check_ratio(100, 1, "w")
    assert e.value.hint == "raise APEXRL_ARCHIVE_MAX_RATIO if the data is genuine"


def test_hard_links_resolve_from_the_root_and_skipping_goes_on(tmp_path):
    f = ax.Member("f", "file", 3, 0o644, data=b"abc")
    climb = ax.Member("d/h", "hardlink", 0, 0o644, "../f", label="d/h")  # from the root: out
    with pytest.raises(BadRecordError, match=r"member 'd/h'.*leaves the tree"):
        ax.extract_members([f, climb], tmp_path / "o", where="w", links="in_tree")
    bad = ax.Member("../x", "file", 1, 0o644, data=b"x", label="../x")
    later = [ax.Member(f"d{i}", "dir", 0, 0o755) for i in range(2)] + [
        ax.Member(f"g{i}", "file", 2, 0o644, data=b"gg") for i in range(2)
    ]
    res = ax.extract_members([f, bad, climb, *later], tmp_path / "s", where="w",
                             links="in_tree", skip_refused=True)  # fmt: skip
    assert [r.name for r in res.refused] == ["../x", "d/h"]
    assert (res.n_dirs, res.n_files, res.bytes) == (2, 3, 7)  # the members after go on


# --- archive extraction: what mutation testing found untested (round 4, second pass) ---


def _file(name: str, data: bytes = b"x", label: str = "") -> ax.Member:
    return ax.Member(name=name, kind="file", size=len(data), data=data, label=label)


def test_links_are_refused_unless_the_caller_allows_them(tmp_path):
    """The default link policy is none: a symlink member is refused, never written."""
    link = ax.Member(name="l", kind="symlink", linkname="f")
    with pytest.raises(BadRecordError, match="links are not allowed here"):
        ax.extract_members([_file("f"), link], tmp_path / "o", where="t")
    assert not (tmp_path / "o").exists()


def test_skipped_refusals_are_recorded_by_label_and_the_rest_goes_on(tmp_path):
    """With skip_refused every refusal is recorded under the member's own spelling and
    extraction goes on with the members after it."""
    out = tmp_path / "o"
    members = [
        _file("../up", label="L-up"),  # a bad name
        _file("a1"),
        ax.Member(name="esc", kind="symlink", linkname="../../x", label="L-esc"),  # leaves
        _file("a2"),
        _file("big", b"0123456789A", label="L-big"),  # over the member limit
        _file("a3"),
        ax.Member(name="d", kind="dir"),
        _file("d", label="L-clash"),  # a file where a folder is: refused when written
        _file("e"),
        ax.Member(name="e", kind="dir"),  # no label: its name
        _file("a4", b"0123456789"),  # exactly at the limit: fine
        ax.Member(name="abs", kind="symlink", linkname="/etc", label="L-abs"),  # absolute
        _file("a5"),
        ax.Member(name="./", kind="dir"),  # the root itself: nothing to write
        _file("a6"),
    ]
    got = ax.extract_members(
        members, out, where="t", links="in_tree", skip_refused=True,
        bad=[("dev/null", "device refused")], limits=ax.Limits(max_member_bytes=10),
    )  # fmt: skip
    assert [(r.name, r.reason) for r in got.refused] == [
        ("dev/null", "device refused"),
        ("L-up", "path traversal ('..') refused"),
        ("L-esc", "link to '../../x' leaves the tree"),
        ("L-big", "member of 11 bytes exceeds the 10-byte limit"),
        ("L-abs", "link to '/etc' leaves the tree"),  # static refusals first, then writes
        ("L-clash", "a file and a folder share this name"),
        ("e", "path goes through a link or a file ('e')"),
    ]
    names = sorted(p.name for p in out.iterdir())
    assert names == ["a1", "a2", "a3", "a4", "a5", "a6", "d", "e"]
    assert (out / "a4").read_bytes() == b"0123456789" and got.n_files == 7


def test_errors_name_the_archive(tmp_path):
    with pytest.raises(BadRecordError) as e:
        ax.extract_members([_file("a", b"12345"), _file("b", b"12345")], tmp_path / "o",
                           where="w.zip", limits=ax.Limits(max_total_bytes=8))  # fmt: skip
    assert str(e.value).startswith("w.zip: refused: expands to more than 8 bytes")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(BadRecordError) as e:
        ax.extract_members([_file("a")], tmp_path / "link", where="w.zip")
    assert str(e.value).startswith("w.zip: destination ")
    assert list((tmp_path / "real").iterdir()) == []


def test_no_ratio_check_without_a_compressed_size(tmp_path):
    """The compression-ratio limit applies when the caller knows the compressed size;
    a member list from memory (no size known) is bounded by the byte limits only."""
    big = bytes(17 * 1024 * 1024)  # past the ratio floor
    got = ax.extract_members([_file("z", big)], tmp_path / "o", where="t")
    assert got.bytes == len(big)
    with pytest.raises(BadRecordError, match="ratio"):
        ax.extract_members([_file("z", big)], tmp_path / "p", where="t", compressed_size=1)


def test_folders_are_made_0755_whatever_the_umask(tmp_path):
    old = os.umask(0o002)
    try:
        ax.extract_members([_file("a/b/c")], tmp_path / "o", where="t")
    finally:
        os.umask(old)
    for d in ("a", "a/b"):
        assert stat.S_IMODE(os.stat(tmp_path / "o" / d).st_mode) == 0o755, d


def test_scrub_goes_on_when_a_link_vanishes_mid_scrub(tmp_path, monkeypatch):
    """Another process removing a link between scrub's lstat and its readlink or unlink,
    or a refused-links record that cannot be written, never stops the scrub."""
    root = tmp_path / "r"
    root.mkdir()
    for n in ("a", "b", "c"):
        (root / n).symlink_to("/etc/passwd")
    real_readlink, real_unlink = os.readlink, Path.unlink

    def readlink(p, *a, **k):
        if Path(p).name == "a":
            raise FileNotFoundError(2, "vanished", str(p))
        return real_readlink(p, *a, **k)

    def unlink(self, *a, **k):
        if self.name == "b":
            real_unlink(self)
            raise FileNotFoundError(2, "vanished", str(self))
        return real_unlink(self, *a, **k)

    def write_text(self, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "readlink", readlink)
    monkeypatch.setattr(Path, "unlink", unlink)
    monkeypatch.setattr(Path, "write_text", write_text)
    removed = nf.scrub(root)
    assert removed == [
        {"path": "a", "kind": "link"},  # its target could not be read any more
        {"path": "b", "link_to": "/etc/passwd", "kind": "link"},
        {"path": "c", "link_to": "/etc/passwd", "kind": "link"},
    ]
    assert list(root.iterdir()) == []  # all gone; the record could not be written

"""The C fast path of tar extraction (apexrl/artifacts/_fasttar.c) against the Python
extractor: the same tree for every plain archive, nothing written for anything else
(the Python extractor then decides, with its own messages), and no link followed."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apexrl.artifacts import archive_extract, archive_write
from apexrl.errors import BadRecordError

LIMITS = archive_extract.Limits()


def _native():
    """The built module itself: `make install` builds it, so its absence is a failure."""
    from apexrl.artifacts import _fasttar

    return _fasttar


def _call(raw: bytes, dest: Path, strip: str | None = None, limits=LIMITS, compressed=0):
    dest.mkdir(parents=True, exist_ok=True)
    return _native().extract(
        raw, os.fspath(dest), strip, archive_extract.native_limits(limits), compressed
    )


def _snapshot(root: Path) -> dict[str, tuple]:
    out: dict[str, tuple] = {}
    for p in sorted(root.rglob("*")):
        st_ = os.lstat(p)
        rel = str(p.relative_to(root))
        if stat.S_ISLNK(st_.st_mode):
            out[rel] = ("link", os.readlink(p))
        elif stat.S_ISREG(st_.st_mode):
            out[rel] = ("file", stat.S_IMODE(st_.st_mode), p.read_bytes())
        else:
            out[rel] = ("dir", stat.S_IMODE(st_.st_mode))
    return out


def _python_extract(monkeypatch, raw: bytes, dest: Path, **kw):
    with monkeypatch.context() as m:
        m.setenv("APEXRL_NATIVE_TAR", "0")
        assert archive_extract.native_tar() is None
        return archive_extract.extract_tar(raw, dest, where="t", **kw)


def _tarfile_bytes(members, fmt=tarfile.PAX_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:", format=fmt) as t:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind in ("file", "exec"):
                info.mode = 0o755 if kind == "exec" else 0o644
                info.size = len(payload)
                t.addfile(info, io.BytesIO(payload))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE}[
                kind
            ]
            info.linkname = payload if isinstance(payload, str) else ""
            t.addfile(info)
    return buf.getvalue()


def test_the_module_is_built_and_used():
    assert archive_extract.native_tar() is _native()


def test_a_packed_task_extracts_to_the_same_tree(tmp_path, monkeypatch):
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all
    from apexrl.tasks.example import write_example
    from apexrl.tasks.pack import pack_task_dir

    write_example(tmp_path / "expert", seed=0)
    list(convert_all(load_source(tmp_path / "expert"), tmp_path / "tasks", {}, strict=True))
    for task in sorted((tmp_path / "tasks").iterdir()):
        blob = pack_task_dir(task)[0]
        raw = archive_extract.gunzip(blob, "t")
        fast, slow = tmp_path / "fast" / task.name, tmp_path / "slow" / task.name
        assert _call(raw, fast, strip=task.name, compressed=len(blob)) is not None, task.name
        _python_extract(monkeypatch, raw, slow, strip=task.name, links="in_tree")
        assert _snapshot(fast) == _snapshot(slow) == _snapshot(task)


@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT])
def test_tarfile_formats_and_long_names(tmp_path, monkeypatch, fmt):
    members = [
        ("t", "dir", b""),
        ("t/a/b/c.txt", "file", b"x" * 1000),
        ("t/a/run.sh", "exec", b"#!/bin/sh\n"),
        ("t/.apps_data/mail/inbox.mbox", "file", b"From a\n"),
        ("t/empty", "file", b""),
        ("t/z/deep/" + "d" * 90 + "/f", "file", b"long"),  # > 100 bytes: PAX or prefix
    ]
    raw = _tarfile_bytes(members, fmt)
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    done = _call(raw, fast, strip="t")
    if fmt == tarfile.GNU_FORMAT:  # a GNU long-name record: the Python path's
        assert done is None and list(fast.iterdir()) == []
        return
    assert done == (5, 0, 1021)  # files, folder members (the stripped root is none), bytes
    _python_extract(monkeypatch, raw, slow, strip="t")
    assert _snapshot(fast) == _snapshot(slow)
    assert stat.S_IMODE(os.lstat(fast / "a" / "run.sh").st_mode) == 0o755
    assert stat.S_IMODE(os.lstat(fast / "a" / "b" / "c.txt").st_mode) == 0o644


@pytest.mark.parametrize(
    "members",
    [
        [("a", "sym", "b")],  # links: the Python path checks them on the real filesystem
        [("a", "file", b"x"), ("h", "hard", "a")],
        [("a//b", "file", b"x")],  # names it would normalise (but a leading "./")
        [("a/./b", "file", b"x")],
        [("../evil", "file", b"x")],
        [("/abs", "file", b"x")],
        [("a\\b", "file", b"x")],
        [("résumé.txt", "file", b"x")],  # non-ASCII (a PAX path record)
    ],
)
def test_anything_not_plain_is_left_to_python_with_nothing_written(tmp_path, members):
    raw = _tarfile_bytes(members)
    assert _call(raw, tmp_path / "d") is None
    assert list((tmp_path / "d").iterdir()) == []


def test_devices_long_names_and_corrupt_headers_are_declined(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:", format=tarfile.GNU_FORMAT) as t:
        info = tarfile.TarInfo("fifo")
        info.type = tarfile.FIFOTYPE
        t.addfile(info)
    assert _call(buf.getvalue(), tmp_path / "fifo") is None
    raw = bytearray(archive_write.tar_bytes([archive_write.bytes_entry("f.txt", b"x" * 1000)]))
    for at in (0, 130, 150, 300):  # name, size, checksum, magic: the checksum fails
        bad = bytearray(raw)
        bad[at] ^= 1
        assert _call(bytes(bad), tmp_path / f"bad{at}") is None, at
    assert _call(bytes(raw[:700]), tmp_path / "short") is None  # truncated data
    assert _call(bytes(raw[:1536]), tmp_path / "noend") is None  # no end-of-archive block
    assert _call(b"", tmp_path / "empty") is None
    for d in tmp_path.iterdir():
        assert list(d.iterdir()) == [], d


def test_limits_are_declined_and_python_names_them(tmp_path):
    raw = archive_write.tar_bytes(
        [archive_write.bytes_entry(f"f{i}", b"x" * 2000) for i in range(3)]
    )
    small = archive_extract.Limits(max_member_bytes=1000)
    assert _call(raw, tmp_path / "a", limits=small) is None
    assert _call(raw, tmp_path / "b", limits=archive_extract.Limits(max_total_bytes=5000)) is None
    assert _call(raw, tmp_path / "c", limits=archive_extract.Limits(max_members=2)) is None
    ratio = archive_extract.Limits(max_ratio=2.0, ratio_floor=100)
    assert _call(raw, tmp_path / "d", limits=ratio, compressed=100) is None
    assert _call(raw, tmp_path / "e", limits=ratio, compressed=5000) == (3, 0, 6000)
    with pytest.raises(BadRecordError, match="member 'f0'.*1000-byte limit"):
        archive_extract.extract_tar(raw, tmp_path / "f", where="t", limits=small)


def test_a_failed_write_is_undone_and_python_decides(tmp_path, monkeypatch):
    """A duplicate name (the later file wins) and a folder over a file: the C writer
    stops at the clash, its folder is emptied, and the Python extractor's outcome is
    the one the caller sees, exactly as with the fast path turned off."""
    dup = archive_write.tar_bytes(
        [archive_write.bytes_entry("d/f", b"first"), archive_write.bytes_entry("d/f", b"second")]
    )
    with pytest.raises(OSError):
        _call(dup, tmp_path / "raw")
    archive_extract.extract_tar(dup, tmp_path / "fast", where="t")
    _python_extract(monkeypatch, dup, tmp_path / "slow")
    assert _snapshot(tmp_path / "fast") == _snapshot(tmp_path / "slow")
    assert (tmp_path / "fast" / "d" / "f").read_bytes() == b"second"
    clash = archive_write.tar_bytes(
        [archive_write.bytes_entry("a", b"file"), archive_write.bytes_entry("a/b", b"under a file")]
    )
    with pytest.raises(BadRecordError) as fast_err:
        archive_extract.extract_tar(clash, tmp_path / "c1", where="row 3")
    with pytest.raises(BadRecordError) as slow_err:
        _python_extract(monkeypatch, clash, tmp_path / "c2")
    assert str(fast_err.value).replace("row 3", "t") == str(slow_err.value)


def test_no_link_is_followed_when_one_is_planted(tmp_path):
    """The writer opens every folder with O_NOFOLLOW relative to its parent: a link in
    the destination (only the Python path is given a non-empty folder, but the C code
    holds the line by itself) stops the write instead of redirecting it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    os.symlink(outside, dest / "a")
    raw = archive_write.tar_bytes([archive_write.bytes_entry("a/evil", b"x")])
    with pytest.raises(OSError):
        _call(raw, dest)
    assert list(outside.iterdir()) == []
    os.symlink(outside, tmp_path / "dest-link")
    with pytest.raises(OSError):
        _call(raw, tmp_path / "dest-link")  # the destination itself a link
    assert list(outside.iterdir()) == []
    archive_extract.extract_tar(raw, tmp_path / "p", where="t")  # the public entry: a fresh folder
    assert (tmp_path / "p" / "a" / "evil").read_bytes() == b"x"


def test_modes_ignore_the_umask(tmp_path):
    raw = archive_write.tar_bytes(
        [
            archive_write.bytes_entry("x.sh", b"#!", executable=True),
            archive_write.bytes_entry("y", b""),
        ]
    )
    old = os.umask(0o077)
    try:
        dest = tmp_path / "d"
        dest.mkdir()
        _native().extract(raw, os.fspath(dest), None, (10, 1 << 20, 1 << 20, 1000.0, 0, 0o077), 0)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.lstat(dest / "x.sh").st_mode) == 0o755
    assert stat.S_IMODE(os.lstat(dest / "y").st_mode) == 0o644


_part = st.sampled_from(["a", "b", ".h", "c.txt", "D"])
_plain_member = st.tuples(
    st.tuples(st.sampled_from(["", "", "./", "././"]), st.lists(_part, min_size=1, max_size=4)).map(
        lambda t: t[0] + "/".join(t[1])
    ),
    st.sampled_from(["file", "exec", "dir"]),
    st.binary(max_size=700),
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    members=st.lists(_plain_member, min_size=1, max_size=12),
    fmt=st.sampled_from(["apexrl", "pax", "ustar"]),
    strip=st.sampled_from([None, "a"]),
)
def test_property_same_outcome_as_python(tmp_path_factory, monkeypatch, members, fmt, strip):
    """Random plain trees, clashes included: the same tree, or the same refusal."""
    if fmt == "apexrl":
        entries = [
            archive_write.Entry(n, "dir")
            if k == "dir"
            else archive_write.bytes_entry(n, d, executable=k == "exec")
            for n, k, d in members
        ]
        raw = archive_write.tar_bytes(entries)
    else:
        raw = _tarfile_bytes(members, tarfile.PAX_FORMAT if fmt == "pax" else tarfile.USTAR_FORMAT)
    base = tmp_path_factory.mktemp("same")
    outcomes = []
    used = []
    for label, dest in (("fast", base / "fast"), ("slow", base / "slow")):
        dest.mkdir()
        try:
            if label == "fast":
                try:
                    used.append(_call(raw, base / "probe", strip=strip) is not None)
                except OSError:  # a clash found while writing
                    used.append(False)
                archive_extract.extract_tar(raw, dest, where="t", strip=strip)
            else:
                _python_extract(monkeypatch, raw, dest, strip=strip)
            outcomes.append(_snapshot(dest))
        except BadRecordError as e:
            outcomes.append(str(e))
    assert outcomes[0] == outcomes[1]
    assert used == [_no_clash(members, strip)]  # the fast path took every plain tree


def _no_clash(members, strip: str | None) -> bool:
    """No file named twice, and no file where a folder goes (its name a folder's, or
    a parent of another member): the trees the C writer writes without a question."""
    names = [(n, k) for n, k, _ in members]
    if strip and all(n == strip or n.startswith(strip + "/") for n, _ in names):
        names = [(n[len(strip) + 1 :], k) for n, k in names if n != strip]
    names = [(n.removeprefix("./").removeprefix("./"), k) for n, k in names]  # the one rewrite
    files = [n for n, k in names if k != "dir"]
    dirs = {n for n, k in names if k == "dir"}
    parents = {n.rsplit("/", 1)[0] for n, _ in names if "/" in n}
    parents |= {p.rsplit("/", i)[0] for p in parents for i in range(1, p.count("/") + 1)}
    return len(files) == len(set(files)) and not (set(files) & (dirs | parents))


def test_unpack_in_c_batches_and_in_processes_agree(tmp_path, monkeypatch):
    """unpack_dataset takes batches through the C writer when it is built, worker
    processes when not: the same folders and the same stamp log either way."""
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all
    from apexrl.tasks.dataset import write_dataset
    from apexrl.tasks.example import write_example
    from apexrl.tasks.pack import find_task_dirs, pack_dirs
    from apexrl.tasks.unpack import unpack_dataset

    write_example(tmp_path / "expert", seed=1)
    list(convert_all(load_source(tmp_path / "expert"), tmp_path / "tasks", {}, strict=True))
    write_dataset(pack_dirs(find_task_dirs(tmp_path / "tasks")), tmp_path / "ds")
    a = unpack_dataset(tmp_path / "ds", tmp_path / "a", strict=False, workers=2)
    monkeypatch.setenv("APEXRL_NATIVE_TAR", "0")
    b = unpack_dataset(tmp_path / "ds", tmp_path / "b", strict=False, workers=2)
    assert [(r.path, r.status, r.sha256) for r in a] == [(r.path, r.status, r.sha256) for r in b]
    snap_a, snap_b = _snapshot(tmp_path / "a"), _snapshot(tmp_path / "b")
    assert {k: v for k, v in snap_a.items() if not k.startswith(".apexrl")} == {
        k: v for k, v in snap_b.items() if not k.startswith(".apexrl")
    }
    log = ".apexrl/unpacked.log"
    assert sorted(snap_a[log][2].splitlines()) == sorted(snap_b[log][2].splitlines())
    for task in find_task_dirs(tmp_path / "tasks"):
        assert _snapshot(tmp_path / "a" / task.name) == _snapshot(task)


def _gz_call(blob: bytes, dest: Path, strip: str | None = None, limits=LIMITS):
    dest.mkdir(parents=True, exist_ok=True)
    return _native().extract_gz(blob, os.fspath(dest), strip, archive_extract.native_limits(limits))


def test_gzip_inside_the_c_call_keeps_gunzips_rules(tmp_path):
    """Inflate in C reads what gunzip reads (members, zero padding) and declines what
    gunzip refuses (truncated, a bad CRC, a bomb past the bound), writing nothing."""
    import gzip

    raw = archive_write.tar_bytes([archive_write.bytes_entry("t/f.txt", b"hello " * 500)])
    blob = archive_write.gzip_fast(raw)
    assert _gz_call(blob, tmp_path / "one", "t") == (1, 0, 3000)
    assert _gz_call(archive_write.gzip_bytes(raw), tmp_path / "zlib", "t") == (1, 0, 3000)
    half = len(raw) // 2
    multi = gzip.compress(raw[:half]) + gzip.compress(raw[half:]) + b"\0" * 8
    assert _gz_call(multi, tmp_path / "multi", "t") == (1, 0, 3000)
    assert (tmp_path / "multi" / "f.txt").read_bytes() == b"hello " * 500
    bad_crc = bytearray(blob)
    bad_crc[-6] ^= 1
    declined = {
        "truncated": blob[:-20],
        "crc": bytes(bad_crc),
        "garbage": blob + b"junk",
        "not-gzip": raw,
        "empty": b"",
    }
    for name, data in declined.items():
        assert _gz_call(data, tmp_path / name, "t") is None, name
        assert list((tmp_path / name).iterdir()) == [], name
    bomb = archive_write.gzip_bytes(
        archive_write.tar_bytes([archive_write.bytes_entry("z", bytes(40 << 20))])
    )
    assert _gz_call(bomb, tmp_path / "bomb") is None  # 40 MiB of zeros from ~40 KiB
    with pytest.raises(BadRecordError, match="compression bomb"):
        archive_extract.extract_targz(bomb, tmp_path / "bomb", where="row 1")


def test_a_batch_with_rows_of_every_kind_matches_the_process_path(tmp_path, monkeypatch):
    """One C batch holding a plain row, a row with an in-tree link (declined: Python
    writes it), a row with a duplicate name (fails part way: Python decides), an
    escaping link and an empty blob (refused by name): unpack_dataset gives the same
    results, trees and errors as the worker-process path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from apexrl.tasks.unpack import unpack_dataset

    def tgz(entries):
        return archive_write.gzip_fast(archive_write.tar_bytes(entries))

    rows = {
        "plain": tgz(
            [archive_write.Entry("plain", "dir"), archive_write.bytes_entry("plain/a.txt", b"a")]
        ),
        "linked": tgz(
            [
                archive_write.bytes_entry("linked/a.txt", b"a"),
                archive_write.Entry("linked/l", "symlink", linkname="a.txt"),
            ]
        ),
        "dup": tgz(
            [archive_write.bytes_entry("dup/f", b"1"), archive_write.bytes_entry("dup/f", b"2")]
        ),
        "escape": tgz([archive_write.Entry("escape/l", "symlink", linkname="../../etc")]),
        "empty": b"",
    }
    ds = tmp_path / "ds.parquet"
    pq.write_table(pa.table({"path": list(rows), "task_binary": list(rows.values())}), ds)
    outcomes = []
    for mode in ("1", "0"):
        monkeypatch.setenv("APEXRL_NATIVE_TAR", mode)
        errors: list[str] = []
        out = tmp_path / f"out{mode}"
        got = unpack_dataset(
            ds, out, strict=False, on_error=lambda e, errs=errors: errs.append(str(e))
        )
        snap = {k: v for k, v in _snapshot(out).items() if not k.startswith(".apexrl")}
        outcomes.append(([(r.path, r.status) for r in got], sorted(errors), snap))
    assert outcomes[0] == outcomes[1]
    results, errors, snap = outcomes[0]
    assert [p for p, _ in results] == ["plain", "linked", "dup"]
    assert snap["dup/f"][2] == b"2" and snap["linked/l"] == ("link", "a.txt")
    assert len(errors) == 2 and any("empty" in e for e in errors)


# --- packing: tar_dir gives tar_task_dir's bytes -------------------------------------------


def _python_tar(monkeypatch, folder: Path, keep: dict | None = None) -> bytes:
    from apexrl.tasks.pack import tar_task_dir

    with monkeypatch.context() as m:
        m.setenv("APEXRL_NATIVE_TAR", "0")
        return tar_task_dir(folder, keep=keep)


_leaf = st.sampled_from(["a", "b.txt", ".hidden", "Z", "task.toml", "archipelago.json", "x" * 120])


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    files=st.dictionaries(
        st.lists(_leaf, min_size=1, max_size=3).map("/".join),
        st.tuples(st.binary(max_size=1500), st.booleans()),
        max_size=10,
    )
)
def test_property_tar_dir_is_byte_identical(tmp_path_factory, monkeypatch, files):
    """Random trees (long names, nested folders, executables, empty files, the metadata
    files at the top and below): the same bytes, the same kept metadata."""
    root = tmp_path_factory.mktemp("pack") / "task"
    root.mkdir()
    for rel, (data, executable) in files.items():
        path = root / rel
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_dir():
                continue
            path.write_bytes(data)
        except (NotADirectoryError, FileExistsError, IsADirectoryError):
            continue  # a file where this tree wants a folder: not a tree
        path.chmod(0o755 if executable else 0o644)
    kept_c: dict = {}
    done = _native().tar_dir(os.fspath(root))
    assert done is not None
    tar, kept_c = done
    kept_py: dict = {}
    assert tar == _python_tar(monkeypatch, root, kept_py)
    assert kept_c == kept_py


def test_tar_dir_of_converted_tasks_and_its_refusals(tmp_path, monkeypatch):
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all
    from apexrl.tasks.example import write_example
    from apexrl.tasks.pack import pack_task_dir

    write_example(tmp_path / "expert", seed=3)
    list(convert_all(load_source(tmp_path / "expert"), tmp_path / "tasks", {}, strict=True))
    task = sorted((tmp_path / "tasks").iterdir())[0]
    tar, kept = _native().tar_dir(os.fspath(task))
    assert tar == _python_tar(monkeypatch, task) and set(kept) == {"task.toml", "archipelago.json"}
    native_blob = pack_task_dir(task)
    monkeypatch.setenv("APEXRL_NATIVE_TAR", "0")
    assert pack_task_dir(task) == native_blob  # the task_binary and its sha256
    monkeypatch.delenv("APEXRL_NATIVE_TAR")
    # A link, a fifo, a non-ASCII name: declined by C; Python refuses or packs them.
    (task / "link").symlink_to("task.toml")
    assert _native().tar_dir(os.fspath(task)) is None
    with pytest.raises(BadRecordError, match="symbolic links are not packed"):
        pack_task_dir(task)
    (task / "link").unlink()
    os.mkfifo(task / "pipe")
    assert _native().tar_dir(os.fspath(task)) is None
    with pytest.raises(BadRecordError, match="special files"):
        pack_task_dir(task)
    (task / "pipe").unlink()
    (task / "résumé.txt").write_text("cv")
    assert _native().tar_dir(os.fspath(task)) is None
    members, _ = archive_extract.tar_members(
        archive_extract.gunzip(pack_task_dir(task)[0], "t"), "t"
    )
    assert "résumé.txt" in {m.name for m in members}
    assert _native().tar_dir(os.fspath(tmp_path / "missing")) is None


def test_rows_as_the_recipe_and_gnu_tar_write_them(tmp_path, monkeypatch):
    """Rows from outside apexrl: the recipe's packer (tarfile.add of the task dir under
    its own name: PAX format, real mtimes, owner names) and GNU tar (`tar czf -C parent
    <task>`: GNU magic) go through the C path and give the Python extractor's tree;
    and `tar czf -C <task> .` (names under "./", the one rewrite the C path makes)."""
    import subprocess

    from tests.test_tasks_recipe_format import recipe_task

    task = recipe_task(tmp_path / "tasks", "acme-corp", 1)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(task, arcname=task.name)
    gnu = tmp_path / "gnu.tgz"
    subprocess.run(["tar", "czf", str(gnu), "-C", str(task.parent), task.name], check=True)
    dot = tmp_path / "dot.tgz"
    subprocess.run(["tar", "czf", str(dot), "-C", str(task), "."], check=True)
    for label, blob, taken in (
        ("recipe", buf.getvalue(), True),
        ("gnu", gnu.read_bytes(), True),
        ("dot", dot.read_bytes(), True),
    ):
        done = _gz_call(blob, tmp_path / "c" / label, task.name)
        assert (done is not None) == taken, label
        fast = tmp_path / "fast" / label
        fast.mkdir(parents=True)
        archive_extract.extract_targz(blob, fast, where=label, links="in_tree", strip=task.name)
        slow = tmp_path / "slow" / label
        with monkeypatch.context() as m:
            m.setenv("APEXRL_NATIVE_TAR", "0")
            archive_extract.extract_targz(blob, slow, where=label, links="in_tree", strip=task.name)
        want = {k: v[:1] + v[2:] for k, v in _snapshot(task).items()}  # modes: the writer's
        for got in (fast, slow):
            assert {k: v[:1] + v[2:] for k, v in _snapshot(got).items()} == want, label
        assert _snapshot(fast) == _snapshot(slow), label


_SEED_TARS = [
    archive_write.tar_bytes(
        [
            archive_write.Entry("t", "dir"),
            archive_write.bytes_entry("t/a.txt", b"alpha" * 30),
            archive_write.bytes_entry("t/" + "n" * 120 + "/deep.txt", b"long"),  # a PAX record
            archive_write.bytes_entry("t/run.sh", b"#!/bin/sh\n", executable=True),
        ]
    ),
    _tarfile_bytes([("t/x", "file", b"x" * 600), ("t/d", "dir", b"")], tarfile.USTAR_FORMAT),
]


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.sampled_from(range(len(_SEED_TARS))),
    flips=st.lists(st.tuples(st.integers(0, 4095), st.integers(0, 255)), min_size=1, max_size=6),
    cut=st.one_of(st.none(), st.integers(0, 4096)),
)
def test_property_corrupted_archives_are_declined_or_agree(
    tmp_path_factory, monkeypatch, seed, flips, cut
):
    """Hostile bytes: any header byte changed, any length cut. The C path either declines
    (nothing written) or writes exactly the Python extractor's tree; it never crashes."""
    raw = bytearray(_SEED_TARS[seed])
    for at, value in flips:
        raw[at % len(raw)] = value
    data = bytes(raw[:cut] if cut is not None else raw)
    base = tmp_path_factory.mktemp("mut")
    try:
        done = _call(data, base / "fast", strip="t")
    except OSError:  # a clash found while writing: the caller empties and falls back
        done = None
        archive_extract.empty_folder(os.fspath(base / "fast"))
    if done is None:
        assert list((base / "fast").iterdir()) == []
        return
    (base / "slow").mkdir()
    try:
        _python_extract(monkeypatch, data, base / "slow", strip="t")
    except BadRecordError as e:
        raise AssertionError(f"C wrote a tree that Python refuses: {e}") from None
    assert _snapshot(base / "fast") == _snapshot(base / "slow")
    gz = archive_write.gzip_fast(data)
    (base / "gz").mkdir()
    assert (
        _native().extract_gz(gz, os.fspath(base / "gz"), "t", archive_extract.native_limits(LIMITS))
        == done
    )


def test_a_tree_deeper_than_the_c_path_takes_is_written_by_python(tmp_path):
    """1,200 levels: C declines past 128; the Python extractor makes the folders in a
    loop (it recursed once, and such a row ended in a RecursionError)."""
    import subprocess

    name = "/".join(["a"] * 1200) + "/f"
    raw = archive_write.tar_bytes([archive_write.bytes_entry(name, b"deep")])
    assert _call(raw, tmp_path / "c") is None
    try:
        archive_extract.extract_tar(raw, tmp_path / "p", where="t")
        assert (tmp_path / "p" / name).read_bytes() == b"deep"
    finally:  # shutil.rmtree (and so pytest's own cleanup) recurses: rm -rf does not
        subprocess.run(["rm", "-rf", str(tmp_path / "p")], check=True)


# --- copy_tree: the local environment's world copy ----------------------------------------


def _full_snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under root (and root): mode, owner, mtime, size and bytes."""
    out = {}
    for p in [root, *sorted(root.rglob("*"))]:
        st_ = os.lstat(p)
        data = p.read_bytes() if stat.S_ISREG(st_.st_mode) else None
        out[str(p.relative_to(root))] = (st_.st_mode, st_.st_uid, st_.st_mtime_ns, data)
    return out


def _random_world(root: Path, rng) -> None:
    folders = [root]
    for _ in range(rng.randint(0, 40)):
        p = rng.choice(folders) / f"e{rng.randint(0, 25)}"
        if p.exists():
            continue
        if rng.random() < 0.3:
            p.mkdir()
            folders.append(p)
            os.chmod(p, rng.choice([0o755, 0o700, 0o775]))
        else:
            size = rng.randint(0, 300_000) if rng.random() < 0.1 else rng.randint(0, 500)
            p.write_bytes(rng.randbytes(size))
            os.chmod(p, rng.choice([0o644, 0o755, 0o600, 0o444]))
        os.utime(p, ns=(rng.randint(1, 2**40) * 1000, rng.randint(1, 2**40) * 1000))


def _merge_target(d: Path) -> None:
    """What a world copy merges into: a folder and a file already there."""
    d.mkdir()
    (d / "pre").mkdir()
    (d / "pre" / "keep.txt").write_text("k")
    (d / "e1").write_text("a longer file the copy overwrites")
    for p in (d / "pre" / "keep.txt", d / "e1", d / "pre"):
        os.utime(p, ns=(10**18, 10**18))


def test_copy_tree_merges_as_copytree_does(tmp_path):
    import random
    import shutil

    rng = random.Random(7)
    for i in range(60):
        base = tmp_path / str(i)
        src, a, b = base / "src", base / "a", base / "b"
        src.mkdir(parents=True)
        _random_world(src, rng)
        _merge_target(a)
        _merge_target(b)
        try:
            shutil.copytree(src, a, symlinks=True, dirs_exist_ok=True)
        except shutil.Error:  # a folder where the target has a file: both refuse
            with pytest.raises(OSError):
                _native().copy_tree(str(src), str(b), -1)
            continue
        n = _native().copy_tree(str(src), str(b), -1)
        assert n == sum(1 for p in src.rglob("*") if p.is_file())
        assert _full_snapshot(a) == _full_snapshot(b), i


def test_copy_tree_owns_everything_it_copies_to_the_uid(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "a" / "b").mkdir(parents=True)
    (src / "a" / "b" / "f.txt").write_text("x")
    dst.mkdir()
    assert _native().copy_tree(str(src), str(dst), 4242) == 1
    assert {os.lstat(p).st_uid for p in [dst, *dst.rglob("*")]} == {4242}


@pytest.mark.parametrize("odd", ["link", "fifo", "deep"])
def test_copy_tree_declines_what_is_not_plain(tmp_path, odd):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    if odd == "link":
        os.symlink("/etc/passwd", src / "passwd")
    elif odd == "fifo":
        os.mkfifo(src / "pipe")
    else:
        deep = src
        for _ in range(130):
            deep = deep / "d"
        os.makedirs(deep)
    assert _native().copy_tree(str(src), str(dst), -1) is None
    if odd == "deep":
        os.system(f"rm -rf {tmp_path}/src {tmp_path}/dst")  # rmtree recurses on deep trees


def test_copy_tree_never_follows_a_link_in_the_destination(tmp_path):
    src, dst, outside = tmp_path / "src", tmp_path / "dst", tmp_path / "outside"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "f.txt").write_text("into the link?")
    (src / "g.txt").write_text("over the link?")
    outside.mkdir()
    (outside / "g.txt").write_text("host file")
    dst.mkdir()
    os.symlink(outside, dst / "sub")
    with pytest.raises(OSError):
        _native().copy_tree(str(src), str(dst), -1)
    (dst / "sub").unlink()
    os.symlink(outside / "g.txt", dst / "g.txt")
    with pytest.raises(OSError):
        _native().copy_tree(str(src), str(dst), -1)
    assert sorted(p.name for p in outside.iterdir()) == ["g.txt"]
    assert (outside / "g.txt").read_text() == "host file"
    os.symlink(outside, tmp_path / "via")
    with pytest.raises(OSError):  # the destination itself a link
        _native().copy_tree(str(src), str(tmp_path / "via"), -1)
    assert sorted(p.name for p in outside.iterdir()) == ["g.txt"]


def test_copy_tree_a_file_where_a_folder_goes_raises(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "sub").mkdir(parents=True)
    dst.mkdir()
    (dst / "sub").write_text("a file")
    with pytest.raises(OSError):
        _native().copy_tree(str(src), str(dst), -1)

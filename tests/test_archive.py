"""apexrl.artifacts.archive_extract: hostile archives (link chains, bombs, concurrent writers)
and a property test over random trees with links of every kind."""

from __future__ import annotations

import gzip
import io
import multiprocessing
import os
import tarfile
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apexrl.artifacts import archive_extract, archive_write
from apexrl.errors import BadRecordError
from apexrl.tasks.unpack import unpack_row


def _tar(members: list[tuple[str, str, str | bytes]], *, gz: bool = True) -> bytes:
    """members: (name, kind, data-or-linkname) with kind file|dir|sym|hard."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w:", format=tarfile.PAX_FORMAT) as t:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = payload if isinstance(payload, bytes) else payload.encode()
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE}[
                kind
            ]
            info.linkname = payload if isinstance(payload, str) else ""
            t.addfile(info)
    return buf.getvalue()


def _chain_members(depth: int, host_dir: Path) -> list[tuple[str, str, str | bytes]]:
    """The issue's escape: each link climbs one lexically harmless hop at a time."""
    m: list[tuple[str, str, str | bytes]] = [
        ("instruction.md", "file", "hi"),
        ("p/q", "dir", ""),
        ("p/q/A", "sym", "../.."),  # -> the task root: harmless as text
        ("U0", "sym", "p/q/A/.."),  # -> the task's parent, yet no '..' leaves lexically
    ]
    for i in range(1, depth):
        m.append((f"U{i}", "sym", f"U{i - 1}/.."))
    top = f"U{depth - 1}"
    rel_host = str(host_dir).lstrip("/")
    m.append((f"{top}/{rel_host}/evil.txt", "file", "written outside"))
    m.append(("stolen", "hard", f"{top}/{rel_host}/secret.txt"))
    return m


def test_symlink_chain_escape_from_the_issue_is_refused(tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret.txt").write_text("host secret")
    out = tmp_path / "a" / "b" / "c" / "d" / "out"
    out.mkdir(parents=True)
    depth = len(out.parts) + 2
    blob = _tar(_chain_members(depth, host))
    with pytest.raises(BadRecordError) as err:
        unpack_row("task-1", blob, out, "shard.parquet#3")
    msg = str(err.value)
    assert "shard.parquet#3" in msg and "member" in msg
    assert not (host / "evil.txt").exists()
    assert os.stat(host / "secret.txt").st_nlink == 1
    assert not (out / "task-1").exists()
    assert [p.name for p in out.iterdir()] == []  # no temp folder left behind


def test_chain_links_alone_are_refused_after_resolution(tmp_path):
    """No member goes through a link; the links themselves resolve outside: refused
    because the final resolved path of each link is checked on the real filesystem."""
    blob = _tar(
        [
            ("p/q", "dir", ""),
            ("p/q/A", "sym", "../.."),
            ("U0", "sym", "p/q/A/.."),
            ("f", "file", ""),
        ]
    )
    with pytest.raises(BadRecordError, match="'U0'.*leaves the tree"):
        unpack_row("task-1", blob, tmp_path, "row 0")


def test_writing_through_an_in_tree_link_is_refused(tmp_path):
    blob = _tar([("sub", "dir", ""), ("l", "sym", "sub"), ("l/x.txt", "file", "x")])
    with pytest.raises(BadRecordError, match="'l/x.txt'.*goes through a link"):
        unpack_row("task-1", blob, tmp_path, "row 0")


def test_in_tree_links_kept_and_none_policy_refuses_them(tmp_path):
    blob = _tar(
        [("a.txt", "file", "A"), ("b.txt", "sym", "a.txt"), ("c.txt", "hard", "a.txt")], gz=False
    )
    res = archive_extract.extract_tar(blob, tmp_path / "in", where="t", links="in_tree")
    assert (tmp_path / "in" / "b.txt").read_text() == "A" and res.n_links == 2
    with pytest.raises(BadRecordError, match="links are not allowed"):
        archive_extract.extract_tar(blob, tmp_path / "none", where="t")
    res = archive_extract.extract_tar(blob, tmp_path / "skip", where="t", skip_refused=True)
    assert sorted(r.name for r in res.refused) == ["b.txt", "c.txt"]
    assert sorted(p.name for p in (tmp_path / "skip").iterdir()) == ["a.txt"]


def test_gzip_bomb_stops_early_and_names_the_row(tmp_path):
    comp = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = b"\0" * (1 << 20)
    blob = b"".join(comp.compress(zeros) for _ in range(300)) + comp.flush()  # 300 MiB
    assert len(blob) < 400_000
    with pytest.raises(BadRecordError) as err:
        unpack_row("task-1", blob, tmp_path, "data/x.parquet#12")
    assert "data/x.parquet#12" in str(err.value) and "ratio" in str(err.value)
    lim = archive_extract.Limits(max_total_bytes=10 << 20, max_ratio=10**9)
    with pytest.raises(BadRecordError, match="expands to more than"):
        archive_extract.gunzip(blob, "row 1", lim)


def test_member_and_total_limits_name_the_member(tmp_path):
    raw = _tar([("a", "file", b"x" * 5000), ("b", "file", b"y" * 5000)], gz=False)
    with pytest.raises(BadRecordError, match="row 2 member 'a'.*5000-byte|exceeds the 4096"):
        archive_extract.extract_tar(
            raw, tmp_path / "x", where="row 2", limits=archive_extract.Limits(4096)
        )
    with pytest.raises(BadRecordError, match="row 2: refused: expands to more than 8000"):
        archive_extract.extract_tar(
            raw, tmp_path / "y", where="row 2", limits=archive_extract.Limits(max_total_bytes=8000)
        )


def test_limits_from_environment(monkeypatch):
    monkeypatch.setenv("APEXRL_ARCHIVE_MAX_TOTAL_BYTES", "1e6")
    assert archive_extract.Limits.from_env().max_total_bytes == 1_000_000


def _unpack_many(args: tuple[list[tuple[str, bytes]], str]) -> int:
    rows, out = args
    for path, blob in rows:
        unpack_row(path, blob, Path(out), path)
    return 0


def test_concurrent_unpacks_into_one_dir_leave_complete_tasks(tmp_path):
    """Two writers of one folder: the dataset-level lock serialises them, and unique temp
    names mean one can never swap a half-written tree into place for the other."""
    from apexrl.tasks.dataset import PackedTask, write_dataset
    from apexrl.tasks.pack import packed_task
    from apexrl.tasks.unpack import unpack_dataset

    src = tmp_path / "src"
    for i in range(6):
        d = src / f"task-{i}"
        (d / "tests").mkdir(parents=True)
        (d / "task.toml").write_text(f'[metadata]\ntask_id = "t{i}"\n')
        for j in range(40):
            (d / "tests" / f"f{j}.txt").write_bytes(os.urandom(2000))
    tasks: list[PackedTask] = [packed_task(d) for d in sorted(src.iterdir())]
    write_dataset(tasks, tmp_path / "ds")
    out = tmp_path / "out"
    ctx = multiprocessing.get_context("forkserver")
    procs = [
        ctx.Process(target=unpack_dataset, args=(tmp_path / "ds", out), kwargs={"strict": True})
        for _ in range(3)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    for d in sorted(src.iterdir()):
        got = {p.relative_to(out / d.name): p.read_bytes() for p in (out / d.name).rglob("*.txt")}
        want = {p.relative_to(d): p.read_bytes() for p in d.rglob("*.txt")}
        assert got == want
    rerun = unpack_dataset(tmp_path / "ds", out, strict=True)
    assert {r.status for r in rerun} == {"unchanged"}
    assert not [p for p in out.iterdir() if p.name.startswith(".task-")]


def test_writer_is_deterministic_and_readable_by_tar(tmp_path):
    long = "d/" + "x" * 150 + "/é.txt"
    entries = [
        archive_write.Entry("d", "dir", 0o755),
        archive_write.bytes_entry(long, b"long name"),
        archive_write.bytes_entry("d/run.sh", b"#!/bin/sh\n", executable=True),
        archive_write.Entry("d/link", "symlink", linkname="run.sh"),
    ]
    raw = archive_write.tar_bytes(entries, mtime=946684800)
    assert raw == archive_write.tar_bytes(entries, mtime=946684800)
    gz = archive_write.gzip_bytes(raw)
    assert gz == archive_write.gzip_bytes(raw) and zlib.decompress(gz, 31) == raw
    with tarfile.open(fileobj=io.BytesIO(raw)) as t:
        names = {m.name: m for m in t.getmembers()}
    assert names[long].size == 9 and names["d/link"].linkname == "run.sh"
    assert names["d/run.sh"].mode == 0o755 and names["d/run.sh"].mtime == 946684800
    res = archive_extract.extract_tar(raw, tmp_path / "x", where="t", links="in_tree")
    assert (tmp_path / "x" / long).read_bytes() == b"long name" and res.n_files == 2


# --- property test: random trees with links of every kind ------------------------------------

_seg = st.sampled_from(["a", "b", "l", "m", "..", "."])
_rel = st.lists(_seg, min_size=1, max_size=4).map("/".join)
_target = st.one_of(
    _rel,
    st.sampled_from(["/", "/etc/passwd", "OUTSIDE", "../OUTSIDE/secret.txt", "", "a/../.."]),
    st.lists(st.sampled_from([".."]), min_size=1, max_size=6).map(
        lambda ups: "/".join(ups) + "/OUTSIDE/secret.txt"
    ),
)
_member = st.tuples(
    _rel.filter(lambda s: s.strip("./")),
    st.sampled_from(["file", "dir", "sym", "hard"]),
    _target,
)


def _snapshot(root: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        if p.is_symlink():
            out[str(p.relative_to(root))] = "->" + os.readlink(p)
        elif p.is_file():
            out[str(p.relative_to(root))] = p.read_bytes()
        else:
            out[str(p.relative_to(root))] = "dir"
    return out


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    members=st.lists(_member, min_size=1, max_size=10), policy=st.sampled_from(["none", "in_tree"])
)
def test_property_nothing_escapes(tmp_path_factory, members, policy):
    base = tmp_path_factory.mktemp("fuzz")
    outside = base / "OUTSIDE"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    dest = base / "dest"
    dest.mkdir()
    before = _snapshot(outside)
    tar_members = []
    for name, kind, target in members:
        payload = f"data of {name}" if kind == "file" else target
        tar_members.append((name, kind, payload))
    raw = _tar(tar_members, gz=False)
    try:
        res = archive_extract.extract_tar(raw, dest, where="fuzz", links=policy)  # type: ignore[arg-type]
        ok = True
    except BadRecordError:
        ok = False
        res = None
    assert _snapshot(outside) == before
    assert os.stat(outside / "secret.txt").st_nlink == 1
    assert sorted(p.name for p in base.iterdir()) == ["OUTSIDE", "dest"]
    if ok:
        assert res is not None
        real = os.path.realpath(dest)
        for p in dest.rglob("*"):
            assert p.is_symlink() or p.is_file() or p.is_dir()
            if p.is_symlink():
                assert policy == "in_tree"
                r = os.path.realpath(p)
                assert r == real or r.startswith(real + os.sep), (p, os.readlink(p))
            elif p.is_file():
                assert os.stat(p).st_ino != os.stat(outside / "secret.txt").st_ino


def _descendants(pid: int) -> set[int]:
    kids: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(p.name))
    out, todo = set(), [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            if k not in out:
                out.add(k)
                todo.append(k)
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_pool_workers_die_with_their_parent():
    """Issue 16: after kill -9 of pack/unpack, worker processes lived on and kept writing."""
    import signal
    import subprocess
    import sys
    import time

    code = (
        "import time\n"
        "from apexrl.tasks.parallel import ordered_map\n"
        "print('go', flush=True)\n"
        "list(ordered_map(time.sleep, [60] * 100, workers=2, n_items=100))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"go"
        deadline = time.monotonic() + 60
        kids: set[int] = set()
        while time.monotonic() < deadline and len(kids) < 3:  # forkserver + 2 workers
            time.sleep(0.2)
            kids = _descendants(proc.pid)
        assert len(kids) >= 3, kids
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(k) for k in kids):
            time.sleep(0.2)
        assert not [k for k in kids if _alive(k)]
    finally:
        if proc.poll() is None:
            proc.kill()


_FORMAT_MEMBERS: list[tuple[str, str, str | bytes]] = [
    ("a", "dir", ""),
    ("a/empty.txt", "file", b""),
    ("a/block.bin", "file", bytes(range(256)) * 2),  # exactly one 512-byte block
    ("a/" + "long-name-" * 12 + ".md", "file", "a name past 100 bytes"),
    ("a/" + "d" * 60 + "/" + "e" * 60 + "/f.txt", "file", "prefix + name split"),
    ("a/café ünïcode.txt", "file", "non-ascii"),
    ("a/link", "sym", "block.bin"),
    ("a/hard", "hard", "a/block.bin"),
    ("a/exec.sh", "file", "#!/bin/sh\n"),
]


def _tar_in_format(fmt: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:", format=fmt) as t:
        for name, kind, payload in _FORMAT_MEMBERS:
            info = tarfile.TarInfo(name)
            info.mode = 0o755 if name.endswith(".sh") else 0o644
            if kind == "file":
                data = payload if isinstance(payload, bytes) else payload.encode()
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE}[
                kind
            ]
            info.linkname = payload if isinstance(payload, str) else ""
            t.addfile(info)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("fmt", "lean"),
    [(tarfile.PAX_FORMAT, True), (tarfile.USTAR_FORMAT, True), (tarfile.GNU_FORMAT, False)],
)
def test_lean_tar_parser_agrees_with_tarfile(fmt, lean):
    """The lean parser reads what tarfile reads, member for member; GNU long-name
    records (and anything else it does not know) go to tarfile instead."""
    if fmt == tarfile.USTAR_FORMAT:  # ustar cannot hold the long or non-ASCII names
        members = [m for m in _FORMAT_MEMBERS if len(m[0]) < 100 and m[0].isascii()]
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:", format=fmt) as t:
            for name, kind, payload in members:
                info = tarfile.TarInfo(name)
                if kind == "file":
                    data = payload if isinstance(payload, bytes) else payload.encode()
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
                else:
                    info.type = {"dir": b"5", "sym": b"2", "hard": b"1"}[kind]
                    info.linkname = payload if isinstance(payload, str) else ""
                    t.addfile(info)
        raw = buf.getvalue()
    else:
        raw = _tar_in_format(fmt)
    fast = archive_extract._lean_tar_members(raw)
    assert (fast is not None) == (lean is not False)
    if fast is not None:
        assert fast == archive_extract._tarfile_members(raw, "x")
    members, bad = archive_extract.tar_members(raw, "x")
    assert not bad and {m.name for m in members} >= {"a/link", "a/hard", "a/exec.sh"}


def test_lean_tar_parser_reads_our_writer_and_gnu_tar(tmp_path):
    import subprocess

    entries = [
        archive_write.Entry("t", "dir"),
        archive_write.bytes_entry("t/" + "x" * 150, b"long"),
        archive_write.bytes_entry("t/run.sh", b"#!/bin/sh\n", executable=True),
        archive_write.Entry("t/l", "symlink", linkname="run.sh"),
    ]
    raw = archive_write.tar_bytes(entries)
    fast = archive_extract._lean_tar_members(raw)
    assert fast is not None and fast == archive_extract._tarfile_members(raw, "x")
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "f.txt").write_text("gnu")
    (src / "d" / "g.bin").write_bytes(os.urandom(3000))
    subprocess.run(["tar", "cf", str(tmp_path / "g.tar"), "-C", str(src), "."], check=True)
    raw = (tmp_path / "g.tar").read_bytes()
    fast = archive_extract._lean_tar_members(raw)
    assert fast is not None and fast == archive_extract._tarfile_members(raw, "x")


def test_lean_tar_parser_checks_every_header():
    """A corrupt header (bad checksum, non-octal size, truncated data) is never read
    by the lean parser: tarfile then decides, and a broken tar is refused by name."""
    raw = bytearray(archive_write.tar_bytes([archive_write.bytes_entry("f.txt", b"x" * 1000)]))
    bad_sum = bytearray(raw)
    bad_sum[0] ^= 1  # name changed, checksum not
    assert archive_extract._lean_tar_members(bytes(bad_sum)) is None
    bad_size = bytearray(raw)
    bad_size[124:136] = b"00000000x00\0"
    assert archive_extract._lean_tar_members(bytes(bad_size)) is None
    with pytest.raises(BadRecordError, match="row 9"):
        archive_extract.tar_members(bytes(bad_sum), "row 9")
    assert archive_extract._lean_tar_members(bytes(raw[:700])) is None


def _rechecksum(header: bytearray) -> None:
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header[:512])


def test_lean_tar_parser_header_spellings_and_checksum_halves():
    """Headers in the usual spelling take the one-match path, others the field-by-field
    one, with the same members; a change anywhere in the 512 bytes (either half of the
    checksum sum, or the checksum field) sends the archive to tarfile."""
    raw = archive_write.tar_bytes(
        [
            archive_write.bytes_entry("d/f.txt", b"x" * 1000),
            archive_write.bytes_entry("d/g.sh", b"#!", executable=True),
        ]
    )
    want = archive_extract._lean_tar_members(raw)
    assert want is not None and want == archive_extract._tarfile_members(raw, "x")
    other = bytearray(raw)
    other[124:136] = b"1750\0\0\0\0\0\0\0\0"  # size 1000 spelled short, NUL-terminated
    other[100:108] = b"    644\0"  # mode with leading spaces
    _rechecksum(other)
    assert archive_extract._FAST_HEADER.match(bytes(other), 0) is None
    assert archive_extract._lean_tar_members(bytes(other)) == want
    for at in (5, 200, 300, 511, 150, 154):
        bad = bytearray(raw)
        bad[at] = (bad[at] + 1) % 256 if at != 154 else ord("7")
        assert archive_extract._lean_tar_members(bytes(bad)) is None, at


def test_gunzip_members_padding_and_corruption():
    big = os.urandom(300_000) + b"\0" * 3_000_000  # output far past the first step
    one = gzip.compress(big)
    assert archive_extract.gunzip(one, "r") == big
    multi = gzip.compress(b"ab") + gzip.compress(big) + b"\0" * 16
    assert archive_extract.gunzip(multi, "r") == b"ab" + big
    with pytest.raises(BadRecordError, match="truncated"):
        archive_extract.gunzip(one[:-100], "row 4")
    bad_crc = bytearray(one)
    bad_crc[-6] ^= 1
    with pytest.raises(BadRecordError, match="row 5.*not a valid gzip"):
        archive_extract.gunzip(bytes(bad_crc), "row 5")
    with pytest.raises(BadRecordError, match="not a valid gzip"):
        archive_extract.gunzip(b"PK\3\4" * 8, "row 6")


def test_stamp_log_resume_crash_and_older_stamps(tmp_path):
    """Stamps are one append-only log: a rerun recognises finished tasks; a dir apexrl
    was moving when it was killed ("- path" last) is replaced, not trusted or refused;
    a stale "-" never claims a folder made later; per-task stamp files from older
    versions are still recognised, then folded into the log."""
    from apexrl.tasks.dataset import PackedTask, write_dataset
    from apexrl.tasks.pack import packed_task
    from apexrl.tasks.unpack import STAMP_LOG, load_stamps, unpack_dataset

    src = tmp_path / "src"
    for i in range(3):
        (src / f"t-{i}").mkdir(parents=True)
        (src / f"t-{i}" / "task.toml").write_text(f'[metadata]\ntask_id = "t{i}"\n')
    tasks: list[PackedTask] = [packed_task(d) for d in sorted(src.iterdir())]
    write_dataset(tasks, tmp_path / "ds")
    out = tmp_path / "out"
    for strict in (True, False):
        first = unpack_dataset(tmp_path / "ds", out, strict=strict)
        assert {r.status for r in first} == ({"written"} if strict else {"unchanged"})
    meta = out / ".apexrl"
    assert sorted(p.name for p in meta.iterdir()) == ["lock", STAMP_LOG]
    shas = load_stamps(out)
    assert set(shas) == {"t-0", "t-1", "t-2"} and all(len(v) == 64 for v in shas.values())

    # killed while moving t-1 into place: its dir is apexrl's, but not known whole
    with open(meta / STAMP_LOG, "a") as fh:
        fh.write("- t-1\n- gone\n")
    (out / "t-1" / "task.toml").write_text("half")
    for strict in (True, False):
        again = {r.path: r.status for r in unpack_dataset(tmp_path / "ds", out, strict=strict)}
        assert again == {"t-0": "unchanged", "t-1": "written" if strict else "unchanged"} | {
            "t-2": "unchanged"
        }
    assert (out / "t-1" / "task.toml").read_text() == (src / "t-1" / "task.toml").read_text()
    assert "gone" not in load_stamps(out)  # the stale "-" was dropped ...
    (out / "gone").mkdir()  # ... so a folder made there later is not apexrl's
    assert load_stamps(out).get("gone") is None

    # an output folder written by an older version: one <path>.sha256 file per task
    (meta / STAMP_LOG).unlink()
    for path, sha in shas.items():
        (meta / f"{path}.sha256").write_text(sha + "\n")
    rerun = unpack_dataset(tmp_path / "ds", out, strict=True)
    assert {r.status for r in rerun} == {"unchanged"}
    assert sorted(p.name for p in meta.iterdir()) == ["lock", STAMP_LOG]
    assert load_stamps(out) == shas

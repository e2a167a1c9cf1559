"""Safe extraction and deterministic packing, with property tests over names and paths."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apexrl.errors import BadRecordError
from apexrl.tasks.pack import pack_task_dir
from apexrl.tasks.unpack import check_task_path, unpack_row


def tar_with(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return buf.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


@pytest.mark.parametrize(
    ("info", "data", "message"),
    [
        (member("/etc/evil"), b"x", "absolute path"),
        (member("../outside"), b"x", "'..'"),
        (member("a/../../outside"), b"x", "'..'"),
        (member("link", tarfile.SYMTYPE, "/etc/passwd"), None, "leaves the tree"),
        (member("sub/link", tarfile.SYMTYPE, "../../x"), None, "leaves the tree"),
        (member("hard", tarfile.LNKTYPE, "../x"), None, "leaves the tree"),
        (member("dev", tarfile.CHRTYPE), None, "device"),
        (member("fifo", tarfile.FIFOTYPE), None, "device or fifo"),
    ],
)
def test_unsafe_members_refused_with_row_and_member(tmp_path, info, data, message):
    blob = tar_with((member("ok.txt"), b"fine"), (info, data))
    with pytest.raises(BadRecordError) as err:
        unpack_row("task-1", blob, tmp_path, "shard.parquet#7")
    assert "shard.parquet#7" in str(err.value)
    assert repr(info.name) in str(err.value)
    assert message in str(err.value)
    assert not (tmp_path / "task-1").exists()
    assert not any(p.name.endswith("unpack-tmp") for p in tmp_path.iterdir())


def test_oversized_member_refused(tmp_path):
    blob = tar_with((member("big.bin"), b"x" * 2048))
    with pytest.raises(BadRecordError, match="exceeds the 1024-byte limit"):
        unpack_row("task-1", blob, tmp_path, "row 0", max_member=1024)


def test_corrupt_binary_named(tmp_path):
    with pytest.raises(BadRecordError, match="row 3: not a valid gzip stream"):
        unpack_row("task-1", b"not a tar", tmp_path, "row 3")


@given(st.text(min_size=1, max_size=40))
def test_task_path_is_one_safe_segment(name):
    try:
        checked = check_task_path(name, "row")
    except BadRecordError:
        return
    assert "/" not in checked and "\\" not in checked and ".." not in checked
    assert Path(checked).name == checked and not Path(checked).is_absolute()


_name = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x24F, blacklist_characters="/\\\x00"),
    min_size=1,
    max_size=20,
).filter(lambda s: s not in {".", ".."})
_tree = st.dictionaries(
    st.lists(_name, min_size=1, max_size=3).map(tuple),
    st.tuples(st.binary(max_size=200), st.booleans()),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tree=_tree)
def test_unpack_of_pack_reproduces_tree(tmp_path_factory, tree):
    root = tmp_path_factory.mktemp("src") / "task-x"
    root.mkdir()
    written = {}
    for parts, (data, executable) in tree.items():
        target = root.joinpath(*parts)
        if (
            any(root.joinpath(*parts[:i]).is_file() for i in range(1, len(parts)))
            or target.is_dir()
        ):
            continue  # a prefix is already a file (or this is a dir): skip the clash
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o755 if executable else 0o644)
        written[target.relative_to(root)] = (data, executable)
    blob, sha = pack_task_dir(root)
    again, sha2 = pack_task_dir(root)
    assert blob == again and sha == sha2
    out = tmp_path_factory.mktemp("out")
    unpack_row("task-x", blob, out, "row 0")
    got = {
        p.relative_to(out / "task-x"): (p.read_bytes(), bool(p.stat().st_mode & 0o100))
        for p in (out / "task-x").rglob("*")
        if p.is_file()
    }
    assert got == written


def test_unpack_safe_id_is_the_models_one():
    """unpack compiles its own copy (its workers start without pydantic): same rule."""
    from apexrl.artifacts import models
    from apexrl.tasks import unpack

    assert unpack.SAFE_ID.pattern == models.SAFE_ID.pattern
    code = "import sys, apexrl.tasks.unpack; print('pydantic' in sys.modules)"
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

"""Snapshots of world state (a tar of `filesystem/` and `.apps_data/`) and diffs.

A snapshot before and after a run feeds diff-based grading: `diff` lists the files
created, modified and deleted. Either side may be a snapshot tar or a live world
folder. Tars are written deterministically (sorted, uid/gid 0, no owner names) and
atomically.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tarfile
from pathlib import Path

from apexrl.artifacts.archive_write import Entry, PipelinedGzip, write_tar
from apexrl.artifacts.atomic import atomic_path
from apexrl.artifacts.nofollow import open_nofollow
from apexrl.errors import BadRecordError, UsageError
from apexrl.worlds.models import FileChange, SnapshotFile, SnapshotRecord, WorldDiff
from apexrl.worlds.store import APPS_DIR, FS_DIR, TOPS, changed_paths
from apexrl.worlds.world import World

_CHUNK = 1 << 20


def _sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with open_nofollow(p) as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _walk(root: Path) -> list[tuple[str, Path]]:
    """(archive name, path) of every file and folder under the world's top folders, sorted."""
    out: list[tuple[str, Path]] = []
    for top in TOPS:
        base = root / top
        if not base.is_dir():
            continue
        out.append((top, base))
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for name in sorted(dirnames + filenames):
                p = Path(dirpath) / name
                out.append((p.relative_to(root).as_posix(), p))
    out.sort(key=lambda t: t[0])
    return out


def manifest_of_dir(root: Path) -> dict[str, SnapshotFile]:
    files: dict[str, SnapshotFile] = {}
    for name, p in _walk(root):
        if p.is_symlink() or not p.is_file():
            continue
        try:
            files[name] = SnapshotFile(path=name, size=p.stat().st_size, sha256=_sha256_file(p))
        except OSError:  # replaced by a link or removed since the walk
            continue
    return files


def manifest_of_tar(tar_path: Path) -> dict[str, SnapshotFile]:
    files: dict[str, SnapshotFile] = {}
    try:
        with tarfile.open(tar_path) as tf:
            for m in tf:
                if not m.isfile():
                    continue
                h = hashlib.sha256()
                f = tf.extractfile(m)
                assert f is not None
                while chunk := f.read(_CHUNK):
                    h.update(chunk)
                name = m.name.removeprefix("./")
                files[name] = SnapshotFile(path=name, size=m.size, sha256=h.hexdigest())
    except (tarfile.TarError, OSError) as e:
        raise BadRecordError(str(tar_path), f"not a readable snapshot tar: {e}") from e
    return files


def state_digest(files: dict[str, SnapshotFile]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(f"{name}\0{files[name].sha256}\n".encode())
    return "sha256:" + h.hexdigest()


def snapshot(world: World | Path, out: Path) -> SnapshotRecord:
    """Write a tar (gzip when `out` ends in .gz/.tgz) of the world's state."""
    root = world.root if isinstance(world, World) else Path(world)
    wid = world.world_id if isinstance(world, World) else root.name
    if not any((root / t).is_dir() for t in TOPS):
        raise UsageError(f"{root} is not a world folder (no {FS_DIR}/ or {APPS_DIR}/)")
    out = Path(out)
    gz = out.name.endswith((".gz", ".tgz"))
    files: dict[str, SnapshotFile] = {}
    entries = []
    for name, p in _walk(root):
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            entries.append(Entry(name, "symlink", linkname=os.readlink(p)))
        elif stat.S_ISDIR(st.st_mode):
            entries.append(Entry(name, "dir", 0o755))
        elif stat.S_ISREG(st.st_mode):
            mode = 0o755 if st.st_mode & 0o111 else 0o644
            entries.append(Entry(name, "file", mode, st.st_size, _hashing_opener(p, name, files)))
    with atomic_path(out) as tmp, open(tmp, "wb") as fh:
        sink = PipelinedGzip(fh) if gz else fh
        write_tar(sink.write, entries)
        if gz:
            sink.close()
    return SnapshotRecord(
        world_id=wid,
        tar_path=str(Path(out).absolute()),
        n_files=len(files),
        size_bytes=sum(f.size for f in files.values()),
        sha256=state_digest(files),
        files=list(files.values()),
    )


def _hashing_opener(p: Path, name: str, files: dict[str, SnapshotFile]):
    """Open `p` without following a link; record its size and sha256 once read."""

    def opener():
        fh = open_nofollow(p)
        h = hashlib.sha256()
        n = [0]
        read = fh.read

        class _Reader:
            def read(self, k: int = -1) -> bytes:
                b = read(k)
                h.update(b)
                n[0] += len(b)
                return b

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                fh.close()
                files[name] = SnapshotFile(path=name, size=n[0], sha256=h.hexdigest())

        return _Reader()

    return opener


def load_manifest(src: World | Path) -> dict[str, SnapshotFile]:
    if isinstance(src, World):
        return manifest_of_dir(src.root)
    src = Path(src)
    if src.is_dir():
        return manifest_of_dir(src)
    if src.is_file():
        return manifest_of_tar(src)
    raise UsageError(f"{src} does not exist", hint="pass a snapshot tar or a world folder")


def diff(before: World | Path, after: World | Path) -> WorldDiff:
    a, b = load_manifest(before), load_manifest(after)
    d = WorldDiff(
        before=str(getattr(before, "root", before)), after=str(getattr(after, "root", after))
    )
    changes = changed_paths(a, b, lambda name: a[name].sha256 == b[name].sha256)
    for name in changes.created:
        y = b[name]
        d.created.append(
            FileChange(path=name, change="created", size_after=y.size, sha256_after=y.sha256)
        )
    for name in changes.deleted:
        x = a[name]
        d.deleted.append(
            FileChange(path=name, change="deleted", size_before=x.size, sha256_before=x.sha256)
        )
    for name in changes.modified:
        x, y = a[name], b[name]
        d.modified.append(
            FileChange(
                path=name,
                change="modified",
                size_before=x.size,
                size_after=y.size,
                sha256_before=x.sha256,
                sha256_after=y.sha256,
            )
        )
    return d

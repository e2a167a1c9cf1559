"""Harbor's per-trial task work, done once per unchanged task folder.

Every Harbor trial loads its task (task.toml, the instruction, the containment check
of the input trees), hashes the folder for `Task.checksum` (dirhash) and hashes it
again for the trial lock (`Packager.compute_content_hash`): ~14 ms of Python a trial,
all of it holding the GIL that concurrent trials share, about a tenth of a local oracle
trial's CPU, and the same for every attempt of the same task. Here each is done once
per *state* of a task folder. The key is a fingerprint of every entry's lstat (path,
type and mode, size, mtime and ctime in ns, inode, device): an edit, a rename, a
planted link, anything that changes the folder is a miss, and Harbor's own code runs
again, its checks included. A result is kept only when the fingerprint was the same
before and after computing it. Results are Harbor's own (tests compare them).

    trial = await trial_class().create(harbor_config)   # apexrl.trial.run

Only local tasks (a `path`) are memoised; folders of more than MAX_ENTRIES entries are
not (the fingerprint walk would cost more than it saves). APEXRL_TASK_MEMO=0 turns it
off (then `trial_class()` is Harbor's Trial).
"""

from __future__ import annotations

import copy
import hashlib
import os
import stat
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_ENTRIES = 5000
MAX_TASKS = 4096  # memo entries kept (least recently used dropped)

_LOCK = threading.Lock()
_TASKS: OrderedDict[tuple, _Entry] = OrderedDict()
_HASHES: OrderedDict[str, tuple[bytes, str, list[Path]]] = OrderedDict()
_TRIAL: Any = None


def enabled() -> bool:
    return os.environ.get("APEXRL_TASK_MEMO", "1").strip().lower() not in ("0", "off", "no")


def clear() -> None:
    """Forget every memoised task and hash (the next trial of each loads it afresh)."""
    with _LOCK:
        _TASKS.clear()
        _HASHES.clear()


def fingerprint(root: Path) -> bytes | None:
    """A digest of the lstat of `root` and of every entry under it (links not followed);
    None when the folder cannot be read or has more than MAX_ENTRIES entries."""
    h = hashlib.blake2b(digest_size=20)
    n = 0
    try:
        st = os.lstat(root)
        h.update(_stat_bytes(".", st))
        stack = [str(root)]
        base = len(str(root)) + 1
        while stack:
            folder = stack.pop()
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
            for e in entries:
                n += 1
                if n > MAX_ENTRIES:
                    return None
                st = e.stat(follow_symlinks=False)
                h.update(_stat_bytes(e.path[base:], st))
                if stat.S_ISDIR(st.st_mode):
                    stack.append(e.path)
    except OSError:
        return None
    return h.digest()


def _stat_bytes(rel: str, st: os.stat_result) -> bytes:
    fields = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
    return rel.encode("utf-8", "surrogateescape") + b"\0" + repr(fields).encode() + b"\n"


def _remember(store: OrderedDict, key: Any, value: Any) -> None:
    with _LOCK:
        store[key] = value
        store.move_to_end(key)
        while len(store) > MAX_TASKS:
            store.popitem(last=False)


def _recall(store: OrderedDict, key: Any) -> Any:
    with _LOCK:
        value = store.get(key)
        if value is not None:
            store.move_to_end(key)
        return value


@dataclass
class _Entry:
    fingerprint: bytes
    task: Any  # the loaded Task (never handed out: callers get copies)
    download: Any  # Harbor's TaskDownloadResult
    checksum: str | None = None  # Task.checksum, once computed


def _task_key(config: Any) -> tuple | None:
    t = config.task
    if t.path is None or t.is_git_task() or t.is_package_task():
        return None
    return (
        str(Path(t.path).resolve()),
        tuple(str(p) for p in config.extra_instruction_paths or ()),
        tuple(config.extra_instructions or ()),
        bool(config.verifier.disable),
    )


def _hand_out(entry: _Entry) -> Any:
    """A trial's own copy of the memoised Task: its config and lists are its own."""
    task = copy.copy(entry.task)
    task.config = entry.task.config.model_copy(deep=True)
    task.extra_instruction_paths = list(entry.task.extra_instruction_paths)
    task.extra_instructions = list(entry.task.extra_instructions)
    task._memo_entry = entry
    return task


async def load_task(config: Any, harbor_load: Any) -> tuple[Any, Any]:
    """Harbor's `Trial._load_task(config)`, once per state of a local task folder."""
    key = _task_key(config)
    if key is None:
        return await harbor_load(config)
    root = Path(key[0])
    before = fingerprint(root)
    entry = _recall(_TASKS, key)
    if entry is not None and before is not None and entry.fingerprint == before:
        return _hand_out(entry), entry.download.model_copy()
    task, download = await harbor_load(config)  # raises for a bad task, as Harbor does
    if before is None or fingerprint(root) != before:
        return task, download  # changed while loading (or too big): not kept
    task.__class__ = _memo_task_class()
    entry = _Entry(before, task, download)
    _remember(_TASKS, key, entry)
    return _hand_out(entry), download.model_copy()


def content_hash(task_dir: Path, harbor_hash: Any) -> tuple[str, list[Path]]:
    """Harbor's `Packager.compute_content_hash(task_dir)`, once per folder state."""
    root = Path(task_dir).resolve()
    key = str(root)
    before = fingerprint(root)
    hit = _recall(_HASHES, key)
    if hit is not None and before is not None and hit[0] == before:
        return hit[1], list(hit[2])
    digest, files = harbor_hash(task_dir)
    if before is not None and fingerprint(root) == before:
        _remember(_HASHES, key, (before, digest, list(files)))
    return digest, files


_MEMO_TASK: Any = None


def _memo_task_class() -> Any:
    """Harbor's Task whose `checksum` is computed once per memo entry."""
    global _MEMO_TASK
    if _MEMO_TASK is None:
        from harbor.models.task.task import Task

        class MemoTask(Task):
            @property
            def checksum(self) -> str:
                entry = getattr(self, "_memo_entry", None)
                if entry is None:
                    return Task.checksum.fget(self)
                if entry.checksum is None:
                    entry.checksum = Task.checksum.fget(self)
                return entry.checksum

        _MEMO_TASK = MemoTask
    return _MEMO_TASK


def trial_class() -> Any:
    """The Trial class apexrl creates trials with: Harbor's, with the task work memoised
    (or Harbor's own with APEXRL_TASK_MEMO=0)."""
    global _TRIAL
    from harbor.trial.trial import Trial

    if not enabled():
        return Trial
    with _LOCK:
        if _TRIAL is None:
            _install_lock_hash()

            class MemoTrial(Trial):
                @staticmethod
                async def _load_task(config: Any) -> tuple[Any, Any]:
                    return await load_task(config, Trial._load_task)

            _TRIAL = MemoTrial
    return _TRIAL


def _install_lock_hash() -> None:
    """The trial lock's task digest (harbor.models.job.lock) through `content_hash`."""
    from harbor.models.job import lock
    from harbor.publisher.packager import Packager

    if getattr(lock.Packager, "_apexrl_memo", False):
        return

    class MemoPackager(Packager):
        _apexrl_memo = True

        @staticmethod
        def compute_content_hash(task_dir: Path) -> tuple[str, list[Path]]:
            if not enabled():
                return Packager.compute_content_hash(task_dir)
            return content_hash(task_dir, Packager.compute_content_hash)

    lock.Packager = MemoPackager

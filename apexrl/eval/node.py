"""One trial on a Ray node that shares nothing with the driver but Ray.

The driver (apexrl.eval.cluster) puts each task binary and each world once in Ray's
object store and hands every trial a `Shipped` reference to the ones it needs. On
the node, `run_on_node` turns those into local folders under the node's own scratch
(`node_scratch`), cached by digest, and runs the trial there:

    <scratch>/tasks/<sha256>/<task name>/      the task, unpacked by apexrl.tasks.unpack
    <scratch>/worlds/<sha256>/<world_id>/      a one-world store (apexrl.worlds.store)
    <scratch>/files/<sha256>/                  a local tokenizer's files, a template file
    <scratch>/trials/<trial id>-<random>/      the trial's folder, packed and removed

Archives are extracted by apexrl.artifacts.archive_extract (no links out, no devices, size
and ratio limits), the same path a local run takes; a blob whose bytes do not match
its digest is refused. The trial's folder comes back to the driver as a gzip tar of
its regular files (links and special files the sandbox left are not packed), capped
at LOGS_MAX_BYTES; no path of the driver is read or written here.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

SCRATCH_ENV = "APEXRL_RAY_SCRATCH"
LOGS_MAX_BYTES = 64 << 20  # a trial folder bigger than this comes back without its largest files
LOGS_SKIPPED = "logs-not-copied.txt"


@dataclass(frozen=True)
class Shipped:
    """A blob in Ray's object store. `ref` wraps the ObjectRef in a list so that Ray
    does not fetch it before the node's cache has been looked at (a node that holds
    the digest already never transfers the bytes again)."""

    kind: str  # "task" (a task_binary), "world-zip", "world-tar" (gzip tar of a world root),
    # "file" or "dir" (the driver's tokenizer or chat template: apexrl.eval.node.pack_files)
    name: str  # the task dir name or the world id
    digest: str  # sha256 hex of the blob
    size: int
    ref: list


def node_scratch() -> Path:
    """$APEXRL_RAY_SCRATCH, else <tmp>/apexrl-ray-<uid>: this node's, this user's."""
    from apexrl.envs.local.scratch import own_folder

    env = os.environ.get(SCRATCH_ENV)
    if env:
        path = Path(env)
        path.mkdir(parents=True, exist_ok=True)
        return path
    return own_folder(Path(tempfile.gettempdir()) / f"apexrl-ray-{os.geteuid()}")


def _fetch(item: Shipped) -> bytes:
    import ray

    blob = ray.get(item.ref[0])
    got = hashlib.sha256(blob).hexdigest()
    if got != item.digest:
        from apexrl.errors import BadRecordError

        where = f"{item.kind} {item.name}"
        raise BadRecordError(where, f"object store bytes hash to {got}, not {item.digest}")
    return blob


def _install(cache: Path, digest: str, build) -> Path:
    """cache/<digest>, made by `build(tmp)` in a temp folder renamed into place (a
    concurrent trial that made it first wins; an interrupted build leaves no entry)."""
    final = cache / digest
    if final.is_dir():
        return final
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{digest[:16]}-", dir=cache))
    try:
        build(tmp)
        try:
            tmp.rename(final)
        except OSError:
            if not final.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def task_dir(scratch: Path, task: Shipped) -> Path:
    """The task unpacked on this node (apexrl.tasks.unpack: the dataset's own path)."""
    from apexrl.tasks.unpack import unpack_row

    def build(tmp: Path) -> None:
        unpack_row(task.name, _fetch(task), tmp, f"task {task.name}")

    return _install(scratch / "tasks", task.digest, build) / task.name


def world_store(scratch: Path, world: Shipped) -> Path:
    """A world store holding just this world as a folder, for the local environment and
    the verifier (apexrl.worlds.store.WorldStore) to read as they read any store."""
    from apexrl.worlds.store import extract_zip_safely, find_root

    def build(tmp: Path) -> None:
        blob = _fetch(world)
        out = tmp / ".x"
        out.mkdir()
        where = f"world {world.name}"
        if world.kind == "world-zip":
            zpath = tmp / ".world.zip"
            zpath.write_bytes(blob)
            del blob
            extract_zip_safely(zpath, out)
            zpath.unlink()
        else:
            from apexrl.artifacts.archive_extract import Limits, extract_targz

            cap = 50 * 2**30  # as extract_zip_safely: worlds are bigger than tasks
            limits = Limits.from_env(max_total_bytes=cap, max_member_bytes=8 * 2**30)
            extract_targz(blob, out, where=where, links="in_tree", limits=limits, empty=True)
        find_root(out, Path(where)).rename(tmp / world.name)
        shutil.rmtree(out, ignore_errors=True)

    return _install(scratch / "worlds", world.digest, build)


# what of a local tokenizer folder (often a whole checkpoint) the agent reads
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "special_tokens_map.json",
    "generation_config.json",
)


def pack_files(path: Path) -> bytes:
    """A driver-side file, or the tokenizer files of a folder, as a gzip tar."""
    from apexrl.artifacts.archive_write import file_entry, gzip_fast, tar_bytes

    if path.is_file():
        entries = [file_entry(path.name, path)]
    else:
        entries = [file_entry(n, path / n) for n in TOKENIZER_FILES if (path / n).is_file()]
    return gzip_fast(tar_bytes(entries))


def local_files(scratch: Path, item: Shipped) -> Path:
    """A shipped file (kind "file": the path of that file) or folder ("dir") on this node."""
    from apexrl.artifacts.archive_extract import extract_targz

    def build(tmp: Path) -> None:
        where = f"{item.kind} {item.name}"
        extract_targz(_fetch(item), tmp, where=where, links="none", empty=True)

    folder = _install(scratch / "files", item.digest, build)
    return folder / item.name if item.kind == "file" else folder


def pack_logs(root: Path) -> bytes:
    """A gzip tar of the regular files under `root` (never through a link), largest
    files left out past LOGS_MAX_BYTES and named in LOGS_SKIPPED."""
    from apexrl.artifacts.archive_write import bytes_entry, file_entry, gzip_fast, tar_bytes
    from apexrl.artifacts.nofollow import regular_files

    files = []
    for p in regular_files(root):
        with contextlib.suppress(OSError):
            files.append((p.relative_to(root).as_posix(), p, os.lstat(p).st_size))
    kept, skipped, total = [], [], 0
    for rel, p, size in sorted(files, key=lambda f: f[2]):  # smallest first
        if total + size > LOGS_MAX_BYTES:
            skipped.append(f"{rel}\t{size} bytes\n")
            continue
        total += size
        kept.append((rel, p, size))
    entries = [file_entry(rel, p, size=size) for rel, p, size in sorted(kept)]
    if skipped:
        note = f"over the {LOGS_MAX_BYTES} bytes a trial folder brings back:\n" + "".join(skipped)
        entries.append(bytes_entry(LOGS_SKIPPED, note.encode()))
    return gzip_fast(tar_bytes(entries))


@dataclass
class NodeResult:
    """What a node sends back: the trial's TrialDone, its folder, where it ran."""

    done: Any  # apexrl.eval.runner.TrialDone
    logs: bytes | None
    node_id: str


def run_on_node(
    execute,
    trial_fn,
    trial,
    config,
    task: Shipped,
    world: Shipped | None,
    files: dict[str, Shipped] | None = None,
) -> NodeResult:
    """The body of a trial's Ray task: materialize, run with local paths, pack the
    folder. `execute` is apexrl.eval.runner.execute_trial (passed, not imported: the
    runner imports the cluster, which imports this module)."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    scratch = node_scratch()
    folder = scratch / "trials" / f"{trial.trial_id}-{secrets.token_hex(4)}"
    try:
        local_task = replace(trial, task=replace(trial.task, path=task_dir(scratch, task)))
        update: dict = {"logs_dir": folder}
        if world is not None:
            update["worlds_dir"] = world_store(scratch, world)
        elif config.worlds_dir is not None:  # the driver's store lacks it: an empty one here
            update["worlds_dir"] = scratch / "worlds" / "empty"
            update["worlds_dir"].mkdir(parents=True, exist_ok=True)
        for name, item in (files or {}).items():  # tokenizer, chat_template: local paths
            update[name] = str(local_files(scratch, item))
        done = execute(trial_fn, local_task, config.model_copy(update=update))
        logs = pack_logs(folder) if folder.is_dir() else None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    done.row = done.row.model_copy(update={"node_id": node_id})
    return NodeResult(done, logs, node_id)


def probe_node(endpoints: list[str], environment: str, key_names: list[str]) -> dict:
    """What preflight asks each node: its environment's check (apexrl.envs.preflight),
    which of the tasks' env keys it lacks (names only), and whether each endpoint
    answers from here."""
    import ray

    from apexrl.envs.preflight import check_environment

    found = check_environment(environment, dict(os.environ))
    problems = [(p.what, p.fix, int(p.code)) for p in found]
    unreachable = {}
    for url in endpoints:
        why = _unreachable(url)
        if why:
            unreachable[url] = why
    return {
        "node_id": ray.get_runtime_context().get_node_id(),
        "problems": problems,
        "missing_keys": sorted(k for k in key_names if not os.environ.get(k)),
        "unreachable": unreachable,
    }


def _unreachable(url: str, timeout_s: float = 10.0) -> str | None:
    """None when an HTTP server answers at `url` (any status), else why not."""
    import httpx

    try:
        httpx.get(url, timeout=timeout_s)
    except httpx.HTTPError as e:
        return f"{type(e).__name__}: {e}"
    return None

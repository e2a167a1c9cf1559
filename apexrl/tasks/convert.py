"""APEX-layout expert data -> Harbor task directories.

<out>/<slug>/
  instruction.md            the prompt
  task.toml                 Harbor TaskConfig; apexrl's TaskMetadata in [metadata]
  archipelago.json          the same metadata as the recipe's agent and generator read it
  environment/Dockerfile    placeholder: the real environment is the world's image
  environment/task_files/   the task's input files, overlaid on the world
  solution/solve.sh         oracle: writes the gold answer and gold files
  solution/gold_files/
  tests/test.sh             verifier entrypoint (never visible to the agent)
  tests/grade.py            vendored deterministic grading runner
  tests/verifiers.json      rubric criteria
  tests/golden_responses.json

With `--grader-from PATH` (apexrl.tasks.grader_from), tests/ instead runs archipelago's
own grading runner, copied from the user's checkout: tests/test.sh, grade.py, runner/
and archipelago/ (the runner's rubric, the task prompt and, when a criterion reads
files, the world's initial snapshot).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from apexrl.artifacts.models import ApexTask, ApexWorld, ImageRecord, TaskMetadata, TaskRecord
from apexrl.errors import BadRecordError
from apexrl.tasks.apex import ApexSource, input_file_names
from apexrl.tasks.envnames import refused_names
from apexrl.tasks.grader_from import GraderSource

ANSWER_FILE = "/logs/agent/answer.txt"
WORLD_FS = "/world/filesystem"
AGENT_TIMEOUT_S = 3600.0
VERIFIER_TIMEOUT_S = 600.0


@dataclass
class ConvertOutcome:
    record: TaskRecord | None = None
    error: BadRecordError | None = None


def slugify(name: str, task_id: str) -> str:
    """Directory name: the task name in [a-z0-9-] plus the last 8 chars of the id.

    Names are never used as paths verbatim, so a name like '../../etc' cannot
    escape the output directory."""
    base = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:48].strip("-")
    suffix = re.sub(r"[^a-z0-9]+", "", task_id.lower())[-8:]
    return f"{base}-{suffix}" if base else suffix or "task"


def load_images(path: Path) -> dict[str, ImageRecord]:
    """images.jsonl of `image push` (world_id, ref, digest), or - for stdin. `world pack`
    output (archives on disk, not yet pushed) is refused with what to run first."""
    from pydantic import ValidationError

    from apexrl.artifacts.jsonl import iter_json

    out: dict[str, ImageRecord] = {}
    for where, obj in iter_json(path):
        if isinstance(obj, dict) and "archive" in obj and "ref" not in obj:
            raise BadRecordError(
                where,
                "this is `world pack` output (an image archive on disk); --images wants "
                "`image push` output: world_id, ref (repository:tag) and digest per line",
                hint=f"push the archives first: apexrl image push {path} --to REGISTRY/REPO "
                "> images.jsonl, then pass --images images.jsonl",
            )
        try:
            rec = ImageRecord.model_validate(obj)
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(x) for x in err["loc"])
            raise BadRecordError(
                where,
                f"{field}: {err['msg']}",
                hint="--images wants `image push` output: world_id, ref, digest per line",
            ) from None
        out[rec.world_id] = rec
    return out


def claim_output(out: Path, src_root: Path, *, force: bool) -> None:
    """`tasks convert -o OUT`: OUT is new, empty, or a folder apexrl wrote (its marker),
    the rule of `tasks pack` and `split`; a folder it did not write is refused unless
    `force` (its other task dirs would ship with the converted ones). OUT is marked."""
    from apexrl.artifacts.atomic import MARKER, check_replaceable

    check_replaceable(out, force=force, inputs=[src_root])
    out.mkdir(parents=True, exist_ok=True)
    if not (out / MARKER).is_file():
        (out / MARKER).write_text("written by apexrl; apexrl may replace this folder\n")


def convert_all(
    src: ApexSource,
    out: Path,
    images: dict[str, ImageRecord],
    *,
    strict: bool,
    grader: GraderSource | None = None,
) -> Iterator[ConvertOutcome]:
    """Write one task directory per good task; yield an outcome per task.

    With `strict`, every task is first written into a staging folder inside OUT and
    moved into place only when all converted: a bad record met half way writes nothing."""
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    if not strict:
        yield from _convert_each(src, out, images, strict=False, grader=grader)
        return
    import tempfile

    stage = Path(tempfile.mkdtemp(prefix=".apexrl-convert-", dir=out))
    try:
        outcomes = list(_convert_each(src, stage, images, strict=True, grader=grader))
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if created and not any(out.iterdir()):
            out.rmdir()  # leave no trace of a folder this run made
        raise
    try:
        for o in outcomes:
            final = out / o.record.path
            if final.exists():
                shutil.rmtree(final)
            (stage / o.record.path).rename(final)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    yield from outcomes


def _convert_each(
    src: ApexSource,
    out: Path,
    images: dict[str, ImageRecord],
    *,
    strict: bool,
    grader: GraderSource | None = None,
) -> Iterator[ConvertOutcome]:
    slugs: dict[str, str] = {}
    for where, task in src.tasks:
        slug = slugify(task.task_name, task.task_id)
        if slug in slugs:
            err = BadRecordError(
                where,
                f"task directory {slug!r} collides with {slugs[slug]}",
                hint="rename one task",
            )
            if strict:
                raise err
            yield ConvertOutcome(error=err)
            continue
        slugs[slug] = where
        world = src.worlds.get(task.world_id)
        try:
            _refuse_env_keys(where, task)
            record = write_task_dir(
                src, task, world, images.get(task.world_id), out, slug, grader=grader
            )
        except BadRecordError as err:  # e.g. a link in its files: this task only
            if strict:
                raise
            yield ConvertOutcome(error=err)
            continue
        yield ConvertOutcome(record=record)


def _refuse_env_keys(where: str, task: ApexTask) -> None:
    """required_env_keys become env names in task.toml: none that changes how programs
    load (`apexrl.tasks.envnames`)."""
    keys = (task.model_extra or {}).get("required_env_keys") or []
    bad = refused_names(str(k) for k in keys)
    if bad:
        names = ", ".join(f"{n} ({why})" for n, why in bad)
        raise BadRecordError(
            f"{where} (task {task.task_id})",
            f"required_env_keys names {names}",
            hint="remove it from the record's required_env_keys",
        )


def write_task_dir(
    src: ApexSource,
    task: ApexTask,
    world: ApexWorld | None,
    image: ImageRecord | None,
    out: Path,
    slug: str,
    *,
    grader: GraderSource | None = None,
) -> TaskRecord:
    """Build the task dir in a temp folder, then rename it into place."""
    final = out / slug
    tmp = out / f".{slug}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        meta = _metadata(task, world, image, slug)
        meta.data_terms = src.terms
        (tmp / "instruction.md").write_text(_instruction(task), encoding="utf-8")
        (tmp / "task.toml").write_text(render_task_toml(meta, grader=grader), encoding="utf-8")
        _write_json(tmp / "archipelago.json", archipelago_json(meta))
        _write_environment(src, task, meta, tmp / "environment")
        _write_solution(src, task, tmp / "solution")
        _write_tests(task, tmp / "tests", tmp / "solution" / "gold_files")
        if grader is not None:
            _write_grader_tests(src, task, meta, grader, tmp)
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return TaskRecord(
        path=slug,
        task_id=task.task_id,
        task_name=task.task_name,
        domain=task.domain,
        world_id=task.world_id,
        image=meta.image,
        n_criteria=len(task.rubric),
        size_bytes=sum(p.stat().st_size for p in final.rglob("*") if p.is_file()),
        task_dir=str(final.absolute()),
    )


def _metadata(
    task: ApexTask, world: ApexWorld | None, image: ImageRecord | None, slug: str
) -> TaskMetadata:
    extra = task.model_extra or {}
    env_keys = extra.get("required_env_keys") or []
    world_name = world.world_name if world else None
    return TaskMetadata(
        task_id=task.task_id,
        task_name=task.task_name,
        task_slug=slug,
        domain=task.domain,
        domain_label=task.domain_label if task.domain_label != task.domain else None,
        world_id=task.world_id,
        world_name=world_name,
        world_short_name=world_short_name(task.domain, world_name or task.world_id),
        image=image.ref if image else None,
        image_digest=image.digest if image else None,
        image_profile=image.profile if image else None,
        required_env_keys=sorted(set(env_keys)),
        # the recipe snapshots the world unless every criterion reads the answer only
        needs_snapshot=bool(
            extra.get(
                "needs_snapshot",
                task.gold_response_type == "file"
                or (task.expected_output or "message_in_console") != "message_in_console",
            )
        ),
        expected_output=task.expected_output or "message_in_console",
        gold_response_type=task.gold_response_type,
        n_criteria=len(task.rubric),
    )


def world_short_name(domain: str, world: str) -> str:
    """'<domain slug>-<world>' in [a-z0-9-]: the recipe maps its prefix to the domain."""
    name = re.sub(r"[^a-z0-9]+", "-", world.lower()).strip("-")
    return name if name.startswith(f"{domain}-") else f"{domain}-{name}".strip("-")


def archipelago_json(meta: TaskMetadata) -> dict:
    """The task's archipelago.json: every field the recipe's code reads (task_slug,
    ecr_image, required_env_keys, needs_snapshot, world_short_name) plus the ids."""
    from apexrl.artifacts.models import ArchipelagoMeta

    record = ArchipelagoMeta(
        task_id=meta.task_id,
        task_name=meta.task_name,
        task_slug=meta.task_slug,
        world_id=meta.world_id,
        world_short_name=meta.world_short_name
        or world_short_name(meta.domain, meta.world_name or meta.world_id),
        ecr_image=image_pin(meta.image, meta.image_digest) if meta.image else None,
        required_env_keys=list(meta.required_env_keys),
        needs_snapshot=meta.needs_snapshot,
    )
    return record.model_dump(mode="json")


def render_task_toml(meta: TaskMetadata, *, grader: GraderSource | None = None) -> str:
    """Render task.toml through Harbor's own TaskConfig, so Harbor can load it.
    `grader`: the task runs archipelago's grading runner (--grader-from): its verifier
    gets the judge's settings by name and network to reach the judge (the whole trial's,
    as the recipe's sandboxes have, or the verifier phase's only: apexrl.tasks.grader_from)."""
    from harbor.models.task.config import TaskConfig

    env = {key: "${" + key + "}" for key in meta.required_env_keys}
    verifier: dict = {"timeout_sec": VERIFIER_TIMEOUT_S, "env": env}
    # sandboxed code gets no network unless a task says otherwise (tools come from the
    # world's gateway, which apexrl reaches from the host side)
    environment: dict = {"env": dict(env), "network_mode": "no-network"}
    if grader is not None:
        from apexrl.tasks import grader_from

        verifier = {
            "timeout_sec": grader_from.VERIFIER_TIMEOUT_S,
            "env": {**env, **grader_from.VERIFIER_ENV},
        }
        if grader.network == "verifier":
            verifier["network_mode"] = "public"
        else:
            environment["network_mode"] = "public"
    if meta.image:
        environment["docker_image"] = image_pin(meta.image, meta.image_digest)
    config = TaskConfig.model_validate(
        {
            "metadata": meta.model_dump(mode="json", exclude_none=True),
            "verifier": verifier,
            "agent": {"timeout_sec": AGENT_TIMEOUT_S},
            "environment": environment,
        }
    )
    return config.model_dump_toml()


def image_pin(ref: str, digest: str | None) -> str:
    """repo:tag -> repo@sha256:... when the digest is known."""
    if not digest:
        return ref
    repo = ref.split("@", 1)[0]
    last = repo.rsplit("/", 1)[-1]
    if ":" in last:
        repo = repo[: len(repo) - len(last)] + last.split(":", 1)[0]
    return f"{repo}@{digest}"


def _instruction(task: ApexTask) -> str:
    lines = [task.prompt.rstrip(), ""]
    names = input_file_names(task)
    if names:
        lines += ["Input files for this task (in the world's filesystem):", ""]
        # Input files overlay the world's root; the agent sees filesystem/ as its files.
        lines += [f"- `{n.removeprefix('filesystem/')}`" for n in names] + [""]
    if task.expected_output and task.expected_output not in ("message_in_console",):
        lines += [f"Expected output: {task.expected_output.replace('_', ' ')}.", ""]
    lines += ["When you are done, give your final answer in your last message.", ""]
    return "\n".join(lines)


def _write_environment(src: ApexSource, task: ApexTask, meta: TaskMetadata, env_dir: Path) -> None:
    env_dir.mkdir()
    base = (
        image_pin(meta.image, meta.image_digest) if meta.image else f"apexrl/world-{task.world_id}"
    )
    (env_dir / "Dockerfile").write_text(
        "# Placeholder: the task runs in its world's prebuilt image (apexrl world pack).\n"
        f"FROM {base}\n",
        encoding="utf-8",
    )
    files = src.task_files_dir(task.task_id)
    if files.is_dir():
        _copy_world_layout(files, env_dir / "task_files")


def _write_solution(src: ApexSource, task: ApexTask, sol_dir: Path) -> None:
    sol_dir.mkdir()
    gold = src.gold_files_dir(task.task_id)
    has_files = gold.is_dir()
    if has_files:
        # gold files are relative to the world's filesystem/; a gold folder laid out
        # like a world (filesystem/...) is taken from its filesystem/ part
        if (gold / "filesystem").is_dir() and not (gold / "filesystem").is_symlink():
            gold = gold / "filesystem"
        _copy_tree(gold, sol_dir / "gold_files")
    answer = task.gold_response or ""
    script = [
        "#!/usr/bin/env bash",
        "# Oracle: produce the golden output so the dataset is proven solvable.",
        "set -euo pipefail",
        'here="$(cd "$(dirname "$0")" && pwd)"',
        f'mkdir -p "$(dirname "{ANSWER_FILE}")"',
        f"cat > {ANSWER_FILE} <<'APEXRL_GOLD_EOF'",
        answer,
        "APEXRL_GOLD_EOF",
    ]
    if has_files:
        script.append(f'mkdir -p {WORLD_FS} && cp -R "$here/gold_files/." {WORLD_FS}/')
    (sol_dir / "solve.sh").write_text("\n".join(script) + "\n", encoding="utf-8")
    (sol_dir / "solve.sh").chmod(0o755)


def _write_tests(task: ApexTask, tests_dir: Path, gold_dir: Path | None = None) -> None:
    tests_dir.mkdir()
    vendored = resources.files("apexrl.tasks.vendored")
    for name in ("test.sh", "grade.py"):
        target = tests_dir / name
        target.write_bytes(vendored.joinpath(name).read_bytes())
        target.chmod(0o755)
    criteria = [c.model_dump(mode="json", exclude_none=True) for c in task.rubric]
    _write_json(tests_dir / "verifiers.json", criteria)
    # gold_files: sha256 of each gold file by path under the world's filesystem/, so
    # the verifier can tell the gold output (reference match) without the files.
    _write_json(
        tests_dir / "golden_responses.json",
        {
            "gold_response": task.gold_response,
            "gold_response_type": task.gold_response_type,
            "gold_files": gold_file_hashes(gold_dir) if gold_dir else {},
        },
    )


def _write_grader_tests(
    src: ApexSource, task: ApexTask, meta: TaskMetadata, grader: GraderSource, tmp: Path
) -> None:
    """tests/ runs archipelago's grading runner (apexrl.tasks.grader_from)."""
    import tempfile

    from apexrl.tasks.grader_from import initial_snapshot, write_grader_tests

    tests = tmp / "tests"
    for name in ("test.sh", "grade.py"):
        (tests / name).unlink()
    criteria = [c.model_dump(mode="json", exclude_none=True) for c in task.rubric]
    with tempfile.TemporaryDirectory(prefix=".apexrl-snap-", dir=tmp.parent) as work:
        snap = None
        if meta.needs_snapshot:
            files = tmp / "environment" / "task_files"
            snap = initial_snapshot(
                src.world_zip(task.world_id),
                files if files.is_dir() else None,
                Path(work) / "initial.zip",
            )
        write_grader_tests(
            grader,
            tests,
            task_id=task.task_id,
            prompt=_instruction(task),
            criteria=criteria,
            initial=snap,
        )


def gold_file_hashes(gold_dir: Path) -> dict[str, str]:
    """{path relative to filesystem/: sha256} of a task's gold files (empty without any)."""
    import hashlib

    if not gold_dir.is_dir():
        return {}
    out: dict[str, str] = {}
    for p in sorted(gold_dir.rglob("*")):
        if p.is_file():
            out[p.relative_to(gold_dir).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _write_json(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _copy_world_layout(src: Path, dst: Path) -> None:
    """A task's files folder, laid out like a world: filesystem/ and .apps_data/ are
    copied as they are; anything else at its top goes under filesystem/. A linked
    task_files/<id> (or task_files/ itself) is refused: it would copy a host folder."""
    for p in (src, src.parent):
        if p.is_symlink():
            raise BadRecordError(str(p), "links and special files are not allowed in task data")
    for top in sorted(src.iterdir()):
        if top.is_symlink() or not (top.is_file() or top.is_dir()):
            raise BadRecordError(str(top), "links and special files are not allowed in task data")
        if top.name in ("filesystem", ".apps_data") and top.is_dir():
            _copy_tree(top, dst / top.name)
        elif top.is_dir():
            _copy_tree(top, dst / "filesystem" / top.name)
        else:
            (dst / "filesystem").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(top, dst / "filesystem" / top.name)


def _copy_tree(src: Path, dst: Path) -> None:
    """Copy regular files only; links and special files in input data are refused
    (a linked task_files/<id> or task_files/ itself too: it would copy a host folder)."""
    for p in (src, src.parent):
        if p.is_symlink():
            raise BadRecordError(str(p), "links and special files are not allowed in task data")
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            raise BadRecordError(str(path), "links and special files are not allowed in task data")
        target = dst / rel
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)

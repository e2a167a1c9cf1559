"""`apexrl tasks example`: a synthetic expert dataset in the APEX-Agents layout.

Layout written under OUT (docs/facts.md section 2):

    tasks_and_rubrics.json            list of ApexTask records
    world_descriptions.json           list of ApexWorld records
    world_files_zipped/<world_id>.zip filesystem/ and .apps_data/ (mail, calendar, chat)
    task_files/<task_id>/...          per-task overlay on the world root (filesystem/...)
    gold_files/<task_id>/...          golden output files, paths relative to the world's filesystem/

One world per domain (investment banking, law, management consulting) with real
.docx/.xlsx (formulas)/.pdf/.pptx/.csv/.md documents. Every deterministic rubric
check is satisfied by the gold response or gold files. The same seed gives
byte-identical files; different seeds change names, numbers and ids.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from apexrl.artifacts.atomic import atomic_dir
from apexrl.artifacts.models import ApexTask, ApexWorld

TASKS_FILE = "tasks_and_rubrics.json"
WORLDS_FILE = "world_descriptions.json"
WORLD_ZIPS_DIR = "world_files_zipped"
TASK_FILES_DIR = "task_files"
GOLD_FILES_DIR = "gold_files"


def _hex(*parts: object) -> str:
    text = "/".join(["apexrl-example", *map(str, parts)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def build_example(seed: int = 0) -> dict[str, bytes]:
    """Every file of the example dataset: relative posix path -> bytes."""
    from apexrl.tasks.example_data import banking, consulting, law
    from apexrl.tasks.example_data.formats import json_bytes, zip_bytes
    from apexrl.tasks.example_data.spec import Ctx

    files: dict[str, bytes] = {}
    task_records: list[dict[str, Any]] = []
    world_records: list[dict[str, Any]] = []
    for module in (banking, law, consulting):
        world = module.build(Ctx(seed, module.DOMAIN))
        world_id = f"world_{_hex(seed, world.domain, 'world', world.world_name)}"
        world_rec = {
            "world_id": world_id,
            "world_name": world.world_name,
            "world_description": world.description,
            "apps": list(world.apps),
        }
        ApexWorld.model_validate(world_rec)
        world_records.append(world_rec)
        files[f"{WORLD_ZIPS_DIR}/{world_id}.zip"] = zip_bytes(world.files)

        for spec in world.tasks:
            task_id = f"task_{_hex(seed, world.domain, 'task', spec.key)}"
            rubric = []
            for i, criterion in enumerate(spec.rubric):
                entry = dict(criterion)
                entry["verifier_id"] = f"ver_{_hex(task_id, i)}"
                rubric.append(entry)
            inputs: str | list[str] | None = None
            if spec.input_files:
                names = sorted(spec.input_files)
                inputs = names[0] if spec.input_files_as_string and len(names) == 1 else names
                for name, data in spec.input_files.items():
                    files[f"{TASK_FILES_DIR}/{task_id}/{name}"] = data
            for name, data in spec.gold_files.items():
                files[f"{GOLD_FILES_DIR}/{task_id}/{name}"] = data
            rec = {
                "task_id": task_id,
                "task_name": spec.task_name,
                "domain": world.domain,
                "world_id": world_id,
                "prompt": spec.prompt,
                "task_input_files": inputs,
                "rubric": rubric,
                "expected_output": spec.expected_output,
                "gold_response": spec.gold_response,
                "gold_response_type": spec.gold_response_type,
            }
            ApexTask.model_validate(rec)
            task_records.append(rec)

    files[TASKS_FILE] = json_bytes(task_records)
    files[WORLDS_FILE] = json_bytes(world_records)
    return files


def summarize(files: dict[str, bytes], out: Path) -> dict[str, Any]:
    import json

    tasks = json.loads(files[TASKS_FILE])
    worlds = json.loads(files[WORLDS_FILE])
    domains: dict[str, int] = {}
    for t in tasks:
        domains[t["domain"]] = domains.get(t["domain"], 0) + 1
    return {
        "out": str(out),
        "n_tasks": len(tasks),
        "n_worlds": len(worlds),
        "domains": dict(sorted(domains.items())),
    }


def write_example(out: Path, seed: int = 0, *, force: bool = False) -> dict[str, Any]:
    """Write the example dataset to `out` atomically (an existing `out` is replaced)
    and return a summary {"out", "n_tasks", "n_worlds", "domains"}."""
    out = Path(out)
    files = build_example(seed)
    with atomic_dir(out, force=force) as tmp:
        for rel in sorted(files):
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(files[rel])
    return summarize(files, out)

"""`apexrl tasks synthetic`: a tool-use task family whose answers are only in the world's files.

Each world is a small filesystem: a text note `/notes/<name>.txt` and a CSV table
`/data/<name>.csv`, each holding one code word. Two tasks per world:

- `read` (one tool call): "Read /notes/<name>.txt and reply with the code in it." The
  note's path is in the prompt; the code only in the file.
- `find` (two calls): "Find the CSV file in /data and reply with the code in it." The
  file's name is in no prompt: search (or list) first, then read.

Each task has one deterministic criterion, `equals` the code (apexrl's grader, no judge);
a reply that is the code and nothing else passes. Names and codes are words from fixed
pools, each one token of the Qwen3 tokenizer wherever it appears (after `/`, at the
start of a line, alone), so a small model copies one token from a tool result to its
reply. The same seed gives the same bytes; the train and held-out splits come from
different seeds and share no (file, key, value): `split_triples` names them, and
`write_synthetic` refuses a seed whose triples meet a held-out set it is given.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from apexrl.errors import UsageError

FAMILY = "tooluse"
KEY = "code"
DOMAIN = "Management Consulting"
# file names: one Qwen3 token after "/" and alone
NAMES = (
    "apple", "audio", "banner", "board", "book", "button", "card", "chart", "cloud",
    "color", "course", "device", "dialog", "editor", "engine", "event", "feed", "font",
    "forum", "frame", "game", "graph", "group", "header", "icon", "image", "kernel",
    "layout", "logo", "media", "menu", "movie", "music", "news", "order", "photo",
    "player", "plugin", "report", "screen", "slider", "story", "stream", "style",
    "table", "theme", "topic", "video", "widget", "window",
)  # fmt: skip
# codes: one Qwen3 token at the start of a line and as a whole reply
VALUES = (
    "black", "blue", "light", "dark", "fast", "free", "fire", "high", "star", "tree",
    "home", "live", "open", "power", "rest", "right", "left", "simple", "single",
    "small", "social", "native", "public", "global", "local", "random", "static",
    "custom", "master", "basic", "plain", "full",
)  # fmt: skip
KINDS = ("read", "find")


class ToolTask(BaseModel):
    """One task of the family (what the teacher and the tests read)."""

    model_config = ConfigDict(extra="forbid")
    task_id: str
    world_id: str
    kind: str  # read | find
    file: str  # the file holding the answer, as the tools name it
    key: str
    value: str
    prompt: str


def _hex(*parts: object) -> str:
    return hashlib.sha256("/".join(["apexrl-tooluse", *map(str, parts)]).encode()).hexdigest()[:32]


def prompt_for(kind: str, file: str) -> str:
    if kind == "read":
        return f"Read {file} and reply with the {KEY} in it."
    return f"Find the CSV file in /data and reply with the {KEY} in it."


def plan(seed: int, n_worlds: int, avoid: set[tuple[str, str, str]] | None = None):
    """(worlds, tasks): n_worlds worlds of two files, two tasks each. Triples in `avoid`
    (file, key, value) are not drawn (a train split next to a held-out one)."""
    if n_worlds < 1:
        raise UsageError("--worlds must be at least 1")
    avoid = avoid or set()
    rng = random.Random(f"apexrl-tooluse:{seed}")
    used: set[tuple[str, str, str]] = set()
    worlds, tasks = [], []
    for w in range(n_worlds):
        world_id = f"world_{_hex(seed, 'world', w)}"
        files = {}
        for kind, folder, ext in (("read", "/notes", "txt"), ("find", "/data", "csv")):
            for _ in range(1000):
                name, value = rng.choice(NAMES), rng.choice(VALUES)
                triple = (f"{folder}/{name}.{ext}", KEY, value)
                if triple not in avoid and triple not in used:
                    break
            else:
                raise UsageError(
                    f"seed {seed}: no (file, key, value) left that the other split lacks",
                    hint="use fewer worlds per split",
                )
            used.add(triple)
            files[kind] = triple
            tid = f"task_{_hex(seed, 'task', w, kind)}"
            tasks.append(
                ToolTask(
                    task_id=tid,
                    world_id=world_id,
                    kind=kind,
                    file=triple[0],
                    key=KEY,
                    value=value,
                    prompt=prompt_for(kind, triple[0]),
                )
            )
        worlds.append((world_id, files))
    return worlds, tasks


def world_files(files: dict[str, tuple[str, str, str]]) -> dict[str, bytes]:
    """A world's zip members: the note (text), the table (CSV), the apps list."""
    from apexrl.tasks.example_data.formats import csv_bytes

    note, table = files["read"], files["find"]
    return {
        # the code on a line of its own: the token a reply copies
        f"filesystem{note[0]}": f"The {note[1]} is\n{note[2]}\n".encode(),
        f"filesystem{table[0]}": csv_bytes([[table[1]], [table[2]]]),
        "world.json": json.dumps({"apps": ["files"]}).encode(),
    }


def build(seed: int, n_worlds: int, avoid=None) -> tuple[dict[str, bytes], list[ToolTask]]:
    """Every file of the APEX-layout source: relative path -> bytes, and the tasks."""
    from apexrl.tasks.example import TASKS_FILE, WORLD_ZIPS_DIR, WORLDS_FILE
    from apexrl.tasks.example_data.formats import json_bytes, zip_bytes

    worlds, tasks = plan(seed, n_worlds, avoid)
    out: dict[str, bytes] = {}
    records = []
    for world_id, files in worlds:
        members = world_files(files)
        meta = json.loads(members["world.json"])
        members["world.json"] = json.dumps({"world_id": world_id, **meta}).encode()
        out[f"{WORLD_ZIPS_DIR}/{world_id}.zip"] = zip_bytes(members)
        records.append(
            {
                "world_id": world_id,
                "world_name": f"Tool use {world_id[-6:]}",
                "world_description": "A note and a table, each holding one code.",
                "apps": ["files"],
            }
        )
    rows = []
    for t in tasks:
        rows.append(
            {
                "task_id": t.task_id,
                "task_name": f"Tooluse {t.kind}",
                "domain": DOMAIN,
                "world_id": t.world_id,
                "prompt": t.prompt,
                "task_input_files": None,
                "rubric": [
                    {
                        "verifier_id": f"ver_{_hex(t.task_id, 0)}",
                        "criteria": f"The answer is exactly the {t.key} in {t.file}.",
                        "check": {"kind": "equals", "value": t.value},
                    }
                ],
                "expected_output": None,
                "gold_response": t.value,
                "gold_response_type": "text",
            }
        )
    out[TASKS_FILE] = json_bytes(rows)
    out[WORLDS_FILE] = json_bytes(records)
    out["tooluse.json"] = json_bytes(
        {
            "family": FAMILY,
            "seed": seed,
            "worlds": n_worlds,
            "tasks": [t.model_dump() for t in tasks],
        }
    )
    return out, tasks


def triples(tasks: list[ToolTask]) -> set[tuple[str, str, str]]:
    return {(t.file, t.key, t.value) for t in tasks}


def read_tasks(src: Path) -> list[ToolTask]:
    """The tasks of a source `write_synthetic` wrote (its tooluse.json)."""
    f = Path(src) / "tooluse.json"
    if not f.is_file():
        raise UsageError(f"{src}: no tooluse.json (not written by `apexrl tasks synthetic`)")
    return [ToolTask.model_validate(t) for t in json.loads(f.read_text("utf-8"))["tasks"]]


def write_synthetic(
    out: Path, *, seed: int, n_worlds: int, avoid_src: Path | None = None, force: bool = False
) -> list[ToolTask]:
    """Write the APEX-layout source (convert it with `apexrl tasks convert`). With
    `avoid_src` (another split's source), no (file, key, value) of it is drawn."""
    from apexrl.artifacts.atomic import atomic_dir

    avoid = triples(read_tasks(avoid_src)) if avoid_src else None
    files, tasks = build(seed, n_worlds, avoid)
    with atomic_dir(Path(out), force=force) as tmp:
        for rel, data in sorted(files.items()):
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
    return tasks


def write_split(root: Path, *, seed: int, n_worlds: int, avoid_src: Path | None = None):
    """Source + converted Harbor task dirs under root: (src, tasks_dir, tasks)."""
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all

    root = Path(root)
    src = root / "src"
    tasks = write_synthetic(src, seed=seed, n_worlds=n_worlds, avoid_src=avoid_src, force=True)
    tdir = root / "tasks"
    outs = list(convert_all(load_source(src, strict=True), tdir, {}, strict=True))
    bad = [o.error for o in outs if o.error is not None]
    if bad:
        raise bad[0]
    return src, tdir, tasks

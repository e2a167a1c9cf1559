"""A small dataset in the shape of the published APEX-Agents data (mercor/apex-agents).

Built from the published field list (docs/facts.md section 2), not from apexrl's example
generator: title-case domains, task ids `task_<32 hex>`, task names like
`World221_IB_01`, `task_input_files` null or an opaque snapshot id `snap_<32 hex>`
whose files are the folder `task_files/<task_id>/` laid out like a world
(`filesystem/...`, `.apps_data/...`), `expected_output` null or a kind, file-type gold
answers under `gold_files/<task_id>/`, free-text rubric criteria with no machine check,
world records whose apps are objects, extra fields the converter does not know.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

DOMAINS = {"Investment Banking": "IB", "Law": "LAW", "Management Consulting": "MC"}


def hex32(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:32]


def _zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in sorted(files.items()):
            zf.writestr(name, data)
    return buf.getvalue()


def build(root: Path, *, bad: bool = True) -> dict:
    """Write the dataset under root; return {"good": [task ids], "bad": [task ids]}."""
    root.mkdir(parents=True, exist_ok=True)
    worlds, tasks, good, bad_ids = [], [], [], []
    for n, (domain, code) in enumerate(DOMAINS.items()):
        number = 219 + n
        world_id = f"world_{hex32('world', number)}"
        worlds.append(
            {
                "world_id": world_id,
                "world_name": f"World {number}",
                "world_description": f"A {domain.lower()} firm with files, mail and chat.",
                "apps": [{"service_name": "Mail"}, {"service_name": "Chat"}, "filesystem"],
            }
        )
        (root / "world_files_zipped").mkdir(exist_ok=True)
        (root / "world_files_zipped" / f"{world_id}.zip").write_bytes(
            _zip(
                {
                    "filesystem/Documents/overview.txt": f"World {number} overview\n".encode(),
                    "filesystem/Documents/figures.csv": b"item,value\nrevenue,120\ncost,80\n",
                    ".apps_data/mail/inbox.mbox": (
                        b"From a@x.com Mon Jan 1 00:00:00 2024\nFrom: a@x.com\n"
                        b"Subject: hello\nMessage-ID: <1@x.com>\n\nHi.\n"
                    ),
                }
            )
        )
        for i in range(1, 4):
            task_id = f"task_{hex32('task', number, i)}"
            rec = {
                "task_id": task_id,
                "task_name": f"World{number}_{code}_{i:02d}",
                "domain": domain,
                "world_id": world_id,
                "prompt": f"Using the documents, what is the margin of world {number}? ({i})",
                "task_input_files": None,
                "rubric": [
                    {
                        "verifier_id": f"ver_{hex32(task_id, 0)}",
                        "criteria": "States that the margin is 40",
                        "criteria_type": "primary_objective",
                    },
                    {
                        "verifier_id": f"ver_{hex32(task_id, 1)}",
                        "criteria": "Mentions revenue of 120",
                    },
                ],
                "expected_output": None,
                "gold_response": "The margin is 40 (revenue 120 less cost 80).",
                "gold_response_type": "text",
                "rubric_version": 3,  # a field the converter does not know: kept, not fatal
            }
            if i == 2:  # input files: an opaque snapshot id + task_files/<task_id>/
                rec["task_input_files"] = f"snap_{hex32('snap', task_id)}"
                files = root / "task_files" / task_id
                (files / "filesystem" / "Inputs").mkdir(parents=True)
                (files / "filesystem" / "Inputs" / "engagement.txt").write_text(
                    "Engagement letter: scope is the margin.\n"
                )
                space = files / ".apps_data" / "chat" / "Groups" / "space_deal"
                space.mkdir(parents=True)
                (space / "group_info.json").write_text('{"name": "deal team", "members": []}\n')
                (space / "messages.json").write_text('{"messages": []}\n')
            if i == 3:  # a file answer (type spelled in another case, an id-less criterion)
                rec["expected_output"] = "make_new_doc"
                rec["gold_response_type"] = "File" if n == 0 else "file"
                del rec["rubric"][1]["verifier_id"]
                rec["gold_response"] = "I wrote Outputs/margin.md with the margin (40)."
                gold = root / "gold_files" / task_id / "filesystem" / "Outputs"
                gold.mkdir(parents=True)
                (gold / "margin.md").write_text("# Margin\n\n40\n")
            tasks.append(rec)
            good.append(task_id)
    # a domain outside the three: carried through
    extra_id = f"task_{hex32('task', 'accounting')}"
    tasks.append(
        {
            **tasks[0],
            "task_id": extra_id,
            "task_name": "World219_ACC_01",
            "domain": "Accounting & Audit",
            "task_input_files": True,
        }
    )
    (root / "task_files" / extra_id / "filesystem").mkdir(parents=True)
    (root / "task_files" / extra_id / "filesystem" / "ledger.txt").write_text("ledger\n")
    good.append(extra_id)
    if bad:
        bad_id = f"task_{hex32('task', 'bad')}"
        tasks.append(
            {
                **tasks[0],
                "task_id": bad_id,
                "task_name": "World219_IB_99",
                "task_input_files": f"snap_{hex32('snap', bad_id)}",  # no task_files folder
            }
        )
        bad_ids.append(bad_id)
    (root / "tasks_and_rubrics.json").write_text(json.dumps(tasks, indent=2))
    (root / "world_descriptions.json").write_text(json.dumps(worlds, indent=2))
    return {"good": good, "bad": bad_ids}

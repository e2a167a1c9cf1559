"""The tool-use task family (`apexrl tasks synthetic`) and its teacher.

- train and held-out splits from different seeds share no (file, key, value);
- the answers are only in the world's files (not in any prompt), one token each;
- the same seed gives the same bytes; the output converts and packs like any dataset;
- the teacher (tests/acting_teacher.py) solves every task through the real agent loop:
  `apexrl eval run` against it, local sandbox, apexrl's MCP servers and grader; one tool
  call per `read` task, two per `find` task.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from apexrl.cli.app import app
from apexrl.tasks import tooluse


def synth(runner, out: Path, seed: int, worlds: int, *extra: str):
    args = ["tasks", "synthetic", "-o", str(out), "--seed", str(seed), "--worlds", str(worlds)]
    r = runner.invoke(app, [*args, *extra])
    assert r.exit_code == 0, r.output
    return tooluse.read_tasks(out)


def test_splits_share_no_file_key_value(runner, tmp_path):
    train = synth(runner, tmp_path / "train", 0, 200)
    held = synth(runner, tmp_path / "held", 1, 100, "--avoid", str(tmp_path / "train"))
    assert len(train) == 400 and len(held) == 200
    assert {t.kind for t in train} == {t.kind for t in held} == {"read", "find"}
    assert not tooluse.triples(train) & tooluse.triples(held)
    # without --avoid, two seeds this size do meet: the check above is not vacuous
    other = synth(runner, tmp_path / "other", 1, 100)
    assert tooluse.triples(train) & tooluse.triples(other)


def test_answers_are_only_in_the_files(runner, tmp_path):
    tasks = synth(runner, tmp_path / "src", 3, 6)
    zips = tmp_path / "src" / "world_files_zipped"
    rows = json.loads((tmp_path / "src" / "tasks_and_rubrics.json").read_text())
    by_id = {r["task_id"]: r for r in rows}
    for t in tasks:
        assert t.value not in t.prompt.split()
        assert by_id[t.task_id]["rubric"][0]["check"] == {"kind": "equals", "value": t.value}
        with zipfile.ZipFile(zips / f"{t.world_id}.zip") as zf:
            text = zf.read(f"filesystem{t.file}").decode()
        assert t.value in text.split()
        if t.kind == "find":  # the file's name is nowhere in the prompt
            assert Path(t.file).stem not in t.prompt


def test_same_seed_same_bytes_and_one_token_words(tmp_path):
    a, _ = tooluse.build(5, 4)
    b, _ = tooluse.build(5, 4)
    c, _ = tooluse.build(6, 4)
    assert a == b and a != c
    from tokenizers import Tokenizer

    from apexrl.tito.tokenizer import bundled_qwen3_dir

    tk = Tokenizer.from_file(str(bundled_qwen3_dir() / "tokenizer.json"))
    for w in tooluse.NAMES:
        assert len(tk.encode("/" + w, add_special_tokens=False).ids) == 1, w
    for w in tooluse.VALUES:
        assert len(tk.encode(w, add_special_tokens=False).ids) == 1, w
        assert len(tk.encode("is\n" + w, add_special_tokens=False).ids) == 3, w
    assert not set(tooluse.NAMES) & set(tooluse.VALUES)


def test_convert_and_pack(runner, tmp_path):
    synth(runner, tmp_path / "src", 0, 2)
    r = runner.invoke(app, ["tasks", "convert", str(tmp_path / "src"), "-o", str(tmp_path / "t")])
    assert r.exit_code == 0, r.output
    assert len([p for p in (tmp_path / "t").iterdir() if (p / "task.toml").is_file()]) == 4
    r = runner.invoke(app, ["tasks", "pack", str(tmp_path / "t"), "-o", str(tmp_path / "ds")])
    assert r.exit_code == 0, r.output
    assert list((tmp_path / "ds").rglob("*.parquet"))


def test_the_teacher_solves_every_task_through_the_agent_loop(runner, tmp_path):
    from tests.acting_teacher import TeacherEngine

    src, tasks_dir, tasks = tooluse.write_split(tmp_path / "split", seed=0, n_worlds=2)
    run = tmp_path / "run"
    with TeacherEngine([]) as eng:
        args = ["eval", "run", "scripted", "--endpoint", eng.url, "--tokenizer", "qwen3"]
        args += ["--tasks", str(tasks_dir), "--worlds", str(src / "world_files_zipped")]
        args += ["-o", str(run), "--no-judge", "--max-steps", "4", "-n", "2", "--json"]
        r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    summary = json.loads((run / "summary.json").read_text())
    assert summary["pass_at_1"]["value"] == 1.0, summary
    assert summary["tool_calls_total"] == 6  # 1 per read task, 2 per find task
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 4

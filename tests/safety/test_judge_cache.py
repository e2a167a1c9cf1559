"""The judge verdict cache (`apexrl.grading.judge_cache.JudgeCache`): keyed by judge
model and prompt, a record that names another key or cannot be read is a miss (never
another prompt's verdict), hits and calls counted. Fast, for `make mutate`."""

from __future__ import annotations

import json
import threading

from apexrl.grading.judge_cache import JudgeCache, is_verdict

SHA = "a" * 64
OTHER = "b" * 64


def test_put_get_by_model_and_prompt(tmp_path):
    c = JudgeCache(tmp_path / "cache")
    assert c.get("m1", SHA) is None and c.hits == 0
    c.put("m1", SHA, "yes")
    assert c.get("m1", SHA) == "yes" and c.hits == 1
    assert c.get("m2", SHA) is None and c.get("m1", OTHER) is None and c.hits == 1
    c.put("m1", SHA, "again")  # a later verdict replaces the earlier one
    assert c.get("m1", SHA) == "again" and c.hits == 2
    assert JudgeCache(tmp_path / "cache").get("m1", SHA) == "again"  # on disk
    files = sorted(p.relative_to(tmp_path / "cache") for p in (tmp_path / "cache").rglob("*.json"))
    assert len(files) == 1 and len(files[0].parts) == 2
    assert files[0].parts[0] == files[0].name[:2]
    assert json.loads((tmp_path / "cache" / files[0]).read_text()) == {
        "model": "m1", "prompt_sha256": SHA, "reply": "again"
    }  # fmt: skip


def test_a_record_for_another_key_or_unreadable_is_a_miss(tmp_path):
    c = JudgeCache(tmp_path)
    c.put("m1", SHA, "yes")
    path = next(tmp_path.rglob("*.json"))
    path.write_text(json.dumps({"model": "m1", "prompt_sha256": OTHER, "reply": "planted"}))
    assert c.get("m1", SHA) is None
    path.write_text(json.dumps({"model": "m2", "prompt_sha256": SHA, "reply": "planted"}))
    assert c.get("m1", SHA) is None
    path.write_text("{not json")
    assert c.get("m1", SHA) is None
    path.write_text(json.dumps({"model": "m1", "prompt_sha256": SHA}))
    assert c.get("m1", SHA) is None and c.hits == 1  # found, but holds no reply
    assert c.hits == 1


def test_calls_are_counted_across_threads(tmp_path):
    c = JudgeCache(tmp_path)
    threads = [threading.Thread(target=lambda: [c.count_call() for _ in range(500)])
               for _ in range(4)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.calls == 2000


def test_only_verdicts_are_verdicts():
    assert is_verdict('{"is_criteria_true": false, "rationale": "no"}')
    assert is_verdict('{"is_criteria_true": "true", "rationale": "yes"}')
    assert not is_verdict('{"is_criteria_true": "maybe", "rationale": "?"}')
    assert not is_verdict("I think it is met.")

"""Checkpoint checks, redaction and dry runs (no Hub needed)."""

from __future__ import annotations

import gzip
import io
import json
import struct
import tarfile

import pyarrow.parquet as pq
import pytest

from apexrl.cli.app import app
from apexrl.publish.checkpoint import CheckpointError, check_checkpoint, read_safetensors_header
from apexrl.publish.redact import Redactor
from tests.publish.conftest import PLANTED, SECRET_MARKERS, make_checkpoint, write_safetensors

# --- checkpoint checks ----------------------------------------------------------------------


def test_good_checkpoint(ckpt):
    info = check_checkpoint(ckpt)
    assert info.n_tensors == 4 and info.n_params == 64 * 8 + 8 + 64 + 128
    assert info.weight_files == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    assert info.chat_template_source == "chat_template.jinja"
    header, start = read_safetensors_header(ckpt / "model-00001-of-00002.safetensors")
    assert start % 8 == 0 and "model.embed_tokens.weight" in header


def _problems(ckpt) -> list[str]:
    with pytest.raises(CheckpointError) as e:
        check_checkpoint(ckpt)
    return e.value.problems


def test_missing_shard(ckpt):
    (ckpt / "model-00002-of-00002.safetensors").unlink()
    assert _problems(ckpt) == [
        "shard model-00002-of-00002.safetensors is missing (2 tensor(s) of "
        "model.safetensors.index.json point to it)"
    ]


def test_index_mismatch(ckpt):
    index = json.loads((ckpt / "model.safetensors.index.json").read_text())
    # the index says a tensor of shard 1 lives in shard 2
    index["weight_map"]["model.embed_tokens.weight"] = "model-00002-of-00002.safetensors"
    (ckpt / "model.safetensors.index.json").write_text(json.dumps(index))
    problems = _problems(ckpt)
    assert any("says tensor 'model.embed_tokens.weight' is in model-00002" in p for p in problems)
    assert any("holds tensor 'model.embed_tokens.weight' that" in p for p in problems)


def test_truncated_shard_and_wrong_size(ckpt):
    shard = ckpt / "model-00001-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-100])
    assert any("truncated shard" in p for p in _problems(ckpt))
    # a header whose byte range does not match dtype x shape
    import numpy as np

    write_safetensors(
        shard,
        {
            "model.embed_tokens.weight": np.zeros((64, 8)),
            "model.layers.0.self_attn.q_proj.weight": np.zeros((8, 8)),
        },
    )
    raw = shard.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + n])
    header["model.embed_tokens.weight"]["shape"] = [64, 9]
    h = json.dumps(header).encode()
    shard.write_bytes(struct.pack("<Q", len(h)) + h + raw[8 + n :])
    assert any("needs 2304" in p for p in _problems(ckpt))


def test_garbage_shard(ckpt):
    (ckpt / "model-00002-of-00002.safetensors").write_bytes(b"not a safetensors file at all")
    assert any("model-00002-of-00002.safetensors: header length" in p for p in _problems(ckpt))


@pytest.mark.parametrize(
    ("remove", "needle"),
    [
        (["tokenizer.json"], "no tokenizer"),
        (["tokenizer_config.json"], "tokenizer_config.json is missing"),
        (["chat_template.jinja"], "no chat template"),
        (["generation_config.json"], "generation_config.json is missing"),
        (["config.json"], "config.json is missing"),
    ],
)
def test_missing_pieces(ckpt, remove, needle):
    for name in remove:
        (ckpt / name).unlink()
    assert any(needle in p for p in _problems(ckpt))


def test_config_not_loadable(ckpt):
    (ckpt / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    assert any("does not load with transformers" in p for p in _problems(ckpt))


def test_broken_checkpoint_refused_by_cli(runner, ckpt):
    (ckpt / "model-00002-of-00002.safetensors").unlink()
    (ckpt / "tokenizer.json").unlink()
    r = runner.invoke(app, ["publish", "model", str(ckpt), "--repo", "acme/x", "--dry-run"])
    assert r.exit_code == 1
    assert "cannot be published (2 problem(s))" in r.stderr
    assert "shard model-00002-of-00002.safetensors is missing" in r.stderr
    assert "no tokenizer" in r.stderr and "nothing was uploaded" in r.stderr
    assert r.stdout == ""


def test_bad_repo_id_is_usage_error(runner, ckpt):
    r = runner.invoke(app, ["publish", "model", str(ckpt), "--repo", "no-slash", "--dry-run"])
    assert r.exit_code == 2 and "ORG/NAME" in r.stderr


# --- redaction ------------------------------------------------------------------------------


def test_redactor_patterns_and_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED["env_judge"])
    red = Redactor()
    values = {**PLANTED, "aws_secret": f'"AWS_SECRET_ACCESS_KEY": "{PLANTED["aws_secret"]}"'}
    text = "\n".join(values.values()) + "\nplain words stay: sk-short hf_x"
    out = red.text(text, "f")
    for m in SECRET_MARKERS[:-1]:
        if m != PLANTED["env_fmp"]:  # FMP_API_KEY is not set here
            assert m not in out, m
    assert "plain words stay: sk-short hf_x" in out
    assert PLANTED["env_fmp"] in out
    kinds = {f.kind for f in red.findings}
    assert {
        "aws-access-key-id", "hf-token", "openai-key", "github-token", "bearer-token",
        "private-key", "env:OPENAI_API_KEY",
    } <= kinds  # fmt: skip
    for f in red.findings:  # findings never carry a value
        assert all(m not in f.model_dump_json() for m in SECRET_MARKERS)
    # the key name stays readable when only the value is a secret
    assert red.text(f"aws_secret_access_key={PLANTED['aws_secret']}", "g") == (
        "aws_secret_access_key=[REDACTED:aws-secret-access-key]"
    )


def test_redactor_objects_and_binary():
    red = Redactor(extra_values={"X_KEY": "abcdef123456"})
    obj = {"a": ["x abcdef123456 y", {"abcdef123456": 1}], "n": 3}
    assert red.obj(obj, "o") == {
        "a": ["x [REDACTED:env:X_KEY] y", {"[REDACTED:env:X_KEY]": 1}],
        "n": 3,
    }
    # binary: masked in place, same length (issue 16: binary files were not scanned)
    assert red.bytes_text(b"\0\1binary abcdef123456", "b") == b"\0\1binary ************"


def _all_text(stage) -> str:
    """Every staged file as text (Parquet decoded: its pages are compressed)."""
    parts = []
    for p in sorted(stage.rglob("*")):
        if not p.is_file():
            continue
        if p.suffix == ".parquet":
            for row in pq.read_table(p).to_pylist():
                blob = row.pop("task_binary", None)
                if blob:
                    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob))) as tf:
                        for m in tf.getmembers():
                            if m.isfile():
                                parts.append(tf.extractfile(m).read().decode("utf-8", "replace"))
                parts.append(json.dumps(row, default=str))
        else:
            parts.append(p.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def test_traces_dry_run_has_no_secret(runner, run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED["env_judge"])
    monkeypatch.setenv("FMP_API_KEY", PLANTED["env_fmp"])
    monkeypatch.delenv("HF_TOKEN", raising=False)
    stage = tmp_path / "stage"
    r = runner.invoke(
        app,
        ["publish", "traces", str(run_dir), "--repo", "acme/t", "--include-tokens",
         "--dry-run", "--stage", str(stage), "--json"],
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    files = [json.loads(x) for x in r.stdout.splitlines()]
    for f in files:  # the exact files and sizes
        assert (stage / f["path"]).stat().st_size == f["size_bytes"]
    text = _all_text(stage)
    for m in SECRET_MARKERS:
        assert m not in text, m
        assert m not in r.stderr and m not in r.stdout
    # planted in trajectories (user message), tool outputs, verdict rationales, logs, run.json
    for kind in ("aws-access-key-id", "private-key", "env:OPENAI_API_KEY", "env:FMP_API_KEY"):
        assert kind in r.stderr
    assert "[REDACTED:env:OPENAI_API_KEY]" in (stage / "run.json").read_text()
    assert "--- README.md (card) ---" in r.stderr and "# Agent traces: acme/tiny-agent" in r.stderr
    assert "8 file(s)" in r.stderr  # 4 trials: 4 sessions, 1 shard, run, summary, card


def test_model_dry_run_lists_exact_files(runner, ckpt, run_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED["env_judge"])
    stage = tmp_path / "stage"
    r = runner.invoke(
        app,
        ["publish", "model", str(ckpt), "--repo", "acme/m", "--eval", str(run_dir),
         "--dry-run", "--stage", str(stage), "--json"],
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    files = {json.loads(x)["path"]: json.loads(x) for x in r.stdout.splitlines()}
    w = files["model-00001-of-00002.safetensors"]
    assert w["source"] == str(ckpt / "model-00001-of-00002.safetensors")  # weights not copied
    assert w["size_bytes"] == (ckpt / "model-00001-of-00002.safetensors").stat().st_size
    assert "optimizer.pt" not in files and "not published:" in r.stderr
    text = _all_text(stage)
    for m in SECRET_MARKERS:
        assert m not in text, m
    card = (stage / "README.md").read_text()
    assert "Pass@1 (%)" in card and "[REDACTED:env:OPENAI_API_KEY]" in card  # recipe in the card


def test_strict_refuses(runner, run_dir, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_thisisnotarealtokenbutlongenough00")
    r = runner.invoke(app, ["publish", "traces", str(run_dir), "--repo", "acme/t", "--strict"])
    assert r.exit_code == 1
    assert "--strict refuses to upload" in r.stderr


def test_dataset_dry_run_redacts_inside_task_tars(runner, packed_dataset, tmp_path):
    stage = tmp_path / "stage"
    r = runner.invoke(
        app,
        ["publish", "dataset", str(packed_dataset), "--repo", "acme/d", "--dry-run",
         "--stage", str(stage), "--json", "--license", "mit"],
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    paths = [json.loads(x)["path"] for x in r.stdout.splitlines()]
    assert paths == ["README.md", "_dataset.json", "data/tasks-00000-of-00001.parquet"]
    text = _all_text(stage)
    assert PLANTED["github"] not in text and "[REDACTED:github-token]" in text
    man = json.loads((stage / "_dataset.json").read_text())
    old = json.loads((packed_dataset / "_dataset.json").read_text())
    assert man["digest"] != old["digest"] and man["n_tasks"] == old["n_tasks"]
    assert "license: mit" in (stage / "README.md").read_text()


def test_clean_dataset_shards_are_not_copied(runner, packed_dataset, tmp_path):
    """Without findings the shard is uploaded from where it is (no second copy of big files)."""
    from apexrl.publish.stage_dataset import stage_dataset

    red = Redactor()
    red._patterns = []  # nothing to find
    plan = stage_dataset(packed_dataset, repo="acme/d", stage_dir=tmp_path / "s", redactor=red)
    shard = next(f for f in plan.files if f.path.endswith(".parquet"))
    assert shard.local == packed_dataset / shard.path


def test_second_checkpoint_layout_single_file(tmp_path, runner):
    ck = make_checkpoint(tmp_path / "one", shards=1)
    (ck / "model.safetensors.index.json").unlink()
    (ck / "model-00001-of-00001.safetensors").rename(ck / "model.safetensors")
    info = check_checkpoint(ck)
    assert info.weight_files == ["model.safetensors"]


def test_train_manifest_beside_checkpoints(runner, tmp_path):
    """`apexrl train` writes apexrl_manifest.json in the run folder above the checkpoints."""
    run = tmp_path / "train-run"
    ck = make_checkpoint(run / "export" / "global_step_10")
    (ck / "recipe.toml").unlink()
    (run / "apexrl_manifest.json").write_text(
        json.dumps(
            {"run_name": "r1", "recipe": "smoke-1gpu", "model": "Qwen/Qwen3-0.6B",
             "dataset_digest": "sha256:ab", "overrides": [f"judge.key={PLANTED['openai']}"]}
        )
    )  # fmt: skip
    stage = tmp_path / "stage"
    r = runner.invoke(
        app, ["publish", "model", str(ck), "--repo", "acme/m", "--dry-run", "--stage", str(stage)]
    )
    assert r.exit_code == 0, r.stderr
    card = (stage / "README.md").read_text()
    assert "base_model: Qwen/Qwen3-0.6B" in card and '"recipe": "smoke-1gpu"' in card
    assert PLANTED["openai"] not in card
    assert "[REDACTED:openai-key]" in (stage / "apexrl_manifest.json").read_text()


def test_traces_from_the_journal_of_a_killed_run(runner, run_dir, tmp_path):
    rows = pq.read_table(run_dir / "results.parquet").to_pylist()
    (run_dir / "results.parquet").unlink()
    lines = [json.dumps(r) for r in rows] + [json.dumps(rows[0]), '{"torn": ']
    (run_dir / "results.jsonl").write_text("\n".join(lines))
    stage = tmp_path / "stage"
    r = runner.invoke(
        app,
        ["publish", "traces", str(run_dir), "--repo", "a/t", "--dry-run", "--stage", str(stage)],
    )
    assert r.exit_code == 0, r.stderr
    assert pq.read_table(stage / "data/train-00000-of-00001.parquet").num_rows == 4
    (run_dir / "results.jsonl").unlink()
    r = runner.invoke(app, ["publish", "traces", str(run_dir), "--repo", "a/t", "--dry-run"])
    assert r.exit_code == 2 and "no results.parquet" in r.stderr


def test_secret_in_safetensors_metadata_and_remote_code(runner, ckpt, tmp_path):
    shard = ckpt / "model-00002-of-00002.safetensors"
    header, start = read_safetensors_header(shard)
    header["__metadata__"] = {"format": "pt", "args": f"--hub-token {PLANTED['hf']}"}
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    data = shard.read_bytes()[start:]
    shard.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    cfg = json.loads((ckpt / "config.json").read_text())
    cfg["auto_map"] = {"AutoModelForCausalLM": "modeling_tiny.TinyForCausalLM"}
    (ckpt / "config.json").write_text(json.dumps(cfg))
    (ckpt / "modeling_tiny.py").write_text(f"KEY = '{PLANTED['github']}'\n")
    (ckpt / "train.py").write_text("print('not needed to load the model')\n")
    stage = tmp_path / "stage"
    r = runner.invoke(
        app, ["publish", "model", str(ckpt), "--repo", "a/m", "--dry-run", "--stage", str(stage)]
    )
    assert r.exit_code == 0, r.stderr
    copy = stage / shard.name
    h2, s2 = read_safetensors_header(copy)
    assert h2["__metadata__"]["args"] == "--hub-token [REDACTED:hf-token]"
    assert copy.read_bytes()[s2:] == data  # tensors unchanged
    check_checkpoint(ckpt)  # the original is still a valid checkpoint
    assert "[REDACTED:github-token]" in (stage / "modeling_tiny.py").read_text()
    assert not (stage / "train.py").exists() and "train.py" in r.stderr


def test_dataset_secrets_in_any_encoding_office_and_binary(runner, mini_apex, tmp_path):
    """Issue 16: Latin-1 text, .docx and files with a NUL byte were not scanned, yet the
    card said every text file was. Now each is scanned and the card says how."""
    import io
    import zipfile

    import pyarrow.parquet as pq

    from apexrl.artifacts.archive_extract import gunzip, tar_members

    key, tok = PLANTED["aws_key"], PLANTED["hf"]
    # a valid converted task (pack validates each task) with the files planted beside it
    tasks = tmp_path / "tasks"
    assert runner.invoke(app, ["tasks", "convert", str(mini_apex), "-o", str(tasks)]).exit_code == 0
    task = sorted(p for p in tasks.iterdir() if p.is_dir())[0]
    (task / "docs").mkdir()
    (task / "docs" / "latin1.txt").write_bytes(f"café clé={key}\n".encode("latin-1"))
    (task / "docs" / "utf16.txt").write_bytes(f"token {tok}\n".encode("utf-16"))
    (task / "docs" / "blob.bin").write_bytes(b"\x00\x01" + key.encode() + b"\x00\xff")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("word/document.xml", f"<w:t>secret {tok}</w:t>")
    (task / "docs" / "memo.docx").write_bytes(buf.getvalue())
    ds = tmp_path / "ds"
    assert runner.invoke(app, ["tasks", "pack", str(task.parent), "-o", str(ds)]).exit_code == 0
    stage = tmp_path / "stage"
    r = runner.invoke(
        app,
        ["publish", "dataset", str(ds), "--repo", "acme/d", "--dry-run", "--stage", str(stage),
         "--license", "mit"],
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    files = {}
    for shard in sorted((stage / "data").glob("*.parquet")):
        for row in pq.read_table(shard).to_pylist():
            members, _ = tar_members(gunzip(row["task_binary"], "row"), "row")
            if not any(m.name == "docs/latin1.txt" for m in members):
                continue
            for m in members:
                if m.kind == "file" and m.read is not None:
                    with m.read() as fh:
                        files[m.name] = fh.read()
    assert files["docs/latin1.txt"].decode("latin-1") == "café clé=[REDACTED:aws-access-key-id]\n"
    assert key.encode() not in files["docs/blob.bin"] and len(files["docs/blob.bin"]) == 24
    assert tok not in files["docs/utf16.txt"].decode("utf-16")
    with zipfile.ZipFile(io.BytesIO(files["docs/memo.docx"])) as z:
        assert tok not in z.read("word/document.xml").decode()
    card = (stage / "README.md").read_text()
    assert "office document(s)" in card and "1 binary file(s)" in card

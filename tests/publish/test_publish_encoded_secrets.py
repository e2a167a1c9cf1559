"""Issue 29, finding 5: `publish traces` leaked a token planted in a trial's logs as UTF-16
(with or without a BOM, even with HF_TOKEN holding the same value), glued to a prefix,
split across lines, base64-encoded, or inside a zip named .txt. Each variant through the
CLI (`publish traces --dry-run` on a run folder), and normal trajectories stay as they are."""

from __future__ import annotations

import base64
import io
import json
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from apexrl.cli.app import app

# Hub-token shaped (mixed case, as real ones are); never a real one
TOKEN = "hf_QrStUvWxYzAbCdEfGhIjKlMnOpQrStUvWx"
PNG_B64 = base64.b64encode(bytes(range(256)) * 12).decode()  # an image as tools return one

NORMAL_MESSAGES = [
    {"role": "system", "content": "You are an analyst at a consulting firm."},
    {
        "role": "user",
        "content": "Compute the risk-adjusted return on capital for desk-research-q3 and "
        "name the file task-3f2a9b8c-1d4e-5f6a-7b8c-9d0e1f2a3b4c.xlsx in the report.",
    },
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {
                    "name": "code_execution_code_exec",
                    "arguments": json.dumps({"code": "import hashlib, uuid\nprint(uuid.uuid4())"}),
                },
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": "Range: all\nTable:\n\tA\tB\n1\tRAROC\t0.142 (=B2/B3)\n"
        "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n"
        "run id world_9f8e7d6c5b4a39281706f5e4d3c2b1a0 behalf_ofTheCompanyAndItsAffiliates "
        "pdf_extract_all_text_from_documentpages mask-ProjectAlphaBetaGamma2024 "
        "snapshot snap_0123456789abcdef0123456789abcdef ask-price-BidAskSpreadWide2025",
    },
    {"role": "tool", "tool_call_id": "call_1", "content": f"data:image/png;base64,{PNG_B64}"},
    {"role": "assistant", "content": "RAROC is 14.2%; the desk's sk-tier model is unchanged."},
]
NORMAL_LOG = (
    "2026-01-01T00:00:00Z gateway ready on /mcp/ (9 servers)\n"
    "tool code_execution_code_exec ok in 0.42s\nGET /health 200\n"
)


def _run(root: Path, logs: dict[str, bytes] | None = None, messages=None) -> Path:
    """A run folder as `eval run` writes it: two trials, the first with `logs` planted
    under logs/<trial>/agent/ and `messages` as its trajectory."""
    rows = []
    for i, tid in enumerate(["task_a.a0", "task_b.a0"]):
        rows.append(
            {"trial_id": tid, "task_id": tid[:6], "domain": "law", "world_id": "world_a",
             "attempt": 0, "status": "complete", "reward": 1.0, "criteria_met": 1,
             "criteria_total": 1, "turns": 2, "tokens_in": 10, "tokens_out": 5}
        )  # fmt: skip
        tdir = root / "trajectories" / tid
        tdir.mkdir(parents=True)
        msgs = messages if (messages is not None and i == 0) else NORMAL_MESSAGES
        atif = {"schema_version": "ATIF-v1.4", "extra": {"tito": {"messages": msgs}}}
        (tdir / "trajectory.json").write_text(json.dumps(atif))
        tito = {"prompt_ids": [1, 2], "turns": [{"kind": "sampled", "token_ids": [3, 4]}]}
        (tdir / "tokens.jsonl").write_text(json.dumps(tito))
        ldir = root / "logs" / tid / "agent"
        ldir.mkdir(parents=True)
        (ldir / "agent.log").write_text(NORMAL_LOG)
        for name, data in (logs or {}).items() if i == 0 else ():
            (ldir / name).write_bytes(data)
    pq.write_table(pa.Table.from_pylist(rows), root / "results.parquet")
    (root / "run.json").write_text(json.dumps({"model": {"name": "acme/agent"}}))
    return root


def _publish(runner, run: Path, stage: Path, *extra: str):
    return runner.invoke(
        app,
        ["publish", "traces", str(run), "--repo", "acme/t", "--dry-run", "--stage", str(stage),
         "--include-tokens", *extra],
    )  # fmt: skip


def _staged_rows(stage: Path) -> list[dict]:
    return [r for p in sorted(stage.rglob("*.parquet")) for r in pq.read_table(p).to_pylist()]


def _base64_forms(token: str) -> set[str]:
    """Base64 of the token at each byte alignment, its ends cut (they mix in neighbours)."""
    forms = set()
    for k in range(3):
        for enc in (base64.b64encode, base64.urlsafe_b64encode):
            forms.add(enc(bytes(k) + token.encode()).decode()[4:-4])
    return forms


def _leaks(stage: Path, token: str) -> list[str]:
    """Every way `token` could still be read from the staged files."""
    texts = [json.dumps(_staged_rows(stage), ensure_ascii=False)]
    texts += [p.read_text("utf-8", "replace") for p in stage.rglob("*") if p.suffix != ".parquet"
              and p.is_file()]  # fmt: skip
    out = []
    for text in texts:
        flat = text.replace("\\n", "").replace("\\r", "").replace("\n", "").replace("\r", "")
        if token in flat:
            out.append("plain")
        if token in flat.replace("\x00", "").replace("\\u0000", ""):
            out.append("utf-16")
        if any(f in flat for f in _base64_forms(token)):
            out.append("base64")
    return out


def _zip_named_txt() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("creds/env.sh", f"export HUB={TOKEN}\n")
    return buf.getvalue()


def _split(token: str) -> bytes:
    return f"token part one {token[:12]}\n    {token[12:25]}\r\n{token[25:]} end\n".encode()


VARIANTS = {
    # name: (files planted in the first trial's log folder, HF_TOKEN set to the token?)
    "utf16-bom": ({"agent.log": f"hub {TOKEN}\n".encode("utf-16")}, False),
    "utf16-bom-known": ({"agent.log": f"hub {TOKEN}\n".encode("utf-16")}, True),
    "utf16le-no-bom": ({"agent.log": f"hub {TOKEN}\n".encode("utf-16-le")}, False),
    "utf16be-no-bom-known": ({"agent.log": f"hub {TOKEN}\n".encode("utf-16-be")}, True),
    "utf16-tail-odd-byte": ({"agent.log": b"x" + f"hub {TOKEN}\n".encode("utf-16-le")}, True),
    "glued-prefix": ({"agent.log": f"export MYKEY_{TOKEN}\n".encode()}, False),
    "glued-known": ({"agent.log": f"X{TOKEN}Y\n".encode()}, True),
    "latin-1": ({"agent.log": f"clé {TOKEN}\n".encode("latin-1")}, False),
    "split-lines-known": ({"agent.log": _split(TOKEN)}, True),
    "base64-known": ({"agent.log": base64.b64encode(f"user:{TOKEN}".encode()) + b"\n"}, True),
    "base64-wrapped-known": (
        {"agent.json": base64.encodebytes(f"{{'hub': '{TOKEN}'}}".encode())},
        True,
    ),
    "zip-named-txt": ({"notes.txt": _zip_named_txt()}, False),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_each_encoding_of_a_planted_token_is_found_and_never_staged(
    runner, tmp_path, monkeypatch, variant
):
    files, known = VARIANTS[variant]
    for key in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    if known:
        monkeypatch.setenv("HF_TOKEN", TOKEN)
    run = _run(tmp_path / "run", logs=files)
    res = _publish(runner, run, tmp_path / "stage")
    assert res.exit_code == 0, res.output
    assert "secret redacted: data row 0 (trial task_a.a0)" in res.stderr, res.stderr
    assert _leaks(tmp_path / "stage", TOKEN) == []
    assert TOKEN not in res.output
    strict = _publish(runner, run, tmp_path / "stage2", "--strict")
    assert strict.exit_code == 1 and "--strict refuses to upload" in strict.stderr


@pytest.mark.parametrize(
    "content",
    [
        f"tool output as Latin-1 text: {TOKEN.encode('utf-16-le').decode('latin-1')}",
        f"set MYKEY_{TOKEN} in the shell",
        f"the key is {TOKEN[:20]}\n{TOKEN[20:]}",
    ],
    ids=["utf16-in-json", "glued", "split-known"],
)
def test_tokens_in_trajectories_are_found_too(runner, tmp_path, monkeypatch, content):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    messages = [*NORMAL_MESSAGES[:2], {"role": "tool", "tool_call_id": "c", "content": content}]
    run = _run(tmp_path / "run", messages=messages)
    res = _publish(runner, run, tmp_path / "stage")
    assert res.exit_code == 0 and "secret redacted: data row 0" in res.stderr, res.output
    assert _leaks(tmp_path / "stage", TOKEN) == []
    # the token ids spell the messages, the token included: withheld for that trial only
    rows = _staged_rows(tmp_path / "stage")
    assert rows[0]["token_ids"] == [] and rows[1]["token_ids"] == [1, 2, 3, 4]
    assert "token-ids-withheld" in res.stderr


def test_normal_trajectories_have_no_finding(runner, tmp_path, monkeypatch):
    """Hyphenated words that hold `sk-`, snake_case that holds `hf_`, uuids, hashes and
    a base64 image: no finding, and the staged text is the text as it was, with a
    known secret set (its base64 and split forms looked for) and without."""
    for known in (False, True):
        if known:
            monkeypatch.setenv("HF_TOKEN", TOKEN)
        else:
            monkeypatch.delenv("HF_TOKEN", raising=False)
        stage = tmp_path / f"stage{known}"
        run = _run(tmp_path / f"run{known}")
        res = _publish(runner, run, stage, "--strict")
        assert res.exit_code == 0, res.output
        assert "secret redacted" not in res.stderr
        rows = _staged_rows(stage)
        assert [m["content"] for m in rows[0]["messages"]] == [
            m["content"] for m in NORMAL_MESSAGES
        ]
        assert rows[0]["logs"] == [{"name": "agent/agent.log", "text": NORMAL_LOG}]
        assert rows[0]["token_ids"] == [1, 2, 3, 4]


def test_the_byte_scanner_rebuilds_archives_of_any_name():
    """gzip and tar members too, masked or redacted, the archive still readable."""
    import gzip
    import tarfile

    from apexrl.artifacts.archive_write import bytes_entry, gzip_bytes, tar_bytes
    from apexrl.publish.redact import Redactor

    red = Redactor()
    tar = tar_bytes([bytes_entry("a/env.txt", f"k={TOKEN}\n".encode("utf-16"))])
    out = red.bytes_text(gzip_bytes(tar), "bundle.dat")
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(out))) as tf:
        body = tf.extractfile("a/env.txt").read().decode("utf-16")
    assert body == "k=[REDACTED:hf-token]\n"
    assert {f.where for f in red.findings} == {"bundle.dat:gunzip:a/env.txt"}


def test_dataset_columns_and_shard_metadata_are_scanned(runner, tmp_path, monkeypatch):
    """publish dataset uploaded a shard as it is when its task binaries were clean: an
    extra column or the shard's footer metadata holding a token went up unscanned."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    task = tmp_path / "tasks" / "t-1"
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text('[metadata]\ntask_id = "t1"\nworld_id = "world_a"\n')
    (task / "instruction.md").write_text("Check the configuration.\n")
    (task / "tests" / "verifiers.json").write_text('[{"verifier_id": "v1", "criteria": "ok"}]')
    (task / "tests" / "test.sh").write_text("#!/bin/sh\nexit 0\n")
    (task / "tests" / "test.sh").chmod(0o755)
    ds = tmp_path / "ds"
    assert runner.invoke(app, ["tasks", "pack", str(task.parent), "-o", str(ds)]).exit_code == 0
    shard = next(ds.rglob("*.parquet"))
    table = pq.read_table(shard)
    notes = pa.array([f"uploaded with MYKEY_{TOKEN}"] * table.num_rows)
    table = table.append_column("notes", notes)
    meta = {**(table.schema.metadata or {}), b"origin": f"token={TOKEN}".encode("utf-16")}
    pq.write_table(table.replace_schema_metadata(meta), shard)
    stage = tmp_path / "stage"
    res = runner.invoke(
        app, ["publish", "dataset", str(ds), "--repo", "acme/d", "--dry-run", "--stage", str(stage)]
    )
    assert res.exit_code == 0, res.output
    assert "column notes: hf-token" in res.stderr and "metadata: hf-token" in res.stderr
    staged = pq.read_table(next(stage.rglob("*.parquet")))
    assert staged.column("notes").to_pylist() == ["uploaded with MYKEY_[REDACTED:hf-token]"]
    assert TOKEN not in staged.schema.metadata[b"origin"].decode("utf-16")
    strict = runner.invoke(app, ["publish", "dataset", str(ds), "--repo", "acme/d", "--dry-run",
                                 "--strict"])  # fmt: skip
    assert strict.exit_code == 1

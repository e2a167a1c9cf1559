"""Issue 42, finding 3: secrets in JSON-escaped text were not redacted. The credential
shapes want no letter before the key name, and in a stored tool result
`\\naws_secret_access_key=` follows the `n` of `\\n`: the AWS secret, Bearer, Slack,
lowercase Hub and other tokens went up in staged traces (messages and log tails), in
`publish dataset` and past `--strict`. Each token kind after an escaped `\\n` and `\\t` and
inside JSON text (JSON in JSON too), through the CLI; and a known secret at the very end
of a BOM-less UTF-16BE file."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from apexrl.cli.app import app
from tests.publish.test_publish_encoded_secrets import _leaks, _publish, _run, _staged_rows

# (kind, the text planted, the secret in it that must not be published); made-up values
TOKENS = [
    ("aws-secret-access-key", "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("aws-access-key-id", "AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("bearer-token", "Bearer q7w8e9r0t1y2u3i4o5p6a7s8d9f0", "q7w8e9r0t1y2u3i4o5p6a7s8d9f0"),
    ("slack-token", "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx",
     "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx"),
    ("hf-token", "hf_abcdefghijklmnopqrstuvwxyzabcdefgh", "hf_abcdefghijklmnopqrstuvwxyzabcdefgh"),
    ("google-api-key", "AIzaSyabcdefghijklmnopqrstuvwxyz_-abcde",
     "AIzaSyabcdefghijklmnopqrstuvwxyz_-abcde"),
    ("github-token", "ghp_abcdefghijklmnopqrstuvwxyzabcdefghij",
     "ghp_abcdefghijklmnopqrstuvwxyzabcdefghij"),
    ("openai-key", "sk-proj-abcdefghijklmnopqrstuvwxyz", "sk-proj-abcdefghijklmnopqrstuvwxyz"),
    ("anthropic-key", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
     "sk-ant-api03-abcdefghijklmnopqrstuvwxyz"),
    ("jwt", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhYmMifQ.c2lnbmF0dXJlZ29lc2hlcmU",
     "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhYmMifQ.c2lnbmF0dXJlZ29lc2hlcmU"),
]  # fmt: skip
KINDS = [t[0] for t in TOKENS]


def _escaped(text: str) -> dict[str, str]:
    """`text` as tools and logs store it: after an escaped line break or tab, as a value
    in JSON, and in JSON stored as a string in JSON (a tool result in a trace)."""
    return {
        "after-n": json.dumps({"stdout": f"env read\n{text}\n"}),
        "after-t": json.dumps({"stdout": f"key\t{text}"}),
        "json-in-json": json.dumps({"result": json.dumps({"cfg": {"auth": f"\n{text}"}})}),
    }


CASES = [(kind, how) for kind in KINDS for how in ("after-n", "after-t", "json-in-json")]


def _token(kind: str) -> tuple[str, str]:
    return next((text, secret) for k, text, secret in TOKENS if k == kind)


def _no_leak(stage: Path, secret: str) -> None:
    staged = json.dumps(_staged_rows(stage), ensure_ascii=False)
    staged += "".join(
        p.read_text("utf-8", "replace")
        for p in stage.rglob("*")
        if p.is_file() and p.suffix != ".parquet"
    )
    assert secret not in staged
    assert _leaks(stage, secret) == []


@pytest.fixture
def no_env_secrets(monkeypatch):
    from apexrl import secrets

    for key in secrets.SECRET_ENV_KEYS:
        monkeypatch.delenv(key, raising=False)


@pytest.mark.parametrize("kind,how", CASES)
def test_escaped_tokens_in_trace_messages_and_logs_are_redacted(
    runner, tmp_path, no_env_secrets, kind, how
):
    text, secret = _token(kind)
    planted = _escaped(text)[how]
    messages = [{"role": "user", "content": "read the env"},
                {"role": "tool", "tool_call_id": "c0", "content": planted}]  # fmt: skip
    run = _run(tmp_path / "run", logs={"tool.jsonl": (planted + "\n").encode()}, messages=messages)
    res = _publish(runner, run, tmp_path / "stage")
    assert res.exit_code == 0, res.output
    where = "secret redacted: data row 0 (trial task_a.a0)"
    assert f"{where}: {kind} x1" in res.stderr, res.stderr  # the message
    assert f"{where} agent/tool.jsonl: {kind} x1" in res.stderr  # the log tail
    _no_leak(tmp_path / "stage", secret)
    row = _staged_rows(tmp_path / "stage")[0]
    tool = row["messages"][1]["content"]
    assert f"[REDACTED:{kind}]" in tool
    json.loads(tool)  # the escaped text is still the JSON it was
    strict = _publish(runner, run, tmp_path / "stage2", "--strict")
    assert strict.exit_code == 1 and "--strict refuses to upload" in strict.stderr


@pytest.mark.parametrize("kind,how", CASES)
def test_escaped_tokens_in_a_dataset_are_redacted(runner, tmp_path, no_env_secrets, kind, how):
    text, secret = _token(kind)
    task = tmp_path / "tasks" / "t-1"
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text('[metadata]\ntask_id = "t1"\nworld_id = "world_a"\n')
    (task / "instruction.md").write_text("Check the configuration.\n")
    (task / "tests" / "verifiers.json").write_text('[{"verifier_id": "v1", "criteria": "ok"}]')
    (task / "tests" / "test.sh").write_text("#!/bin/sh\nexit 0\n")
    (task / "tests" / "test.sh").chmod(0o755)
    (task / "tests" / "expected.json").write_text(_escaped(text)[how])
    ds = tmp_path / "ds"
    assert runner.invoke(app, ["tasks", "pack", str(task.parent), "-o", str(ds)]).exit_code == 0
    stage = tmp_path / "stage"
    args = ["publish", "dataset", str(ds), "--repo", "acme/d", "--dry-run"]
    res = runner.invoke(app, [*args, "--stage", str(stage)])
    assert res.exit_code == 0, res.output
    assert f"tests/expected.json: {kind} x1" in res.stderr, res.stderr
    staged = pq.read_table(next(stage.rglob("*.parquet"))).to_pylist()
    blob = staged[0]["task_binary"]
    from apexrl.artifacts.archive_extract import gunzip, tar_members

    members, bad = tar_members(gunzip(blob, "t"), "t")
    body = next(bytes(m.data) for m in members if m.name.endswith("tests/expected.json"))
    assert secret.encode() not in body and f"[REDACTED:{kind}]".encode() in body
    json.loads(body)
    assert runner.invoke(app, [*args, "--strict"]).exit_code == 1


def test_plain_words_next_to_escapes_stay(runner, tmp_path, no_env_secrets):
    """Decoding escapes finds no key in ordinary escaped text: snake_case after `\\n`,
    Windows paths, hyphenated words, a bearer of news."""
    content = json.dumps(
        {"stdout": "ok\nhf_hub_download_and_cache_the_file\n\tC:\\new\\table\\sk-tier-report"
         "\nthe bearer of the risk-adjusted-return-on-capital-figures\n"}
    )  # fmt: skip
    messages = [{"role": "tool", "tool_call_id": "c0", "content": json.dumps(content)}]
    run = _run(tmp_path / "run", messages=messages)
    res = _publish(runner, run, tmp_path / "stage", "--strict")
    assert res.exit_code == 0, res.output
    assert _staged_rows(tmp_path / "stage")[0]["messages"][0]["content"] == json.dumps(content)


@pytest.mark.parametrize("lead", ["", "x", "log line before it\n"])
def test_known_secret_at_the_very_end_of_bomless_utf16be(runner, tmp_path, no_env_secrets,
                                                         monkeypatch, lead):  # fmt: skip
    """A value no credential shape matches, known only from the environment, as the last
    code units of a UTF-16BE log without a BOM (no line break after it)."""
    secret = "q8Zr2LmN4pX7vB1cWt"
    monkeypatch.setenv("FMP_API_KEY", secret)
    run = _run(tmp_path / "run", logs={"server.log": (lead + secret).encode("utf-16-be")})
    res = _publish(runner, run, tmp_path / "stage")
    assert res.exit_code == 0, res.output
    found = "secret redacted: data row 0 (trial task_a.a0) agent/server.log: env:FMP_API_KEY x1"
    assert found in res.stderr, res.stderr
    _no_leak(tmp_path / "stage", secret)
    assert _publish(runner, run, tmp_path / "s2", "--strict").exit_code == 1


def test_escapes_map_back_to_whole_escapes():
    """A match in decoded text covers the raw escapes it came from, whole: what is left
    is still valid escaped text (the marker replaces the key, not half an escape)."""
    from apexrl.publish.redact import Redactor

    raw = json.dumps(json.dumps({"k": "\u00e9\nhf_abcdefghijklmnopqrstuvwxyzabcdefgh\t"}))
    out = Redactor().text(raw, "x")
    assert json.loads(json.loads(out))["k"] == "\u00e9\n[REDACTED:hf-token]\t"

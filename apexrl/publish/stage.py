"""Staging: turn a checkpoint, an eval run or a task dataset into a `Plan`.

A plan is the exact list of files that would be uploaded (path in the repo, local
file, size, sha256) plus the card. Every text file that leaves the machine is
redacted first and the redacted copy is written to the stage folder; large binary
files (weights, packed task shards without findings) are uploaded from where
they are.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from apexrl.artifacts.nofollow import is_regular, read_regular, read_tail, regular_files
from apexrl.errors import BadRecordError, UsageError
from apexrl.publish import cards
from apexrl.publish.checkpoint import INDEX, check_checkpoint
from apexrl.publish.models import PublishFile
from apexrl.publish.redact import Redactor

# Hub limits (FACTS.md section 9)
MAX_REPO_FILES = 100_000
MAX_FOLDER_FILES = 10_000

TOKENIZER_FILES = {
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
}
MODEL_FILES = {"config.json", "generation_config.json", INDEX} | TOKENIZER_FILES
TRAIN_FILES = ("recipe.toml", "apexrl_manifest.json", "manifest.json")  # from `apexrl train`
TEXT_SUFFIXES = (".json", ".jsonl", ".jinja", ".txt", ".toml", ".md", ".yaml", ".yml", ".py")
LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".json", ".jsonl")
LOG_TAIL = 64 * 1024
SHARD_BYTES = 256 * 1024 * 1024  # traces: target size of a Parquet shard


@dataclass
class PlanFile:
    path: str  # in the repo
    local: Path
    size: int
    sha256: str


@dataclass
class Plan:
    repo: str
    repo_type: str  # model | dataset
    private: bool
    revision: str
    card: str
    stage_dir: Path
    files: list[PlanFile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (local file, why)
    redactor: Redactor = field(default_factory=Redactor)

    @property
    def size_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def records(self, status: str = "planned") -> list[PublishFile]:
        return [
            PublishFile(
                path=f.path, size_bytes=f.size, sha256=f.sha256, source=str(f.local), status=status
            )
            for f in self.files
        ]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(8 * 1024 * 1024):
            h.update(chunk)
    return h.hexdigest()


def _finish(plan: Plan, entries: list[tuple[str, Path]]) -> Plan:
    """Hash the files (in parallel: hashlib releases the GIL), check Hub limits."""
    paths = [p for _, p in entries]
    with ThreadPoolExecutor(max_workers=4) as ex:
        digests = list(ex.map(sha256_file, paths))
    plan.files = sorted(
        (
            PlanFile(rp, lp, lp.stat().st_size, d)
            for (rp, lp), d in zip(entries, digests, strict=True)
        ),
        key=lambda f: f.path,
    )
    check_limits([f.path for f in plan.files])
    return plan


def check_limits(paths: list[str]) -> None:
    if len(paths) >= MAX_REPO_FILES:
        raise UsageError(
            f"{len(paths)} files: a Hub repo holds fewer than {MAX_REPO_FILES:,}",
            hint="pack small files into larger shards",
        )
    per = Counter(str(PurePosixPath(p).parent) for p in paths)
    folder, n = per.most_common(1)[0] if per else ("", 0)
    if n >= MAX_FOLDER_FILES:
        raise UsageError(
            f"folder {folder!r} would hold {n} files: a Hub folder holds fewer than "
            f"{MAX_FOLDER_FILES:,}",
            hint="use larger shards or spread files over subfolders",
        )


def _stage_text(plan: Plan, rel: str, data: bytes) -> Path:
    out = plan.stage_dir / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return out


def _redacted_copy(plan: Plan, rel: str, src: Path) -> Path:
    data = src.read_bytes()
    red = plan.redactor.bytes_text(data, rel)
    return _stage_text(plan, rel, red if red is not None else data)


# --- model ------------------------------------------------------------------------------


def stage_model(
    ckpt: Path,
    *,
    repo: str,
    stage_dir: Path,
    evals: list[Path] = (),
    base_model: str | None = None,
    private: bool = True,
    revision: str = "main",
    license: str | None = None,
    redactor: Redactor | None = None,
) -> Plan:
    ckpt = Path(ckpt)
    if not ckpt.is_dir():
        raise UsageError(f"checkpoint folder {ckpt} does not exist")
    info = check_checkpoint(ckpt)
    plan = Plan(repo, "model", private, revision, "", Path(stage_dir))
    if redactor is not None:
        plan.redactor = redactor
    entries: list[tuple[str, Path]] = []
    weights = set(info.weight_files)
    code = _remote_code(ckpt, info.config)
    for p in sorted(ckpt.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(ckpt).as_posix()
        if rel in weights:
            entries.append((rel, _weights_file(plan, rel, p)))
        elif rel in MODEL_FILES or rel in TRAIN_FILES or rel in code:
            entries.append((rel, _redacted_copy(plan, rel, p)))
        elif rel == "README.md":
            plan.skipped.append((str(p), "replaced by the generated model card"))
        else:
            plan.skipped.append(
                (str(p), "not part of a published checkpoint (weights, config, tokenizer)")
            )

    recipe = (ckpt / "recipe.toml").read_text() if (ckpt / "recipe.toml").is_file() else None
    manifest = None
    found = _find_manifest(ckpt)
    if found is not None:
        manifest = cards.read_json(found) or None
        if manifest and found.parent != ckpt:  # `apexrl train` writes it beside the checkpoints
            entries.append(
                ("apexrl_manifest.json", _redacted_copy(plan, "apexrl_manifest.json", found))
            )
    if base_model is None:
        base_model = _base_model(info.config, manifest)
    entries_eval = []
    for run_dir in evals:
        run_dir = Path(run_dir)
        summary = cards.read_json(run_dir / "summary.json")
        if not summary:
            raise UsageError(
                f"{run_dir}: no readable summary.json",
                hint="pass a finished `apexrl eval run` folder to --eval",
            )
        entry = cards.eval_entry(run_dir.name, summary, cards.read_json(run_dir / "run.json"))
        if entry is None:
            raise BadRecordError(f"{run_dir / 'summary.json'}", "has no pass_at_1 metric")
        entries_eval.append(entry)
    card = cards.model_card(
        repo=repo,
        config=info.config,
        base_model=base_model,
        license=license,
        evals=entries_eval,
        recipe=plan.redactor.text(recipe, "README.md") if recipe else None,
        manifest=plan.redactor.obj(manifest, "README.md") if manifest else None,
        n_params=info.n_params,
        chat_template_source=info.chat_template_source,
    )
    plan.card = plan.redactor.text(card, "README.md")
    entries.append(("README.md", _stage_text(plan, "README.md", plan.card.encode())))
    return _finish(plan, entries)


def _remote_code(ckpt: Path, config: dict) -> set[str]:
    """The modules a trust_remote_code checkpoint needs (named by config.json's auto_map)."""
    refs = config.get("auto_map") or {}
    names = set()
    for v in refs.values():
        for ref in v if isinstance(v, list) else [v]:
            if isinstance(ref, str) and "--" not in ref and "." in ref:  # "module.Class"
                names.add(ref.rsplit(".", 1)[0] + ".py")
    return {n for n in names if "/" not in n and (ckpt / n).is_file()}


def _weights_file(plan: Plan, rel: str, path: Path) -> Path:
    """The shard itself, or a copy with a redacted `__metadata__` when its header
    carries a secret (the tensor data is copied unchanged)."""
    from apexrl.publish.checkpoint import read_safetensors_header

    header, start = read_safetensors_header(path)
    meta = header.get("__metadata__")
    if not isinstance(meta, dict):
        return path
    red = plan.redactor.obj(meta, f"{rel} (__metadata__)")
    if red == meta:
        return path
    raw = json.dumps({**header, "__metadata__": red}, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    out = plan.stage_dir / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "rb") as src, open(out, "wb") as dst:
        dst.write(struct.pack("<Q", len(raw)) + raw)
        src.seek(start)
        shutil.copyfileobj(src, dst, 16 * 1024 * 1024)
    return out


def _find_manifest(ckpt: Path) -> Path | None:
    """apexrl_manifest.json in the checkpoint or up to three folders above it."""
    for d in [ckpt, *list(ckpt.resolve().parents)[:3]]:
        for name in (
            ("apexrl_manifest.json", "manifest.json") if d == ckpt else ("apexrl_manifest.json",)
        ):
            if (d / name).is_file():
                return d / name
    return None


def _base_model(config: dict, manifest: dict | None) -> str | None:
    m = manifest or {}
    for cand in (m.get("base_model"), m.get("model"), config.get("_name_or_path")):
        if isinstance(cand, str) and cand.count("/") == 1 and not cand.startswith((".", "/")):
            return cand
    return None


# --- traces -----------------------------------------------------------------------------


def _trace_schema(include_tokens: bool):
    import pyarrow as pa

    msg = pa.struct(
        [
            ("role", pa.string()),
            ("content", pa.string()),
            ("reasoning_content", pa.string()),
            ("tool_calls", pa.string()),
            ("tool_call_id", pa.string()),
            ("name", pa.string()),
        ]
    )
    crit = pa.struct(
        [
            ("id", pa.string()),
            ("criterion", pa.string()),
            ("met", pa.bool_()),
            ("score", pa.float64()),
            ("reason", pa.string()),
            ("source", pa.string()),
        ]
    )
    log = pa.struct([("name", pa.string()), ("text", pa.string())])
    fields = [
        ("trial_id", pa.string()),
        ("task_id", pa.string()),
        ("domain", pa.string()),
        ("world_id", pa.string()),
        ("attempt", pa.int32()),
        ("status", pa.string()),
        ("error_class", pa.string()),
        ("reward", pa.float64()),
        ("criteria_met", pa.int32()),
        ("criteria_total", pa.int32()),
        ("criteria", pa.list_(crit)),
        ("messages", pa.list_(msg)),
        ("turns", pa.int32()),
        ("tool_calls", pa.int32()),
        ("tokens_in", pa.int64()),
        ("tokens_out", pa.int64()),
        ("duration_s", pa.float64()),
        ("logs", pa.list_(log)),
    ]
    if include_tokens:
        fields += [("token_ids", pa.list_(pa.int32())), ("loss_mask", pa.list_(pa.int8()))]
    return pa.schema(fields)


def _text(v) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    if isinstance(v, list):  # content parts
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in v]
        return "".join(parts)
    return json.dumps(v, ensure_ascii=False)


def _messages(atif: dict) -> list[dict]:
    tito = (atif.get("extra") or {}).get("tito") or {}
    msgs = tito.get("messages")
    if not isinstance(msgs, list):
        from apexrl.tito.trajectory import _messages_from_atif

        msgs = _messages_from_atif(atif)
    out = []
    for m in msgs:
        if not isinstance(m, dict):
            continue
        calls = m.get("tool_calls")
        out.append(
            {
                "role": str(m.get("role") or ""),
                "content": _text(m.get("content")),
                "reasoning_content": _text(m.get("reasoning_content")),
                "tool_calls": json.dumps(calls, ensure_ascii=False) if calls else None,
                "tool_call_id": m.get("tool_call_id"),
                "name": m.get("name"),
            }
        )
    return out


def _tokens(path: Path) -> tuple[list[int], list[int]]:
    """Token ids and loss mask from tokens.jsonl: a TITO trajectory (one JSON document,
    possibly pretty-printed), or JSON lines of per-turn records {kind, token_ids}."""
    ids: list[int] = []
    mask: list[int] = []
    text = read_regular(path).decode("utf-8", "replace")
    try:
        whole = json.loads(text)
        records = [whole] if isinstance(whole, dict) else []
    except json.JSONDecodeError:
        try:
            records = [json.loads(x) for x in text.splitlines() if x.strip()]
        except json.JSONDecodeError as e:
            raise BadRecordError(str(path), f"not JSON lines: {e}") from None
    for rec in records:
        if not isinstance(rec, dict):
            continue
        if "prompt_ids" in rec:  # a whole TITO trajectory
            ids += rec["prompt_ids"]
            mask += [0] * len(rec["prompt_ids"])
            for t in rec.get("turns") or []:
                ids += t["token_ids"]
                mask += [1 if t.get("kind") == "sampled" else 0] * len(t["token_ids"])
        elif "token_ids" in rec:
            ids += rec["token_ids"]
            sampled = rec.get("kind") == "sampled" or "logprobs" in rec and rec["logprobs"]
            mask += [1 if sampled else 0] * len(rec["token_ids"])
    return ids, mask


_VERDICT_FILES = (
    "verifier/grading.json",
    "grading.json",
    "verdicts.json",
    "verifier/verdicts.json",
)


def _verdicts(row: dict, dirs: list[Path]) -> list[dict]:
    raw = row.get("verdicts")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raw = None
    if not isinstance(raw, list):
        raw = None
        found = [d / n for d in dirs for n in _VERDICT_FILES if is_regular(d / n)]
        if found:
            try:
                data = json.loads(read_regular(found[0]))
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise BadRecordError(str(found[0]), f"not readable JSON: {e}") from None
            raw = data.get("verdicts") if isinstance(data, dict) else data
    out = []
    for v in raw or []:
        if not isinstance(v, dict):
            continue
        met = v.get("met", v.get("passed"))
        score = v.get("score")
        out.append(
            {
                "id": _text(v.get("verifier_id") or v.get("id") or v.get("criterion_id")),
                "criterion": _text(v.get("criteria") or v.get("criterion")),
                "met": bool(met) if met is not None else None,
                "score": float(score) if isinstance(score, int | float) else None,
                "reason": _text(v.get("rationale") or v.get("reason") or v.get("explanation")),
                "source": _text(v.get("source")),
            }
        )
    return out


# published in their own columns (or too big for a log column)
_TRIAL_FILES = {
    "trajectory.json", "atif.json", "tokens.jsonl", "tito.json", "verdicts.json", "grading.json",
}  # fmt: skip


def _logs(dirs: list[Path]) -> list[dict]:
    out = []
    for d in dirs:
        if not d.is_dir():
            continue
        for p in regular_files(d):  # never a link the sandbox planted (/etc/shadow)
            if p.name in _TRIAL_FILES or not p.name.endswith(LOG_SUFFIXES):
                continue
            try:
                data = read_tail(p, LOG_TAIL)
            except OSError:  # swapped for a link since the walk: refused
                continue
            out.append(
                {
                    "name": p.relative_to(d).as_posix(),
                    "text": data.decode("utf-8", errors="replace"),
                }
            )
    return out


def _trial_id(row: dict, traj_root: Path) -> str:
    if row.get("trial_id"):
        return str(row["trial_id"])
    task, attempt = row.get("task_id"), row.get("attempt", 0)
    for cand in (f"{task}.a{attempt}", f"{task}__{attempt}", f"{task}.{attempt}"):
        if (traj_root / cand).is_dir():
            return cand
    return f"{task}.a{attempt}"


def _result_rows(run_dir: Path) -> list[dict]:
    """results.parquet; for a run killed before compaction, the results.jsonl journal
    (last row of a trial wins)."""
    import pyarrow.parquet as pq

    results = run_dir / "results.parquet"
    if results.is_file():
        return pq.read_table(results).to_pylist()
    journal = run_dir / "results.jsonl"
    if journal.is_file():
        rows: dict[str, dict] = {}
        for k, line in enumerate(journal.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a kill: the trial reruns on resume
            rows[str(row.get("trial_id") or k)] = row
        return list(rows.values())
    raise UsageError(
        f"{run_dir}: no results.parquet", hint="pass the folder written by `apexrl eval run`"
    )


def trace_rows(run_dir: Path, include_tokens: bool, red: Redactor) -> Iterator[dict]:
    traj_root = run_dir / "trajectories"
    for n, row in enumerate(_result_rows(run_dir)):
        tid = _trial_id(row, traj_root)
        where = f"data row {n} (trial {tid})"
        tdir = traj_root / tid
        messages: list[dict] = []
        tj = tdir / "trajectory.json"
        if is_regular(tj):
            try:
                messages = _messages(json.loads(read_regular(tj)))
            except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
                raise BadRecordError(str(tj), f"not a readable ATIF trajectory: {e}") from None
        out = {
            "trial_id": tid,
            "task_id": row.get("task_id"),
            "domain": row.get("domain"),
            "world_id": row.get("world_id"),
            "attempt": row.get("attempt"),
            "status": row.get("status"),
            "error_class": row.get("error_class"),
            "reward": row.get("reward"),
            "criteria_met": row.get("criteria_met"),
            "criteria_total": row.get("criteria_total"),
            "criteria": _verdicts(row, [tdir, run_dir / "logs" / tid]),
            "messages": messages,
            "turns": row.get("turns"),
            "tool_calls": row.get("tool_calls"),
            "tokens_in": row.get("tokens_in"),
            "tokens_out": row.get("tokens_out"),
            "duration_s": row.get("duration_s"),
            "logs": _logs([tdir, run_dir / "logs" / tid]),
        }
        out = red.obj(out, where)
        if include_tokens:
            tok = tdir / "tokens.jsonl"
            ids, mask = _tokens(tok) if is_regular(tok) else ([], [])
            out["token_ids"], out["loss_mask"] = ids, mask
        yield out


def _row_bytes(row: dict) -> int:
    return (
        len(json.dumps(row.get("messages")))
        + sum(len(x["text"]) for x in row.get("logs") or [])
        + 4 * len(row.get("token_ids") or [])
    )


def stage_traces(
    run_dir: Path,
    *,
    repo: str,
    stage_dir: Path,
    include_tokens: bool = False,
    private: bool = True,
    license: str | None = None,
    redactor: Redactor | None = None,
    shard_bytes: int = SHARD_BYTES,
) -> Plan:
    import pyarrow as pa
    import pyarrow.parquet as pq

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"run folder {run_dir} does not exist")
    plan = Plan(repo, "dataset", private, "main", "", Path(stage_dir))
    if redactor is not None:
        plan.redactor = redactor
    schema = _trace_schema(include_tokens)
    groups: list[list[dict]] = [[]]
    size = 0
    tmp_names: list[Path] = []
    data_dir = plan.stage_dir / "data"
    data_dir.mkdir(parents=True, exist_ok=True)

    def flush(group: list[dict]) -> None:
        path = data_dir / f".part-{len(tmp_names):05d}.parquet"
        pq.write_table(pa.Table.from_pylist(group, schema=schema), path, compression="zstd")
        tmp_names.append(path)

    n_rows = 0
    for row in trace_rows(run_dir, include_tokens, plan.redactor):
        b = _row_bytes(row)
        if groups[-1] and size + b > shard_bytes:
            flush(groups[-1])
            groups[-1] = []
            size = 0
        groups[-1].append(row)
        size += b
        n_rows += 1
    flush(groups[-1])
    entries: list[tuple[str, Path]] = []
    shards = []
    for i, p in enumerate(tmp_names):
        name = f"data/train-{i:05d}-of-{len(tmp_names):05d}.parquet"
        final = plan.stage_dir / name
        p.replace(final)
        shards.append(name)
        entries.append((name, final))
    run = plan.redactor.obj(cards.read_json(run_dir / "run.json"), "run.json")
    summary = plan.redactor.obj(cards.read_json(run_dir / "summary.json"), "summary.json")
    for name, obj in (("run.json", run), ("summary.json", summary)):
        if obj:
            text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
            entries.append((name, _stage_text(plan, name, text.encode())))
    card = cards.traces_card(
        repo=repo,
        run=run,
        summary=summary,
        n_rows=n_rows,
        shards=shards,
        include_tokens=include_tokens,
        license=license,
        n_redactions=plan.redactor.total,
    )
    plan.card = plan.redactor.text(card, "README.md")
    entries.append(("README.md", _stage_text(plan, "README.md", plan.card.encode())))
    return _finish(plan, entries)


# --- task dataset -----------------------------------------------------------------------


def _redact_task_binary(blob: bytes, where: str, red: Redactor) -> bytes | None:
    """The task tar with every text member redacted; None when nothing changed."""
    from apexrl.artifacts.archive import Entry, bytes_entry, gunzip, gzip_bytes, tar_bytes
    from apexrl.artifacts.archive import tar_members as parse

    members, bad = parse(gunzip(blob, where), where)
    if bad:
        raise BadRecordError(f"{where} member {bad[0][0]!r}", bad[0][1])
    changed = False
    entries: list[Entry] = []
    for m in members:
        if m.kind == "file":
            assert m.read is not None
            with m.read() as fh:
                data = fh.read()
            red_data = red.bytes_text(data, f"{where} {m.name}")
            if red_data is not None and red_data != data:
                changed = True
                data = red_data
            entries.append(bytes_entry(m.name, data, executable=bool(m.mode & 0o100)))
        else:
            entries.append(Entry(m.name, m.kind, linkname=m.linkname))
    if not changed:
        return None
    return gzip_bytes(tar_bytes(entries))


def stage_dataset(
    ds_dir: Path,
    *,
    repo: str,
    stage_dir: Path,
    private: bool = True,
    license: str | None = None,
    redactor: Redactor | None = None,
) -> Plan:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from apexrl.artifacts.models import DatasetRow
    from apexrl.tasks.dataset import MANIFEST, dataset_digest

    ds_dir = Path(ds_dir)
    man_path = ds_dir / MANIFEST
    if not man_path.is_file():
        raise UsageError(
            f"{ds_dir}: no {MANIFEST}", hint="pass a folder written by `apexrl tasks pack`"
        )
    manifest = cards.read_json(man_path)
    if not manifest or not isinstance(manifest.get("shards"), list):
        raise BadRecordError(str(man_path), "not a dataset manifest (no shards list)")
    plan = Plan(repo, "dataset", private, "main", "", Path(stage_dir))
    if redactor is not None:
        plan.redactor = redactor
    entries: list[tuple[str, Path]] = []
    rows_meta: list[DatasetRow] = []
    any_changed = False
    for shard in manifest["shards"]:
        src = ds_dir / shard
        if "/.." in f"/{shard}" or not src.is_file():
            raise BadRecordError(str(man_path), f"shard {shard!r} is missing")
        table = pq.read_table(src)
        rows = table.to_pylist()
        changed = False
        for i, row in enumerate(rows):
            where = f"{shard} row {i} ({row.get('path')})"
            new = _redact_task_binary(row["task_binary"], where, plan.redactor)
            if new is not None:
                changed = True
                row["task_binary"] = new
                row["sha256"] = hashlib.sha256(new).hexdigest()
                row["size_bytes"] = len(new)
            rows_meta.append(
                DatasetRow(
                    path=row["path"],
                    task_id=row.get("task_id"),
                    world_id=row.get("world_id"),
                    domain=row.get("domain"),
                    sha256=row.get("sha256"),
                    size_bytes=row.get("size_bytes") or 0,
                )
            )
        if changed:
            any_changed = True
            out = plan.stage_dir / shard
            out.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), out)
            entries.append((shard, out))
        else:
            entries.append((shard, src))
    if any_changed:
        manifest = {**manifest, "digest": dataset_digest(rows_meta)}
        text = json.dumps(manifest, sort_keys=False) + "\n"
        entries.append((MANIFEST, _stage_text(plan, MANIFEST, text.encode())))
    else:
        entries.append((MANIFEST, _redacted_copy(plan, MANIFEST, man_path)))
    card = cards.dataset_card(
        repo=repo,
        manifest=manifest,
        license=license,
        shards=list(manifest["shards"]),
        n_redactions=plan.redactor.total,
        scanned=dict(plan.redactor.scanned),
    )
    plan.card = plan.redactor.text(card, "README.md")
    entries.append(("README.md", _stage_text(plan, "README.md", plan.card.encode())))
    return _finish(plan, entries)


def clear_stage(stage_dir: Path) -> None:
    shutil.rmtree(stage_dir, ignore_errors=True)

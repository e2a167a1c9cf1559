"""The supervised warm start's data: the passed trials of `apexrl eval run` folders.

Any eval run is valid input. From each run folder this reads run.json (the model and
tokenizer that sampled it), the results (results.parquet or the journal) and, for every
trial kept, the agent's token record (trajectories/<trial>/tokens.jsonl: the TITO
trajectory the agent wrote). A trial is kept when it completed and passed (every criterion
met; the reward when it has none), or with `min_reward` when its reward reaches it
(rejection sampling). An example is the trial's exact token stream: the prompt, then every
turn; the loss mask is 1 on the tokens the model sampled and 0 on the prompt and on
observations (tool results), so training teaches the model's own tokens only.

Refused, naming the run or trial and the fix (BadRecordError, exit 1): a run with no kept
trial, a kept trial without a token record or with no sampled token, and a run whose
tokenizer is not the one of the model to train (compared by vocabulary, id by id).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from apexrl.errors import BadRecordError, UsageError

TOKEN_FILES = ("tokens.jsonl", "tito.json")  # as eval stores it; as the agent writes it


class SftSource(BaseModel):
    """One run the warm start learned from (recorded in the run's manifest)."""

    model_config = ConfigDict(extra="forbid")
    run_dir: str
    run_fingerprint: str | None = None  # run.json's identity hash
    dataset: str | None = None  # the tasks the run's trials ran on (run.json dataset.source)
    model: str | None = None  # the model that sampled the run
    tokenizer: str | None = None
    tokenizer_digest: str
    min_reward: float | None = None  # None: passed trials
    n_trials: int  # trials in the run
    trials: list[str] = Field(default_factory=list)  # the trial ids kept
    skipped: dict[str, int] = Field(default_factory=dict)  # why a trial was left out -> count
    tokens: int = 0  # tokens of the kept trials (prompt + turns)
    trained_tokens: int = 0  # of which sampled by the model


@dataclass
class SftExample:
    """One kept trial: its token stream and the loss mask over it (after the prompt)."""

    run_dir: str
    trial_id: str
    task_id: str
    reward: float
    prompt_ids: list[int]
    response_ids: list[int]
    loss_mask: list[int]

    @property
    def key(self) -> str:
        return f"{self.run_dir}::{self.trial_id}"

    @property
    def n_trained(self) -> int:
        return sum(self.loss_mask)


def tokenizer_digest(spec: str) -> str:
    """sha256 over a tokenizer's id -> token table (added tokens included): two tokenizers
    with the same digest turn the same ids into the same tokens."""
    from apexrl.tito.tokenizer import load_tokenizer

    vocab = load_tokenizer(spec).tk.get_vocab(with_added_tokens=True)
    blob = json.dumps(sorted((i, t) for t, i in vocab.items()), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()


def passed(row: dict) -> bool:
    """eval's pass rule (apexrl.eval.metrics.Columns.passed) for one results row."""
    if row.get("status") != "complete":
        return False
    total, met = int(row.get("criteria_total") or 0), int(row.get("criteria_met") or 0)
    if total > 0:
        return met >= total
    return float(row.get("reward") or 0.0) >= 1.0 - 1e-9


def _run_config(run_dir: Path):
    from apexrl.eval.models import RUN_FILE, EvalRunConfig

    path = run_dir / RUN_FILE
    if not path.is_file():
        raise UsageError(
            f"--from {run_dir}: not an eval run folder (no {RUN_FILE})",
            hint="pass a folder written by `apexrl eval run ... -o RUN_DIR`",
        )
    try:
        return EvalRunConfig.model_validate_json(path.read_bytes())
    except ValueError as e:
        raise BadRecordError(str(path), f"not a valid run.json ({e})") from None


def run_tokenizer(run_dir: Path, config) -> str:
    """The tokenizer the run's engine and agent used (run.json), as a load_tokenizer spec."""
    spec = config.tokenizer or config.model.path or config.model.name
    if not spec:
        raise BadRecordError(
            str(run_dir / "run.json"),
            "records no tokenizer and no model: its token ids cannot be checked",
            hint="rerun the eval with --tokenizer (or a local MODEL)",
        )
    return spec


def _token_record(run_dir: Path, trial_id: str):
    """The trial's TitoTrajectory from trajectories/<trial_id>/ (sandbox-written: read
    without following links), or None when it has none."""
    from apexrl.artifacts.nofollow import RefusedPath
    from apexrl.eval.models import TRAJECTORIES_DIR
    from apexrl.tito.trajectory import TitoTrajectory, last_token_record

    folder = run_dir / TRAJECTORIES_DIR / trial_id
    for name in TOKEN_FILES:
        path = folder / name
        try:
            data = last_token_record(path)
        except RefusedPath as e:
            raise BadRecordError(str(path), f"refused: {e}") from None
        if data is None:
            continue
        try:
            return TitoTrajectory.model_validate(data)
        except ValueError as e:
            raise BadRecordError(str(path), f"not a valid token record ({e})") from None
    return None


def example_from(run_dir: Path, row: dict, traj) -> SftExample:
    """The trial's stream: prompt, then each turn (sampled: mask 1; observation: mask 0);
    observations after the last sampled turn are dropped (nothing to learn after them)."""
    turns = list(traj.turns)
    while turns and turns[-1].kind == "observation":
        turns.pop()
    resp: list[int] = []
    mask: list[int] = []
    for t in turns:
        resp.extend(t.token_ids)
        mask.extend([1 if t.kind == "sampled" else 0] * len(t.token_ids))
    return SftExample(
        run_dir=str(run_dir),
        trial_id=row["trial_id"],
        task_id=row.get("task_id") or "",
        reward=float(row.get("reward") or 0.0),
        prompt_ids=list(traj.prompt_ids),
        response_ids=resp,
        loss_mask=mask,
    )


def read_run(
    run_dir: str | Path,
    *,
    model_digest: str,
    vocab_size: int | None,
    min_reward: float | None = None,
) -> tuple[SftSource, list[SftExample]]:
    """The kept trials of one eval run, checked against the model to train (its tokenizer
    digest and vocabulary size)."""
    from apexrl.eval.resume import read_results_table

    run = Path(run_dir).expanduser().resolve()
    if not run.is_dir():
        raise UsageError(f"--from {run_dir}: no such folder")
    config = _run_config(run)
    rows = read_results_table(run).to_pylist()
    skipped: dict[str, int] = {}
    kept_rows = []
    for row in sorted(rows, key=lambda r: r["trial_id"]):
        if row.get("status") != "complete":
            why = f"status {row.get('status')}"
        elif min_reward is None:
            why = None if passed(row) else "not passed"
        else:
            why = None if float(row.get("reward") or 0.0) >= min_reward else "below min reward"
        if why:
            skipped[why] = skipped.get(why, 0) + 1
        else:
            kept_rows.append(row)
    if not kept_rows:
        rule = "passed" if min_reward is None else f"with reward >= {min_reward}"
        seen = ", ".join(f"{k}: {v}" for k, v in sorted(skipped.items())) or "no trials"
        raise BadRecordError(
            str(run),
            f"no trial {rule} ({len(rows)} trial(s); {seen}): nothing to learn from",
            hint="evaluate a stronger teacher into this run, pass another --from run, "
            "or lower --min-reward",
        )
    examples = []
    for row in kept_rows:
        tid = row["trial_id"]
        traj = _token_record(run, tid)
        where = f"{run} trial {tid}"
        if traj is None:
            raise BadRecordError(
                where,
                "kept, but has no token stream (trajectories/"
                f"{tid}/tokens.jsonl): its agent recorded no TITO tokens (e.g. the oracle)",
                hint="learn from runs of `apexrl eval run` with the apexrl agent (it records "
                "the token stream): leave this run out of --from",
            )
        ex = example_from(run, row, traj)
        if not ex.n_trained:
            raise BadRecordError(
                where,
                "its token stream has no token the model sampled: nothing to learn from",
                hint="check the run's trajectories (apexrl eval show), or leave this run out",
            )
        examples.append(ex)
    spec = run_tokenizer(run, config)
    try:
        digest = tokenizer_digest(spec)
    except UsageError as e:
        raise BadRecordError(
            str(run / "run.json"),
            f"the run's tokenizer {spec!r} cannot be loaded here ({e})",
            hint="make the run's tokenizer (or model folder) available at that path",
        ) from None
    if digest != model_digest:
        raise BadRecordError(
            str(run),
            f"the run was sampled with tokenizer {spec!r}, which is not the tokenizer of the "
            "model to train (their vocabularies differ): its token ids mean other tokens",
            hint="train the model the run was sampled from (or one sharing its tokenizer), "
            "or evaluate a teacher that uses the model's tokenizer",
        )
    for ex in examples:
        top = max([*ex.prompt_ids, *ex.response_ids])
        if vocab_size is not None and top >= vocab_size:
            raise BadRecordError(
                f"{run} trial {ex.trial_id}",
                f"token id {top} is outside the model's vocabulary ({vocab_size})",
                hint="train a model with the run's tokenizer and embedding size",
            )
    source = SftSource(
        run_dir=str(run),
        run_fingerprint=config.fingerprint(),
        dataset=config.dataset.source,
        model=config.model.name or config.model.path,
        tokenizer=spec,
        tokenizer_digest=digest,
        min_reward=min_reward,
        n_trials=len(rows),
        trials=[e.trial_id for e in examples],
        skipped=skipped,
        tokens=sum(len(e.prompt_ids) + len(e.response_ids) for e in examples),
        trained_tokens=sum(e.n_trained for e in examples),
    )
    return source, examples


def model_tokenizer(model: str | Path, tokenizer: str | None = None) -> tuple[str, int | None]:
    """(tokenizer spec, vocabulary size or None) of the model to train: a checkpoint folder
    (its tokenizer files and config.json), or an id whose tokenizer load_tokenizer finds."""
    folder = Path(model).expanduser()
    if (folder / "config.json").is_file():
        cfg = json.loads((folder / "config.json").read_text("utf-8"))
        size = cfg.get("vocab_size") or (cfg.get("text_config") or {}).get("vocab_size")
        return tokenizer or str(folder.resolve()), int(size) if size else None
    return tokenizer or str(model), None


def read_runs(
    run_dirs: list[str],
    *,
    model: str | Path,
    tokenizer: str | None = None,
    min_reward: float | None = None,
) -> tuple[list[SftSource], list[SftExample]]:
    """Every run's kept trials (a run given twice is read once), checked against the model
    to train (`tokenizer`: its tokenizer when it is not the model's own)."""
    if not run_dirs:
        raise UsageError("no --from run", hint="pass --from RUN_DIR (an `apexrl eval run` folder)")
    spec, vocab_size = model_tokenizer(model, tokenizer)
    try:
        model_digest = tokenizer_digest(spec)
    except UsageError as e:
        raise UsageError(
            f"model {model}: its tokenizer cannot be loaded ({e})",
            hint="the model folder needs tokenizer.json (a Hugging Face checkpoint folder)",
        ) from None
    sources: list[SftSource] = []
    examples: list[SftExample] = []
    seen: set[Path] = set()
    for d in run_dirs:
        p = Path(d).expanduser().resolve()
        if p in seen:
            continue
        seen.add(p)
        src, exs = read_run(
            p, model_digest=model_digest, vocab_size=vocab_size, min_reward=min_reward
        )
        sources.append(src)
        examples.extend(exs)
    return sources, examples

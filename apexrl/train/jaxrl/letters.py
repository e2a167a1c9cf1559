"""A synthetic task set a tiny random Qwen3 can learn on CPU, and the tiny model for it.

Why: a random-weight Qwen3 over the real 151,669-token vocabulary never ends a reply
(`<|im_end|>` has a ~1/150k chance per token), so every trial ends `length` with
reward 0, every GRPO group has zero variance and nothing is learned. The design:

- Tasks ("letters"): one world (`files` app only: a short tool list, ~0.5k-token
  prompts) and one task per target letter: "Reply with one word that contains the
  letter q." The rubric has one deterministic criterion, `contains` that letter
  (apexrl's own grader, no judge); the reward is the fraction met (0 or 1).
- Model: a tiny Qwen3 (untied embeddings) with a built-in prior over a 16-word reply
  vocabulary plus `<|im_end|>`: every token embedding carries a constant feature
  (dimension 0) that survives the residual stream, and the output rows of the reply
  words and of `<|im_end|>` read it, so a reply is a few of those words and then ends.
  Each word is one Qwen3 token; 4 of the 16 contain `q`, 3 `z`, 2 `x`, 3 `k`, so a
  random reply meets a task's criterion roughly 15-35% of the time: GRPO groups have
  variance from the first step and a policy that picks the right word per letter
  reaches 1.0.
- What RL must learn: which words to say (recipes/smoke-cpu.toml trains a LoRA adapter
  of the output layer: a reply may chain several words, so one reply such as
  "quizfoxking" meets every task's criterion). The curve's start is the prior's mean
  reward; its end shows how far the policy moved toward the right words.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

REPLY_WORDS = (
    "quiz",
    "queen",
    "quick",
    "quit",
    "zero",
    "zone",
    "box",
    "fox",
    "sky",
    "king",
    "lamp",
    "moon",
    "river",
    "stone",
    "tree",
    "water",
)
LETTERS = ("q", "z", "x", "k")
STOP_TOKEN = "<|im_end|>"


def _hex(*parts: object) -> str:
    return hashlib.sha256("/".join(["apexrl-letters", *map(str, parts)]).encode()).hexdigest()[:32]


def write_letters_source(out: Path, letters: tuple[str, ...] = LETTERS) -> Path:
    """The task set in the APEX-Agents layout (convert it with `apexrl tasks convert`)."""
    from apexrl.artifacts.atomic import atomic_dir
    from apexrl.tasks.example_data.formats import json_bytes, zip_bytes

    world_id = f"world_{_hex('world')}"
    readme = (
        "# Word list\n\nAnswer with one word from this list:\n\n"
        + "\n".join(f"- {w}" for w in REPLY_WORDS)
        + "\n"
    )
    world = {
        "world_id": world_id,
        "world_name": "Letters",
        "world_description": "A one-file world for the letters task set.",
        "apps": ["files"],
    }
    tasks = []
    for letter in letters:
        tid = f"task_{_hex('task', letter)}"
        tasks.append(
            {
                "task_id": tid,
                "task_name": f"Letters_{letter.upper()}",
                "domain": "Management Consulting",
                "world_id": world_id,
                "prompt": f"Reply with one word that contains the letter {letter}.",
                "task_input_files": None,
                "rubric": [
                    {
                        "verifier_id": f"ver_{_hex(tid, 0)}",
                        "criteria": f"The answer contains the letter {letter}.",
                        "check": {"kind": "contains", "value": letter},
                    }
                ],
                "expected_output": None,
                "gold_response": next(w for w in REPLY_WORDS if letter in w),
                "gold_response_type": "text",
            }
        )
    files = {
        "tasks_and_rubrics.json": json_bytes(tasks),
        "world_descriptions.json": json_bytes([world]),
        f"world_files_zipped/{world_id}.zip": zip_bytes(
            {
                "filesystem/README.md": readme.encode(),
                # the world's own apps list: the local sandbox serves only these tools
                "world.json": json.dumps({"world_id": world_id, "apps": ["files"]}).encode(),
            }
        ),
    }
    with atomic_dir(Path(out), force=True) as tmp:
        for rel, data in sorted(files.items()):
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
    return Path(out)


def write_letters_tasks(root: Path, letters: tuple[str, ...] = LETTERS) -> tuple[Path, Path]:
    """Source + converted Harbor task dirs: (tasks_dir, worlds_dir)."""
    from apexrl.tasks.apex import load_source
    from apexrl.tasks.convert import convert_all

    src = write_letters_source(Path(root) / "letters-src", letters)
    tasks = Path(root) / "letters-tasks"
    outs = list(convert_all(load_source(src, strict=True), tasks, {}, strict=True))
    bad = [o.error for o in outs if o.error is not None]
    if bad:
        raise bad[0]
    return tasks, src / "world_files_zipped"


def write_prior_model(
    out: Path,
    *,
    seed: int = 0,
    words: tuple[str, ...] = REPLY_WORDS,
    word_logit: float = 20.0,
    stop_logit: float = 21.5,
    max_position_embeddings: int = 4096,
) -> Path:
    """A tiny Qwen3 (untied embeddings, bundled Qwen3 tokenizer) whose replies are a few
    words of `words` then `<|im_end|>` (see the module doc)."""
    import torch
    from tokenizers import Tokenizer

    from apexrl.engine.tiny import random_qwen3, save_checkpoint
    from apexrl.tito.tokenizer import bundled_qwen3_dir

    tdir = bundled_qwen3_dir()
    tk = Tokenizer.from_file(str(tdir / "tokenizer.json"))
    ids = []
    for w in words:
        enc = tk.encode(w, add_special_tokens=False).ids
        if len(enc) != 1:
            raise ValueError(f"reply word {w!r} is {len(enc)} tokens; each must be one")
        ids.append(enc[0])
    stop = tk.token_to_id(STOP_TOKEN)
    model = random_qwen3(
        tdir,
        seed=seed,
        eos_token_id=stop,
        tie_word_embeddings=False,
        max_position_embeddings=max_position_embeddings,
    )
    with torch.no_grad():
        emb = model.model.embed_tokens.weight
        emb[:, 0] = 1.0  # the constant feature every position carries
        head = model.lm_head.weight
        head[:, 0] = 0.0
        # after the final RMSNorm the constant feature is ~sqrt(hidden) = 8
        scale = float(model.config.hidden_size) ** 0.5
        head[ids, 0] = word_logit / scale
        head[stop, 0] = stop_logit / scale
    prior = {"words": list(words), "word_ids": ids, "stop_id": stop}
    return save_checkpoint(
        model,
        tdir,
        Path(out),
        force=True,
        files={"apexrl_prior.json": json.dumps(prior, indent=1).encode()},
    )

"""What a warm start has learned, token by token (docs/training.md, Follow-up 4).

    python -m tests.acting_probe MODEL TEACHER_RUN [--trials 40] [--attention] [--ceiling]

For the first trials the teacher passed, the model's log-probability and top-1 hit on each
trained token, split into the *copy* tokens (a file name or a code of the tool-use family:
words only the prompt or a tool result holds) and the rest; with --attention, the mean
attention weight each layer's heads put on the token to copy. MODEL is an exported
checkpoint (`apexrl train export`); run it with the train venv's Python (torch).

With --ceiling, the best mean log-probability the model's output layer can give each of
the k first codes at once (k = 2, 8, 32), over every final hidden state it can reach: the
final RMSNorm fixes |h| at sqrt(hidden) x its gain, which a LoRA adapter does not train.
A random tied output layer that cannot spread its mass over the 32 codes (ln 32 = 3.47)
cannot be unsure which code comes next, and the first steps of a copy circuit are that.
"""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> None:
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    from apexrl.tasks.tooluse import NAMES, VALUES
    from apexrl.train.sft_data import read_runs

    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("run")
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--attention", action="store_true")
    ap.add_argument("--ceiling", action="store_true")
    a = ap.parse_args(argv)
    if a.ceiling:
        print_ceiling(a.model)
    words = set(NAMES) | set(VALUES)
    tk = Tokenizer.from_file(f"{a.model}/tokenizer.json")
    _, examples = read_runs([a.run], model=a.model)
    impl = "eager" if a.attention else None
    model = AutoModelForCausalLM.from_pretrained(a.model, attn_implementation=impl).eval()
    stats = {"copy": [0, 0.0, 0], "other": [0, 0.0, 0]}
    mass, events = None, 0
    with torch.no_grad():
        for ex in examples[: a.trials]:
            ids = ex.prompt_ids + ex.response_ids
            out = model(torch.tensor([ids]), output_attentions=a.attention)
            logp = torch.log_softmax(out.logits[0].float(), -1)
            for i, (tok, w) in enumerate(zip(ex.response_ids, ex.loss_mask, strict=True)):
                if not w:
                    continue
                pos = len(ex.prompt_ids) + i - 1  # the position that predicts this token
                copy = tk.decode([tok]).strip().strip("/") in words
                s = stats["copy" if copy else "other"]
                s[0] += 1
                s[1] += logp[pos, tok].item()
                s[2] += int(logp[pos].argmax().item() == tok)
                sources = [j for j in range(pos + 1) if ids[j] == tok]
                if a.attention and copy and sources:
                    m = torch.stack([x[0, :, pos, sources].sum(-1) for x in out.attentions])
                    mass = m if mass is None else mass + m
                    events += 1
    for kind, (n, lp, hit) in stats.items():
        print(f"{kind}: {n} tokens, mean logprob {lp / max(n, 1):.3f}, top-1 {hit / max(n, 1):.1%}")
    if mass is not None:
        print(f"attention on the token to copy ({events} events), layer x head:")
        print((mass / events).numpy().round(3))


def print_ceiling(model_dir: str) -> None:
    import math

    import torch
    from safetensors import safe_open
    from tokenizers import Tokenizer

    from apexrl.tasks.tooluse import VALUES

    tk = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    with safe_open(f"{model_dir}/model.safetensors", "pt") as f:
        keys = set(f.keys())
        out = f.get_tensor(
            "lm_head.weight" if "lm_head.weight" in keys else "model.embed_tokens.weight"
        )
        gain = f.get_tensor("model.norm.weight")
    ids = torch.tensor([tk.encode(v).ids[0] for v in VALUES])
    scale = math.sqrt(out.shape[1])
    for k in (2, 8, 32):
        x = out[ids[:k]].sum(0).clone().requires_grad_(True)
        opt = torch.optim.Adam([x], lr=0.05)
        for _ in range(150):
            h = gain * (x / x.norm() * scale)
            lp = torch.log_softmax(out @ h, -1)[ids[:k]].mean()
            opt.zero_grad()
            (-lp).backward()
            opt.step()
        print(f"ceiling k={k}: best mean logprob {lp.item():.2f} (uniform {-math.log(k):.2f})")


if __name__ == "__main__":
    main()

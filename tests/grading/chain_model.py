"""A tiny Qwen3 checkpoint whose weights make greedy decoding write one fixed reply.

Every attention and MLP block writes zero into the residual stream (o_proj and
down_proj are zero), so the logits at a position depend on that position's token
alone: a bigram model. The tokens of the reply get orthogonal embeddings and the
(untied) LM head maps each one to the next: after the chat template's generation
prompt the model writes REPLY, then <|im_end|>. A real checkpoint served by the real
local engine, for tests that need a judge (or an agent) that answers in a known way.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from apexrl.engine.tiny import TOKENIZER_FILES
from apexrl.tito.tokenizer import bundled_qwen3_dir, load_tokenizer

HIDDEN = 64


def make_chain_checkpoint(out: Path, reply: str) -> Path:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tdir = bundled_qwen3_dir()
    tok = load_tokenizer(str(tdir))
    text = tok.apply_chat_template([{"role": "user", "content": "x"}], add_generation_prompt=True)
    start = tok.encode(text)[-1]
    end = tok.token_to_id("<|im_end|>")
    chain = [start, *tok.encode(reply), end]
    if len(set(chain)) != len(chain) or len(chain) > HIDDEN:
        raise ValueError(f"reply {reply!r}: its tokens must be distinct and fewer than {HIDDEN}")
    config = Qwen3Config(
        vocab_size=tok.vocab_size,
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=HIDDEN // 4,
        max_position_embeddings=32768,
        tie_word_embeddings=False,
        eos_token_id=end,
        bos_token_id=None,
        pad_token_id=tok.token_to_id("<|endoftext|>"),
    )
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config).to(torch.float32).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        emb = model.model.embed_tokens.weight
        emb.normal_(0.0, 0.02)
        head = model.lm_head.weight
        head.zero_()
        for j, t in enumerate(chain):
            emb[t].zero_()
            emb[t, j] = 1.0
        for j in range(len(chain) - 1):
            head[chain[j + 1], j] = 10.0
    out = Path(out)
    model.save_pretrained(out, safe_serialization=True)
    for name in TOKENIZER_FILES:
        if (tdir / name).is_file():
            shutil.copyfile(tdir / name, out / name)
    return out

"""Fixed-base observation tokenization.

To turn new tool messages into tokens without re-rendering the history, render a
fixed dummy conversation (the base) alone and followed by the new messages (with
the generation prompt), and keep the token suffix after the base: O(1) in the
history length.

Stop-token overlap:
- ChatML/Qwen: the template writes `<|im_end|>\\n` after every turn but the model
  stops at `<|im_end|>` and never generates the `\\n`. The suffix is re-anchored at
  the base's last stop token, so the observation starts with that `\\n`.
- GLM-style: the model's stop token (`<|observation|>`) is also the first token the
  template writes for a tool turn; when the stream already ends with it, the
  duplicate is dropped.
If the model's turn ended without a stop token (cut at max_tokens), the stop
token is inserted so the stream matches a full render.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from apexrl.tito.tokenizer import Tokenizer
from apexrl.tito.workers import off_loop

# Tokens a chat model stops at (ChatML/Qwen, GLM, Llama 3, generic EOS names).
STOP_TOKEN_STRINGS = (
    "<|im_end|>",
    "<|endoftext|>",
    "<|observation|>",
    "<|user|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end|>",
    "</s>",
)

DEFAULT_BASE: tuple[dict, ...] = (
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "I am a user."},
)


# (tokenizer id, template, base, kwargs, stop ids) -> (tokenizer, base_text, base_ids,
# anchor, anchor_stop, anchored_text); the tokenizer is kept so its id is not reused
_BASES: dict[tuple, tuple] = {}


class TemplateNotPrefixPreserving(ValueError):
    """The template renders the base differently once messages follow it."""


def stop_token_ids(tok: Tokenizer, extra: Iterable[str] = ()) -> set[int]:
    ids = set()
    for s in (*STOP_TOKEN_STRINGS, *(extra or ()), tok.eos_token or ""):
        i = tok.token_to_id(s) if s else None
        if i is not None:
            ids.add(i)
    return ids


class ObservationTokenizer:
    """Tokenizes observation messages (tool results) as a suffix of a fixed base."""

    def __init__(
        self,
        tok: Tokenizer,
        *,
        chat_template: str | None = None,
        base: Sequence[dict] = DEFAULT_BASE,
        template_kwargs: dict[str, Any] | None = None,
        stop_ids: set[int] | None = None,
    ) -> None:
        self.tok = tok
        self.chat_template = chat_template or tok.chat_template
        self.base = [dict(m) for m in base]
        self.kwargs = dict(template_kwargs or {})
        self.stop_ids = stop_ids if stop_ids is not None else stop_token_ids(tok)
        key = (
            id(tok),
            self.chat_template,
            json.dumps(self.base, sort_keys=True, default=str),
            json.dumps(self.kwargs, sort_keys=True, default=str),
            tuple(sorted(self.stop_ids)),
        )
        hit = _BASES.get(key)
        if hit is None or hit[0] is not tok:
            hit = (tok, *self._base())
            if len(_BASES) >= 32:  # a few tokenizer/template pairs per process
                _BASES.pop(next(iter(_BASES)))
            _BASES[key] = hit
        _, self.base_text, self.base_ids, self.anchor, self.anchor_stop, self.anchored_text = hit

    def _base(self) -> tuple[str, list[int], int, int | None, str | None]:
        """The base's text and ids and the re-anchor point (the same for every session
        with this tokenizer and template: computed once per process)."""
        tok = self.tok
        base_text = self._render(self.base, add_generation_prompt=False)
        base_ids = tok.encode(base_text)
        # Re-anchor: when the base ends with a stop token followed only by
        # whitespace (ChatML `<|im_end|>\n`), the suffix starts right after it.
        anchor = len(base_ids)
        anchor_stop: int | None = None
        for j in range(len(base_ids) - 1, -1, -1):
            if base_ids[j] in self.stop_ids:
                tail = tok.decode(base_ids[j + 1 :])
                if tail.strip() == "":
                    anchor = j + 1
                    anchor_stop = base_ids[j]
                break
        anchored = tok.decode(base_ids[:anchor]) if anchor < len(base_ids) else None
        return base_text, base_ids, anchor, anchor_stop, anchored

    def _render(self, messages: list[dict], *, add_generation_prompt: bool) -> str:
        return self.tok.apply_chat_template(
            messages,
            add_generation_prompt=add_generation_prompt,
            chat_template=self.chat_template,
            **self.kwargs,
        )

    def _suffix_text(
        self, messages: Sequence[dict], add_generation_prompt: bool
    ) -> tuple[str, bool]:
        """(text to encode, anchored): the new text after the base, or the whole render
        when the anchored base is not its prefix."""
        text = self._render([*self.base, *messages], add_generation_prompt=add_generation_prompt)
        if not text.startswith(self.base_text):
            raise TemplateNotPrefixPreserving(
                "the chat template renders the fixed base differently when messages follow it; "
                "fixed-base observation tokenization cannot be used with this template"
            )
        # Encode only the new text: the base ends at a special token or the
        # re-anchored whitespace, so the split cannot change merges.
        anchored_text = self.anchored_text
        if anchored_text is not None and text.startswith(anchored_text):
            return text[len(anchored_text) :], True
        return text, False

    def _suffix_of(self, ids: list[int], anchored: bool) -> list[int]:
        if anchored:
            return ids
        if ids[: self.anchor] != self.base_ids[: self.anchor]:
            raise TemplateNotPrefixPreserving(
                "the base tokenizes differently once messages follow it (merge across the boundary)"
            )
        return ids[self.anchor :]

    def suffix_ids(
        self, messages: Sequence[dict], *, add_generation_prompt: bool = True
    ) -> list[int]:
        """Token ids the template adds after the base for `messages` (anchored)."""
        text, anchored = self._suffix_text(messages, add_generation_prompt)
        return self._suffix_of(self.tok.encode(text), anchored)

    def _join(self, ids: list[int], last_token: int | None) -> list[int]:
        if ids and last_token is not None and last_token in self.stop_ids and ids[0] == last_token:
            ids = ids[1:]  # GLM-style: the stop token the model emitted opens the turn
        elif (
            self.anchor_stop is not None
            and last_token is not None
            and last_token not in self.stop_ids
        ):
            ids = [self.anchor_stop, *ids]  # the model's turn was cut: close it
        return ids

    def tokenize(
        self,
        messages: Sequence[dict],
        *,
        last_token: int | None,
        add_generation_prompt: bool = True,
    ) -> list[int]:
        """Ids to append to a stream ending with `last_token` for these messages."""
        ids = self.suffix_ids(messages, add_generation_prompt=add_generation_prompt)
        return self._join(ids, last_token)

    async def atokenize(
        self,
        messages: Sequence[dict],
        *,
        last_token: int | None,
        add_generation_prompt: bool = True,
    ) -> list[int]:
        """`tokenize` for an event loop shared by many trials: the render (short Python
        work) runs here, the encode (long; the tokenizer releases the GIL) in a tokenize
        thread (apexrl.tito.workers), so the loop neither blocks on it nor fights it for the GIL."""
        text, anchored = self._suffix_text(messages, add_generation_prompt)
        ids = await off_loop(self.tok.encode_off_loop, text)
        return self._join(self._suffix_of(ids, anchored), last_token)

"""The token state of one trajectory: append-only ids, loss mask and logprobs.

The initial prompt and observations get mask 0; sampled tokens get mask 1 and
the engine's logprobs. The three lists always have the same length; every
mutation checks it. Segments remember which part of the stream came from where.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

SegmentKind = Literal["prompt", "sampled", "observation"]


class TokenStateError(ValueError):
    """The token state would break an invariant (a bug in the caller)."""


@dataclass(frozen=True)
class Segment:
    kind: SegmentKind
    start: int
    end: int


@dataclass
class TokenState:
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def prompt_len(self) -> int:
        s = self.segments
        return s[0].end if s and s[0].kind == "prompt" else 0

    @property
    def last_token(self) -> int | None:
        return self.ids[-1] if self.ids else None

    def _push(self, kind: SegmentKind, ids: Sequence[int], mask: int, lps: Sequence[float]) -> None:
        ids = [int(i) for i in ids]
        if any(i < 0 for i in ids):
            raise TokenStateError(f"negative token id in {kind} segment")
        if len(lps) != len(ids):
            raise TokenStateError(
                f"{kind}: {len(ids)} token ids but {len(lps)} logprobs; they must align"
            )
        start = len(self.ids)
        self.ids.extend(ids)
        self.mask.extend([mask] * len(ids))
        self.logprobs.extend(float(x) for x in lps)
        if ids:
            self.segments.append(Segment(kind, start, len(self.ids)))
        self.check()

    def set_prompt(self, ids: Sequence[int]) -> None:
        if self.ids:
            raise TokenStateError("the prompt can only be set on an empty state")
        if not ids:
            raise TokenStateError("the prompt is empty")
        self._push("prompt", ids, 0, [0.0] * len(ids))

    def append_sampled(self, ids: Sequence[int], logprobs: Sequence[float] | None) -> None:
        if not self.ids:
            raise TokenStateError("set the prompt before appending sampled tokens")
        if logprobs is None:
            raise TokenStateError("sampled tokens need their logprobs (ask the engine for them)")
        self._push("sampled", ids, 1, logprobs)

    def append_observation(self, ids: Sequence[int]) -> None:
        if not self.ids:
            raise TokenStateError("set the prompt before appending observations")
        self._push("observation", ids, 0, [0.0] * len(ids))

    def check(self) -> None:
        n = len(self.ids)
        if len(self.mask) != n or len(self.logprobs) != n:
            raise TokenStateError(
                f"token state out of alignment: {n} ids, {len(self.mask)} mask, "
                f"{len(self.logprobs)} logprobs"
            )
        pos = 0
        for seg in self.segments:
            if seg.start != pos or seg.end <= seg.start:
                raise TokenStateError(f"segments do not tile the stream at {pos}")
            pos = seg.end
        if pos != n:
            raise TokenStateError(f"segments cover {pos} of {n} tokens")

    # --- views for the trainer (SkyRL: prompt ids, response ids, loss mask, logprobs)
    @property
    def prompt_ids(self) -> list[int]:
        return self.ids[: self.prompt_len]

    @property
    def response_ids(self) -> list[int]:
        return self.ids[self.prompt_len :]

    @property
    def response_mask(self) -> list[int]:
        return self.mask[self.prompt_len :]

    @property
    def response_logprobs(self) -> list[float]:
        return self.logprobs[self.prompt_len :]

    def sampled_positions(self) -> list[int]:
        return [i for i, m in enumerate(self.mask) if m]

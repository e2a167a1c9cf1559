"""The token state of one trajectory: append-only ids, loss mask and logprobs.

The initial prompt and observations get mask 0; sampled tokens get mask 1 and
the engine's logprobs. The three columns always have the same length; every
mutation checks it. Segments remember which part of the stream came from where.

Storage is compact: `array('i')` ids (4 bytes a token), `array('b')` mask (1 byte)
and `array('d')` logprobs (8 bytes, the same doubles the engine sent), not Python
lists (~36 bytes a token each for ids and logprobs). At the recipe's scale (550
trajectories of ~100k tokens held at once) that is ~0.7 GB instead of several GB.
`ids`, `mask` and `logprobs` are those arrays (sequences: index, slice, len, iterate;
`list(...)` or `.tolist()` for a list); the trainer views return lists.
"""

from __future__ import annotations

import sys
from array import array
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


def int_array(ids: Sequence[int]) -> array:
    """Token ids as array('i'); raises TokenStateError for ids that are not token ids."""
    if isinstance(ids, array) and ids.typecode == "i":
        out = array("i", ids)
    else:
        try:
            out = array("i", ids)
        except TypeError:  # e.g. numpy ints or bools: go through int()
            out = array("i", [int(i) for i in ids])
        except OverflowError as e:
            raise TokenStateError(f"token id out of range: {e}") from e
    if out and _has_negative(out):
        raise TokenStateError("negative token id")
    return out


_SIGN = bytes(range(0x80))  # the high bytes of non-negative int32s


def _has_negative(a: array) -> bool:
    """Any negative value in an array('i'): the sign bytes, scanned in C (`min(a)` makes
    an int object per token: ~0.4 ms of the event loop for a 4k-token observation)."""
    if a.itemsize != 4:
        return min(a) < 0
    high = memoryview(a).cast("B")[3 if sys.byteorder == "little" else 0 :: 4]
    return bool(high.tobytes().translate(None, _SIGN))


@dataclass
class TokenState:
    ids: array = field(default_factory=lambda: array("i"))
    mask: array = field(default_factory=lambda: array("b"))
    logprobs: array = field(default_factory=lambda: array("d"))
    segments: list[Segment] = field(default_factory=list)

    def __post_init__(self) -> None:  # lists given to the constructor become arrays
        self.ids = int_array(self.ids)
        self.mask = array("b", self.mask)
        self.logprobs = array("d", self.logprobs)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def prompt_len(self) -> int:
        s = self.segments
        return s[0].end if s and s[0].kind == "prompt" else 0

    @property
    def last_token(self) -> int | None:
        return self.ids[-1] if self.ids else None

    def _push(
        self, kind: SegmentKind, ids: Sequence[int], mask: int, lps: Sequence[float] | None
    ) -> None:
        try:
            new = int_array(ids)
        except TokenStateError as e:
            raise TokenStateError(f"{e} in {kind} segment") from None
        n = len(new)
        if lps is not None and len(lps) != n:
            raise TokenStateError(f"{kind}: {n} token ids but {len(lps)} logprobs; they must align")
        new_lps = array("d", bytes(8 * n)) if lps is None else array("d", lps)
        start = len(self.ids)
        self.ids.extend(new)
        self.mask.extend(array("b", bytes([mask])) * n)
        self.logprobs.extend(new_lps)
        if n:
            self.segments.append(Segment(kind, start, len(self.ids)))
        self.check()

    def set_prompt(self, ids: Sequence[int]) -> None:
        if self.ids:
            raise TokenStateError("the prompt can only be set on an empty state")
        if not len(ids):
            raise TokenStateError("the prompt is empty")
        self._push("prompt", ids, 0, None)

    def append_sampled(self, ids: Sequence[int], logprobs: Sequence[float] | None) -> None:
        if not self.ids:
            raise TokenStateError("set the prompt before appending sampled tokens")
        if logprobs is None:
            raise TokenStateError("sampled tokens need their logprobs (ask the engine for them)")
        self._push("sampled", ids, 1, logprobs)

    def append_observation(self, ids: Sequence[int]) -> None:
        if not self.ids:
            raise TokenStateError("set the prompt before appending observations")
        self._push("observation", ids, 0, None)

    def check(self) -> None:
        n = len(self.ids)
        if len(self.mask) != n or len(self.logprobs) != n:
            raise TokenStateError(
                f"token state out of alignment: {n} ids, {len(self.mask)} mask, "
                f"{len(self.logprobs)} logprobs"
            )
        s = self.segments
        if s and s[-1].end != n:  # appends only ever add a segment at the end
            raise TokenStateError(f"segments cover {s[-1].end} of {n} tokens")

    def check_segments(self) -> None:
        """The full tiling check (O(segments)); `check` runs the O(1) part on every append."""
        self.check()
        pos = 0
        for seg in self.segments:
            if seg.start != pos or seg.end <= seg.start:
                raise TokenStateError(f"segments do not tile the stream at {pos}")
            pos = seg.end
        if pos != len(self.ids):
            raise TokenStateError(f"segments cover {pos} of {len(self.ids)} tokens")

    # --- views for the trainer (SkyRL: prompt ids, response ids, loss mask, logprobs)
    @property
    def prompt_ids(self) -> list[int]:
        return self.ids[: self.prompt_len].tolist()

    @property
    def response_ids(self) -> list[int]:
        return self.ids[self.prompt_len :].tolist()

    @property
    def response_mask(self) -> list[int]:
        return self.mask[self.prompt_len :].tolist()

    @property
    def response_logprobs(self) -> list[float]:
        return self.logprobs[self.prompt_len :].tolist()

    def sampled_positions(self) -> list[int]:
        return [i for i, m in enumerate(self.mask) if m]

"""TITO verify on the edges no test checked (issue 42): a later render that is shorter
than an earlier one (a proper prefix of it is no extension), and a replay whose token
stream lacks the last sampled turn (a prefix of the full render, but not whitespace)."""

from __future__ import annotations

from apexrl.tito.suite import Case, builtin_cases
from apexrl.tito.verify import check_case, first_mismatch, replay_one
from tests.tito.synthetic import synthetic_trajectory


def test_first_mismatch():
    assert first_mismatch([1, 2], [1, 2, 3]) is None
    assert first_mismatch([1, 2], [1, 2]) is None
    assert first_mismatch([], [5]) is None
    assert first_mismatch([1, 2, 3], [1, 2]) == 2  # the later one is shorter: no prefix
    assert first_mismatch([1, 9, 3], [1, 2, 3, 4]) == 1
    long = list(range(1000))
    for i in (0, 63, 64, 65, 500, 999):
        other = long.copy()
        other[i] = -1
        assert first_mismatch(long, other) == i
        assert first_mismatch(long, other + [7]) == i
    assert first_mismatch(long, long[:700]) == 700


def test_a_shorter_later_render_fails_the_template_check(tok, verbatim):
    """A template that drops the history once the conversation grows: each later render
    is shorter than the one before, which no append-only token stream can follow."""
    case = next(c for c in builtin_cases() if c.name == "single_tool_call")
    assert check_case(tok, verbatim, case).ok
    forgetful = (
        "{% for m in messages[-1:] %}<|im_start|>{{ m.role }}\n{{ m.content or '' }}"
        "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
        "{% endif %}"
    )
    f = check_case(tok, forgetful, Case("forgetful", case.messages))
    assert not f.ok and f.status == "mismatch"
    assert "is not a token prefix of render" in f.message


def test_a_replay_missing_its_last_sampled_turn_fails(tok, verbatim):
    traj = synthetic_trajectory(tok, verbatim, seed=3, target_tokens=600, template_name="v")
    assert replay_one(tok, verbatim, traj).ok
    cut = traj.model_copy(deep=True)
    last = max(i for i, t in enumerate(cut.turns) if t.kind == "sampled")
    cut.turns = cut.turns[:last]  # the stream ends before the last reply; messages keep it
    f = replay_one(tok, verbatim, cut)
    assert not f.ok and f.status == "mismatch" and f.drift_tokens > 0


def test_generated_ends_at_the_last_stop_token():
    """What a rendered assistant turn emitted: up to its last stop token, wherever it is
    (first or last place included), or all of it when it has none."""
    from apexrl.tito.verify import _generated

    stop = {7}
    assert _generated([1, 2, 7], stop) == [1, 2, 7]
    assert _generated([7, 1, 7, 3], stop) == [7, 1, 7]
    assert _generated([7, 1, 2], stop) == [7]  # the stop token at index 0
    assert _generated([7, 1, 7], stop) == [7, 1, 7]  # at the last index
    assert _generated([1, 2], stop) == [1, 2]
    assert _generated([], stop) == []


def _split_a_token(tok, turn) -> None:
    """Replace one multi-character token of `turn` by its pieces: the text is the same,
    decode -> encode does not give the ids back."""
    i = next(k for k, tid in enumerate(turn.token_ids) if len(tok.decode([tid])) >= 4)
    piece = tok.decode([turn.token_ids[i]])
    split = tok.encode(piece[:2]) + tok.encode(piece[2:])
    turn.token_ids[i : i + 1] = split
    if turn.logprobs is not None:
        turn.logprobs[i : i + 1] = [0.0] * len(split)


def test_replay_counts_and_the_reasons_it_fails(tok, verbatim):
    traj = synthetic_trajectory(tok, verbatim, seed=5, target_tokens=600, template_name="v")
    f = replay_one(tok, verbatim, traj)
    sampled = sum(t.kind == "sampled" for t in traj.turns)
    assert f.ok and f.n_tokens == len(traj.ids) and f.n_turns == sampled
    assert 0 < sampled < len(traj.turns)  # observations are not counted
    # the engine's prompts stopped extending the stream: a failure even when the stream
    # renders back exactly
    broken = traj.model_copy(deep=True)
    broken.extra = {**(broken.extra or {}), "prefix_breaks": [2, 4]}
    f = replay_one(tok, verbatim, broken)
    assert (f.ok, f.status, f.divergences) == (False, "mismatch", [])
    assert f.message == "engine prompts stop extending the stream at steps [2, 4]"
    # a stream that breaks the token-state invariants is an error, not a mismatch
    bad = traj.model_copy(deep=True)
    turn = next(t for t in bad.turns if t.kind == "sampled")
    turn.logprobs = None
    f = replay_one(tok, verbatim, bad)
    assert (f.ok, f.status, f.divergences) == (False, "error", [])
    assert f.message == (
        "token state invariant broken: sampled tokens need their logprobs (ask the engine for them)"
    )


def test_drift_inside_a_sampled_turn_that_does_not_round_trip_is_retokenization(
    tok, verbatim, monkeypatch
):
    """replay_one's own relabelling: an unexplained ("other") drift region that starts
    inside a sampled turn whose ids do not survive decode -> encode is retokenization;
    one elsewhere, or already explained, keeps its cause. At most 20 regions are kept,
    and the drift rate is the drifted share of the stream."""
    from apexrl.tito import verify
    from apexrl.tito.records import Divergence

    traj = synthetic_trajectory(tok, verbatim, seed=5, target_tokens=600, template_name="v")
    t = traj.model_copy(deep=True)
    sampled = [k for k, x in enumerate(t.turns) if x.kind == "sampled"]
    obs = [k for k, x in enumerate(t.turns) if x.kind == "observation"]
    assert len(sampled) >= 2 and obs
    _split_a_token(tok, t.turns[sampled[1]])  # a later sampled turn: positions add up
    _split_a_token(tok, t.turns[obs[-1]])  # an observation: never relabelled
    starts, pos = {}, len(t.prompt_ids)
    for k, x in enumerate(t.turns):
        starts[k] = pos
        pos += len(x.token_ids)
    s1, n1 = starts[sampled[1]], len(t.turns[sampled[1]].token_ids)
    s0 = starts[sampled[0]]  # round-trips: its regions keep their cause
    at = {
        "first": s1, "last": s1 + n1 - 1, "past": s1 + n1, "before": s1 - 1,
        "explained": s1 + 1, "other_turn": s0, "observation": starts[obs[-1]],
    }  # fmt: skip
    causes = {k: "whitespace" if k == "explained" else "other" for k in at}
    extra = [Divergence(index=0, cause="other", expected="", actual="", length=1)] * 20

    def regions(tok_, stream, full, stop_ids):
        return [
            Divergence(index=at[k], cause=causes[k], expected=k, actual="", length=2) for k in at
        ] + extra

    monkeypatch.setattr(verify, "_drift_regions", regions)
    f = replay_one(tok, verbatim, t, full_ids=[-1])
    got = {d.expected: d.cause for d in f.divergences if d.expected}
    assert got == {
        "first": "retokenization", "last": "retokenization", "past": "other",
        "before": "other", "explained": "whitespace", "other_turn": "other",
        "observation": "other",
    }  # fmt: skip
    assert len(f.divergences) == 20  # of 27
    assert f.drift_tokens == 7 * 2 + 20
    assert f.drift_rate == f.drift_tokens / len(t.ids)
    assert f.message == "27 drift region(s) between the token stream and a full render"
    t.extra = {**(t.extra or {}), "prefix_breaks": [3]}
    f = replay_one(tok, verbatim, t, full_ids=[-1])
    assert f.message == (
        "27 drift region(s) between the token stream and a full render; engine prompts "
        "stop extending the stream at steps [3]"
    )

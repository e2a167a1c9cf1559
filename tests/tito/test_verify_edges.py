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

"""apexrl's grader presents evidence as archipelago's does (issue 43), without the peer:
items per sheet and slide, hidden sheets and paths left out, deleted content shown,
archipelago's text suffixes, the judge's budget held on every request, `.db` criteria
through the tool loop; and each of apexrl's own choices back under its option name.
(tests/grading/test_grader_parity.py holds the same shapes against the real runner.)"""

from __future__ import annotations

import copy
import json

import pytest

from apexrl.grading import budget
from tests.grading.parity_matrix import all_markers, matrix, untuned_rows
from tests.scripted_engine import ScriptedEngine, marker_judge, prompt_text


@pytest.fixture(scope="module")
def judge():
    eng = ScriptedEngine([], chat=marker_judge(all_markers(matrix()))).start()
    try:
        yield eng
    finally:
        eng.stop()


def _verdicts(judge, rows, options=frozenset(), **settings) -> dict[str, bool]:
    from apexrl.eval.regrade import grade_kept
    from apexrl.grading.judge import JudgeSettings

    j = JudgeSettings(model="openai/scripted", api_base=judge.url + "/v1", **settings)
    out = {}
    for r in rows:
        g = grade_kept(
            "apexrl",
            copy.deepcopy(r.inputs),
            r.before,
            r.after,
            r.criteria,
            {},
            judge=j,
            options=options,
        )
        out.update({v.verifier_id: v.met for v in g.verdicts})
    return out


def test_untuned_shapes_get_archipelagos_verdicts(judge):
    got = _verdicts(judge, untuned_rows())
    assert got == {
        "c-hs-vis": True,  # a visible sheet is its own item
        "c-hs-hid": False,  # hidden and very hidden sheets are left out
        "c-hs-vhid": False,
        "c-rm-txt": True,  # a deleted file's former content is shown
        "c-rm-deck": True,
        "c-mbox": False,  # .mbox is not text to archipelago: listed by path
        "c-ics": True,
        "c-wide": True,  # the second tab is its own item, whatever the first holds
        "c-big-head": True,  # 600 KB: head and tail kept, the middle cut
        "c-big-mid": False,
        "c-big-tail": True,
        "c-dot": False,  # dot folders and __pycache__ are never shown
        "c-pyc": False,
        "c-db-add": True,  # the tool loop found the added row
        "c-db-none": False,
    }


def test_named_options_restore_apexrls_own_choices(judge):
    options = frozenset(
        {
            "show_hidden_sheets",
            "show_hidden_paths",
            "sniff_text",
            "deleted_paths_only",
            "workbook_whole",
            "db_as_file",
        }
    )
    rows = [r for r in untuned_rows() if not r.name.startswith("a 600 KB")]
    got = _verdicts(judge, rows, options)
    assert got["c-hs-hid"] and got["c-hs-vhid"]  # show_hidden_sheets
    assert got["c-dot"]  # show_hidden_paths
    assert got["c-mbox"]  # sniff_text: the mailbox decodes as text
    assert not got["c-rm-txt"] and not got["c-rm-deck"]  # deleted_paths_only
    assert not got["c-wide"]  # workbook_whole: 20,000 cells, the second tab never shown
    assert got["c-db-add"]  # db_as_file: the row diff as text in one prompt


def test_the_judge_never_receives_more_than_its_budget(judge):
    """A judge of 6,000 tokens: the 600 KB file goes through selection, then is cut to
    fit; no request (selection or verdict) holds more than 90% of the window."""
    (row,) = [r for r in untuned_rows() if r.name.startswith("a 600 KB")]
    before = len(judge.chat_requests)
    got = _verdicts(judge, [row], context_tokens=6000)
    sent = judge.chat_requests[before:]
    sizes = [budget.count_tokens(prompt_text(b), "openai/scripted") for b in sent]
    assert sizes and max(sizes) <= budget.prompt_limit(6000), sizes
    assert any("selected_artifact_indices" in json.dumps(b.get("response_format")) for b in sent)
    assert got == {"c-big-head": True, "c-big-mid": False, "c-big-tail": True}
    assert all("lines in the middle of this item are not shown" in prompt_text(b) for b in sent)


def test_db_tool_loop_is_bounded(judge, monkeypatch):
    """A judge that never submits a verdict: the loop stops at its bound, not met."""
    import apexrl.grading.db_judge as db_judge
    from tests.scripted_engine import chat_tool_call

    monkeypatch.setattr(db_judge, "MAX_CALLS", 4)
    (row,) = [r for r in untuned_rows() if r.name.startswith("an app database")]
    keep = judge.chat
    judge.chat = lambda body: chat_tool_call(
        "inspect_table", {"table_name": "deals"}
    )  # forever exploring
    before = len(judge.chat_requests)
    try:
        got = _verdicts(judge, [row])
    finally:
        judge.chat = keep
    assert got == {"c-db-add": False, "c-db-none": False}
    assert len(judge.chat_requests) - before == 2 * 4  # two criteria, four calls each


def test_middle_cut_keeps_head_and_tail(monkeypatch):
    text = "".join(f"line {i}\n" for i in range(5000))
    cut = budget.middle_cut(text, 300, "openai/x")
    assert budget.count_tokens(cut, "openai/x") <= 300
    assert cut.startswith("line 0\n") and cut.rstrip().endswith("line 4999")
    assert "lines in the middle of this item are not shown" in cut
    assert budget.middle_cut(text, 10**6, "openai/x") == text
    assert budget.context_tokens("openai/unknown-local-judge") == budget.DEFAULT_CONTEXT_TOKENS
    assert budget.context_tokens("openai/x", 4096) == 4096
    monkeypatch.setenv("APEXRL_JUDGE_CONTEXT_TOKENS", "32768")
    assert budget.context_tokens("openai/unknown-local-judge") == 32768
    monkeypatch.setenv("APEXRL_JUDGE_CONTEXT_TOKENS", "lots")
    with pytest.raises(ValueError, match="APEXRL_JUDGE_CONTEXT_TOKENS"):
        budget.context_tokens("openai/unknown-local-judge")

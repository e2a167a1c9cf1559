"""`apexrl eval view`: transcripts read from run folders, the page written by the CLI, and
the page driven in headless Chromium (DevTools protocol: typed filters, clicks, DOM
checks, a screenshot kept beside the test's files)."""

from __future__ import annotations

import base64
import gzip
import os
import re
import shutil
from pathlib import Path

import orjson
import pytest

from apexrl.cli.app import app
from apexrl.eval.transcript import read_trial
from apexrl.tito.trajectory import TitoTrajectory, TitoTurn
from tests.eval.conftest import _meta, eval_runner

LONG = "row " + "\n".join(f"{i}, revenue {i * 37}" for i in range(900))  # ~20k chars
HOSTILE = "<img src=x onerror=\"document.title='pwned'\"></script><script>alert(1)</script>"


def agent_atif(task: str, answer: str, *, result: str = "Billing/\nClient/") -> dict:
    """An ATIF trajectory as apexrl's agent writes it: TitoTrajectory.to_atif (Harbor's
    own models) plus the agent's extra.apexrl records."""
    messages = [
        {"role": "system", "content": "You are an expert professional."},
        {"role": "user", "content": f"Task {task}: how much notice is required?"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "List the files first.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "filesystem_list_files", "arguments": '{"path": "/"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": result},
        {"role": "assistant", "content": answer},
    ]
    traj = TitoTrajectory(
        trajectory_id=task,
        model="scripted",
        messages=messages,
        prompt_ids=[1, 2, 3],
        n_prompt_messages=2,
        turns=[
            TitoTurn(kind="sampled", token_ids=[4, 5], logprobs=[-0.1, -0.2], message_index=2),
            TitoTurn(kind="observation", token_ids=[6, 7, 8], message_index=3),
            TitoTurn(kind="sampled", token_ids=[9], logprobs=[-0.3], message_index=4),
        ],
    )
    atif = traj.to_atif(agent_name="apexrl")
    agent_steps = [s for s in atif["steps"] if s["source"] == "agent"]
    agent_steps[0]["extra"]["apexrl"] = {
        "tool_calls": [
            {
                "call_id": "call_1",
                "name": "filesystem_list_files",
                "status": "ok",
                "duration_s": 0.1,
            }
        ]
    }
    atif["extra"]["apexrl"] = {"status": "complete", "final_answer": answer, "steps": 2}
    return atif


def write_trial(run_dir: Path, trial_id: str, atif: dict | None, met: list[bool], **kw) -> None:
    tdir = run_dir / "trajectories" / trial_id
    tdir.mkdir(parents=True, exist_ok=True)
    if atif is not None:
        (tdir / "trajectory.json").write_bytes(orjson.dumps(atif))
    verdicts = [
        {"criteria": f"criterion {i}", "met": m, "source": "judge", "rationale": f"because {i}"}
        for i, m in enumerate(met)
    ]
    (tdir / "verdicts.json").write_bytes(orjson.dumps({"verdicts": verdicts}))
    vdir = run_dir / "logs" / trial_id / "verifier"
    vdir.mkdir(parents=True, exist_ok=True)
    changes = kw.get("changes", {"created": ["filesystem/outputs/memo.docx"], "modified": []})
    (vdir / "grading.json").write_bytes(orjson.dumps({"changes": changes}))


def test_transcript_of_an_agent_trajectory(tmp_path):
    atif = agent_atif("t1", "Ninety days.", result=LONG)
    write_trial(tmp_path, "t1.a0", atif, [True, False])
    t = read_trial(tmp_path, "t1.a0", cap=2000)
    assert [s["k"] for s in t["steps"]] == ["system", "user", "agent", "agent"]
    call = t["steps"][2]["calls"][0]
    assert call["name"] == "filesystem_list_files" and '"path": "/"' in call["args"]
    assert call["status"] == "ok" and t["steps"][2]["reasoning"] == "List the files first."
    # the long result keeps its head and tail and says where the rest is
    assert call["result"].startswith("row 0, revenue 0") and call["result"].endswith("33263")
    assert "characters not in this page" in call["result"]
    assert "trajectories/t1.a0/trajectory.json" in call["result"]
    assert len(call["result"]) < 2200
    assert t["answer"] == "Ninety days." and t["steps"][3]["text"] == "Ninety days."
    assert [(v["c"], v["met"], v["why"]) for v in t["verdicts"]] == [
        ("criterion 0", True, "because 0"),
        ("criterion 1", False, "because 1"),
    ]
    assert t["files"]["created"] == ["filesystem/outputs/memo.docx"]
    packed = orjson.dumps(t)
    assert b"token_ids" not in packed and b"logprobs" not in packed  # never on the page


def test_transcript_refuses_links_and_survives_junk(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text('{"steps": [{"source": "user", "message": "SECRET"}]}')
    write_trial(tmp_path, "t.a0", None, [True])
    (tmp_path / "trajectories" / "t.a0" / "trajectory.json").symlink_to(secret)
    (tmp_path / "logs" / "t.a0" / "verifier" / "grading.json").write_text("{not json")
    (tmp_path / "logs" / "t.a0" / "exception.txt").write_text(
        "Traceback (most recent call last):\n  ...\nBadZipFile: File is not a zip file\n"
    )
    t = read_trial(tmp_path, "t.a0")
    assert "SECRET" not in orjson.dumps(t).decode()
    assert t["steps"] == [] and "no transcript was recorded" in t["missing"][0]
    assert t["error"] == "BadZipFile: File is not a zip file"
    assert "files" not in t and t["verdicts"][0]["met"] is True
    # a recipe-style trajectory.json ({"messages": [...]}) reads as steps too
    (tmp_path / "trajectories" / "t.a0" / "trajectory.json").unlink()
    msgs = agent_atif("t", "done")["extra"]["tito"]["messages"]
    (tmp_path / "trajectories" / "t.a0" / "trajectory.json").write_bytes(
        orjson.dumps({"messages": msgs, "status": "complete"})
    )
    t = read_trial(tmp_path, "t.a0")
    assert t["steps"][2]["calls"][0]["result"] == "Billing/\nClient/"


# --- runs made by the real runner -----------------------------------------------------


def viewer_trial(fail_names: set[str]):
    """A trial function for `eval run` (the runner's own folders, journal and Parquet)
    writing the agent's ATIF; tasks in `fail_names` fail one criterion or error out."""
    from apexrl.artifacts.models import TrialResult
    from apexrl.trial.config import TrialOutcome

    def trial(task_dir: Path, config) -> TrialOutcome:
        meta = _meta(task_dir)
        bad = task_dir.name in fail_names
        errored = bad and config.attempt == 1
        atif = agent_atif(
            task_dir.name,
            "I cannot tell." if bad else "Ninety days.",
            result=HOSTILE + "\n" + LONG if bad else "Billing/\nClient/",
        )
        if errored:
            atif["extra"]["apexrl"]["error"] = "engine answered 503 three times"
        traj = config.logs_dir / "trajectory.json"
        traj.write_bytes(orjson.dumps(atif))
        (config.logs_dir / "verifier").mkdir()
        changes = {"created": ["filesystem/outputs/memo.docx"], "modified": [], "deleted": []}
        (config.logs_dir / "verifier" / "grading.json").write_bytes(
            orjson.dumps({"changes": changes})
        )
        met = [True, not bad]
        verdicts = [
            {"criteria": f"{task_dir.name} criterion {i}", "met": m, "source": "judge",
             "rationale": f"the answer {'states' if m else 'omits'} item {i}"}
            for i, m in enumerate(met)
        ]  # fmt: skip
        return TrialOutcome(
            result=TrialResult(
                task_id=meta["task_id"],
                domain=meta["domain"],
                world_id=meta["world_id"],
                attempt=config.attempt,
                status="error" if errored else "complete",
                error_class="llm_transient" if errored else None,
                reward=0.0 if bad else 1.0,
                criteria_met=0 if errored else sum(met),
                criteria_total=2,
                turns=2,
                tokens_in=1200,
                tokens_out=40,
                tool_calls=1,
                duration_s=3.5,
            ),
            trajectory_path=traj,
            verdicts=verdicts,
        )

    return trial


@pytest.fixture
def view_runs(task_dirs, tmp_path) -> tuple[Path, Path, list[str]]:
    """Run A fails two tasks (one attempt of each errors), run B passes everything."""
    names = sorted(p.name for p in task_dirs.iterdir() if p.is_dir())
    bad = {names[0], names[3]}
    a, b = tmp_path / "run-a", tmp_path / "run-b"
    for run_dir, fails in ((a, bad), (b, set())):
        args = ["eval", "run", "--agent", "oracle", "--tasks", str(task_dirs), "-o", str(run_dir)]
        res = eval_runner(viewer_trial(fails)).invoke(app, [*args, "-k", "2"])
        assert res.exit_code in (0, 1, 4), res.output  # 4: its scripted engine errors
    return a, b, sorted(bad)


def _page_index(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="apx-index">(.*?)</script>', page, re.S)
    return orjson.loads(m.group(1))


def test_view_cli_writes_one_self_contained_page(view_runs, tmp_path):
    from typer.testing import CliRunner

    a, b, bad = view_runs
    runner = CliRunner()
    res = runner.invoke(app, ["eval", "view", str(a)])
    assert res.exit_code == 0, res.output
    assert orjson.loads(res.stdout) == {
        "path": str((a / "viewer.html").absolute()),
        "format": "html",
        "trials": 28,
    }
    page = (a / "viewer.html").read_text()
    assert "Content-Security-Policy" in page and "connect-src 'none'" in page
    assert not re.search(r"(src|href)=\"?(https?:)?//", page)  # nothing to fetch
    assert HOSTILE not in page  # sandbox-written text is inside base64, never markup
    index = _page_index(page)
    assert len(index["rows"]) == 28 == page.count('<script type="text/plain" id="b')
    cols = index["cols"]
    errored = [r for r in index["rows"] if r[cols.index("error_class")]]
    assert {r[cols.index("task")] for r in errored} == set(bad)
    assert {r[cols.index("error")] for r in errored} == {"engine answered 503 three times"}
    # the engine's errors are ungraded (infrastructure): counted apart, in no pass rate
    summary = index["runs"][0]["summary"]
    assert summary["trials_ungraded"] == 2 and summary["infra_errors"] == {"llm_transient": 2}
    assert [r[cols.index("ungraded")] for r in errored] == [1, 1]
    assert sum(r[cols.index("ungraded")] for r in index["rows"]) == 2
    blob = re.search(r'id="b0">([^<]*)<', page).group(1)
    first = orjson.loads(gzip.decompress(base64.b64decode(blob)))
    assert first["steps"][2]["calls"][0]["name"] == "filesystem_list_files"
    # two runs, to a named file and to stdout
    out = tmp_path / "cmp.html"
    res = runner.invoke(app, ["eval", "view", str(a), str(b), "-o", str(out)])
    assert res.exit_code == 0 and len(_page_index(out.read_text())["runs"]) == 2
    res = runner.invoke(app, ["eval", "view", str(a), "-o", "-"])
    assert res.exit_code == 0 and res.stdout.startswith("<!doctype html>")
    # bad input: exit 2, nothing written
    res = runner.invoke(app, ["eval", "view", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "not a run directory" in res.stderr
    res = runner.invoke(app, ["eval", "view", str(a), "-o", str(tmp_path / "no" / "x.html")])
    assert res.exit_code == 2 and not (tmp_path / "no").exists()


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def test_viewer_in_chromium(view_runs, tmp_path):
    """Filter, sort, open a transcript, unfold a long result, compare side by side."""
    from typer.testing import CliRunner

    from tests.cdp import Browser

    a, b, bad = view_runs
    page = tmp_path / "view.html"
    res = CliRunner().invoke(app, ["eval", "view", str(a), str(b), "-o", str(page)])
    assert res.exit_code == 0, res.output
    with Browser(width=1400, height=1000) as br:
        br.open(page.as_uri())
        br.wait_for("document.documentElement.dataset.ready")
        # two runs open on the tasks whose outcome changed
        assert br.text("#count") == "2 of 2 tasks"
        assert br.count("tr.task-row") == 2
        # run A's errored attempt is ungraded: shown apart, not a failed attempt
        assert "0/1 (+1 ungraded)" in br.text("tr.task-row")
        assert "infrastructure errors (ungraded)2: llm_transient 2" in br.text("header")
        assert "2 ended in an infrastructure error (llm_transient 2)" in br.text("header")
        br.click("button[data-view=trials]")
        assert br.text("#count") == "56 of 56 trials"
        br.type("#q", bad[0][:20])
        assert br.text("#count") == "4 of 56 trials"
        br.select("#f-outcome", "error")
        assert br.text("#count") == "1 of 56 trials"
        assert "engine answered 503" in br.text("tr.trial-row td.err")
        br.select("#f-outcome", "")
        br.click("th[data-sort=score]")  # ascending: run A's failures first
        first = br.eval("[...document.querySelectorAll('tr.trial-row')].map(r => r.textContent)")
        assert first[0].startswith("A") and first[-1].startswith("B")
        br.click("tr.trial-row td.task", 1)
        br.wait_for("!!document.querySelector('#detail .transcript')")
        detail = br.text("#detail")
        assert "tool call: filesystem_list_files" in detail and '"path": "/"' in detail
        assert "rationale: the answer omits item 1" in detail and "I cannot tell." in detail
        assert "filesystem/outputs/memo.docx" in detail
        # the hostile tool result is text, not markup
        assert br.eval("document.title") != "pwned"
        assert br.count("#detail img") == 0 and HOSTILE in detail
        # a long result is folded until asked for
        assert "revenue 33263" not in detail
        br.click("#detail .call button.fold")
        assert "revenue 33263" in br.text("#detail")
        shot = br.screenshot(tmp_path / "viewer-trial.png")
        # side by side: the changed task in both runs
        br.click("button[data-view=changed]")
        br.click("tr.task-row td.task", 0)
        br.wait_for("document.querySelectorAll('#detail .sidebyside .transcript').length == 2")
        cols = br.eval(
            "[...document.querySelectorAll('.sidebyside > .col > h3')].map(h => h.textContent)"
        )
        assert cols[0].startswith("A") and cols[1].startswith("B")
        br.screenshot(tmp_path / "viewer-compare.png")
        errors = [e for e in br.events if e.get("method") == "Runtime.exceptionThrown"]
        assert not errors, errors
    assert shot.stat().st_size > 20_000
    artifacts = os.environ.get("APEXRL_TEST_ARTIFACTS")
    if artifacts:  # CI keeps the screenshots
        for p in tmp_path.glob("viewer-*.png"):
            shutil.copy(p, Path(artifacts) / p.name)


# --- the HTML report's plots and comparison page ------------------------------------------


def _runs_for_report(tmp_path, a_rows, b_rows):
    from apexrl.eval import resume
    from apexrl.eval.models import EvalResultRow
    from apexrl.eval.report import load_run

    out = []
    for name, rows in (("a", a_rows), ("b", b_rows)):
        d = tmp_path / name
        d.mkdir()
        resume.write_results(d, [EvalResultRow(**r) for r in rows])
        out.append(load_run(d))
    return out


def _row(task, domain, attempt, met, status="complete", error_class=None):
    return dict(
        error_message="engine 503" if error_class == "llm_transient" else None,
        trial_id=f"{task}.a{attempt}",
        task_id=task,
        domain=domain,
        attempt=attempt,
        status=status,
        error_class=error_class,
        criteria_met=met,
        criteria_total=2,
        reward=met / 2,
    )


def test_report_plots_show_every_bar_and_keep_legends_off_them(tmp_path):
    import matplotlib

    matplotlib.use("Agg", force=True)
    from apexrl.eval.report import plot_figures

    # A: 4 tasks, k = 1 (law 1 of 2 passes, ib none: 0%); B: 2 of them, k = 2, all pass
    a = [_row("L1", "law", 0, 2), _row("L2", "law", 0, 1), _row("I1", "ib", 0, 0)]
    a.append(_row("I2", "ib", 0, 0, "error", "unparsed_tool_call"))  # the model's: scored 0
    b = [_row("L1", "law", k, 2) for k in range(2)] + [_row("I1", "ib", k, 2) for k in range(2)]
    runs = _runs_for_report(tmp_path, a, b)
    single = plot_figures(runs[:1])
    assert "passk" not in single  # k = 1: no curve (its axis spanned 0.945-1.05)
    bars = single["domains"].axes[0]
    labels = [t.get_text() for t in bars.texts]
    assert labels == ["0%", "50%", "25%"]  # ib, law, all: a 0% bar is labelled too
    figs = plot_figures(runs)
    for fig in figs.values():
        ax = fig.axes[0]
        fig.canvas.draw()
        legend = ax.get_legend().get_window_extent()
        frame = ax.get_window_extent()
        assert legend.y1 <= frame.y0  # below the axes: it covers no bar or line
    ax = figs["passk"].axes[0]
    assert ax.get_xlim() == (0.5, 2.5) and list(ax.get_xticks()) == [1, 2]
    # a comparison plots the 2 shared tasks for both runs, as its table counts them
    assert "(2 shared tasks)" in figs["domains"].axes[0].get_title()
    texts = [t.get_text() for t in figs["domains"].axes[0].texts]
    assert texts == ["0%", "100%", "50%", "100%", "100%", "100%"]  # A's all: 50%, not 25%


def test_comparison_page_scopes_rows_lists_errors_and_links_the_viewer(tmp_path):
    from apexrl.eval.report import compare, compare_rows, render_html

    a = [_row("L1", "law", 0, 2), _row("L2", "law", 0, 2), _row("I1", "ib", 0, 0)]
    a.append(_row("I2", "ib", 0, 0, "error", "llm_transient"))
    b = [_row("L1", "law", 0, 2), _row("X1", "mc", 0, 0, "agent_timeout", "agent_timeout")]
    runs = _runs_for_report(tmp_path, a, b)
    head, rows = compare_rows(compare(runs[0].cols, runs[1].cols))
    by = {(r[0], r[1]): r for r in rows}
    assert head[-1] == "over" and by[("all", "Pass@1")][2:] == [
        "100.0",
        "100.0",
        "+0.0 pts [+0.0, +0.0]",
        "1 task shared",
    ]
    assert by[("ib", "Pass@1")][-1] == "A only, 1 task"  # I2's engine error: ungraded
    page = render_html(runs, page=tmp_path / "r.html")
    assert "<h2>Errors by class</h2>" in page
    infra = "llm_transient (infrastructure: ungraded)"
    assert f"<td>{infra}</td><td>(all)</td><td>1</td><td>0</td>" in page
    assert "<td>llm_transient</td><td>engine 503</td><td>1</td><td>0</td>" in page
    assert "<td>agent_timeout</td><td>(all)</td><td>0</td><td>1</td>" in page
    assert "Each run over all its tasks" in page and "<td>3 / 3</td>" in page  # I2 ungraded
    # the viewer: the command while it does not exist, a relative link once it does
    assert "apexrl eval view" in page and 'href="a/viewer-vs-b.html"' in page
    (tmp_path / "a" / "viewer-vs-b.html").write_text("x")
    page = render_html(runs, page=tmp_path / "r.html")
    assert "then open" not in page and 'href="a/viewer-vs-b.html"' in page


@pytest.mark.integration
def test_viewer_on_a_real_agent_run(example_dirs, tmp_path, monkeypatch):
    """apexrl's agent in the local sandbox, its model scripted (list the files, run a
    command, answer): the page shows the real tool calls, results and verdicts."""
    from typer.testing import CliRunner

    from tests.cdp import Browser
    from tests.eval.scripted_agent import scripted_eval

    monkeypatch.setenv("HARBOR_TELEMETRY", "0")
    expert, tasks = example_dirs
    text_task = "msa-termination-notice-period-71b57e9d"  # third by name, a text answer
    run = tmp_path / "run"
    res = scripted_eval(tasks, expert / "world_files_zipped", run, right={text_task}, limit=3)
    assert res.exit_code == 0, res.output
    page = tmp_path / "agent.html"
    assert CliRunner().invoke(app, ["eval", "view", str(run), "-o", str(page)]).exit_code == 0
    with Browser(width=1400, height=1300) as br:
        br.open(page.as_uri())
        br.wait_for("document.documentElement.dataset.ready")
        assert br.text("#count") == "3 of 3 trials"
        br.select("#f-outcome", "pass")
        assert br.text("#count") == "1 of 3 trials"
        assert br.text("tr.trial-row td.task") == text_task
        br.click("tr.trial-row td.task")
        br.wait_for("!!document.querySelector('#detail .transcript')")
        detail = br.text("#detail")
        for want in (
            "tool call: filesystem_list_files",
            "tool call: code_execution_code_exec",
            "'Contracts' (folder)",  # the world's files, listed in the sandbox
            "Master_Services_Agreement.docx",
            "States 90 days' written notice",
            "Clause 6 requires 90 days' written notice",
        ):
            assert want in detail, want
        assert br.count("#detail .verdict.met") == br.count("#detail .verdict") > 0
        br.screenshot(tmp_path / "viewer-agent.png")


def test_transcripts_beside_the_page_load_when_opened(view_runs, tmp_path):
    """--transcripts beside: a light page, one script per trial in <page>_files/, loaded
    from disk when the trial is opened; a page moved without its folder says so."""
    from typer.testing import CliRunner

    from tests.cdp import Browser

    a, _, bad = view_runs
    page = tmp_path / "light.html"
    args = ["eval", "view", str(a), "-o", str(page), "--transcripts", "beside"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    folder = tmp_path / "light_files"
    assert len(list(folder.glob("t*.js"))) == 28
    text = page.read_text()
    assert 'id="b0"' not in text and "script-src 'unsafe-inline' file:;" in text
    res = CliRunner().invoke(app, [*args[:4], "-", "--transcripts", "beside"])
    assert res.exit_code == 2 and "needs -o FILE" in res.stderr
    with Browser() as br:
        br.open(page.as_uri())
        br.wait_for("document.documentElement.dataset.ready")
        br.type("#q", bad[1][:20])
        br.click("tr.trial-row td.task", 0)
        br.wait_for("!!document.querySelector('#detail .transcript')")
        assert "tool call: filesystem_list_files" in br.text("#detail")
        folder.rename(tmp_path / "elsewhere")
        br.click("tr.trial-row td.task", 1)
        msg = br.wait_for(
            "document.querySelector('#detail .loading') &&"
            " document.querySelector('#detail .loading').textContent.includes('did not load')"
            " && document.querySelector('#detail .loading').textContent"
        )
        assert "keep the folder light_files/ beside this page" in msg


def test_viewer_shows_broken_tasks_apart_from_infrastructure(task_dirs, tmp_path):
    """A run whose `memo` tasks have a broken rubric: the page names them as task errors,
    not infrastructure errors (whose count stays "none")."""
    from typer.testing import CliRunner

    from tests.cdp import Browser
    from tests.eval.conftest import passing_trial

    def broken_memo(task_dir, config):
        out = passing_trial(task_dir, config)
        if "memo" in task_dir.name:
            r = out.result.model_copy(
                update={"status": "no_verifier_result", "error_class": "bad_task_rubric"}
            )
            out = out.model_copy(update={"result": r})
        return out

    run_dir, page = tmp_path / "run", tmp_path / "view.html"
    args = ["eval", "run", "--agent", "oracle", "--tasks", str(task_dirs), "-o", str(run_dir)]
    assert eval_runner(broken_memo).invoke(app, args).exit_code == 5
    res = CliRunner().invoke(app, ["eval", "view", str(run_dir), "-o", str(page)])
    assert res.exit_code == 0, res.output
    n = orjson.loads((run_dir / "summary.json").read_bytes())["task_errors"]["bad_task_rubric"]
    with Browser(width=1400, height=1000) as br:
        br.open(page.as_uri())
        br.wait_for("document.documentElement.dataset.ready")
        header = br.text("header")
        assert f"task errors (ungraded){n}: bad_task_rubric {n}" in header
        assert f"{n} ended in a task error (bad_task_rubric {n})" in header
        assert "infrastructure errors (ungraded)none" in header
        assert "ended in an infrastructure error" not in header

"""`apexrl eval ...`: evaluate a checkpoint on a task dataset; report runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import typer

from apexrl.agent.registry import agent_names
from apexrl.cli import output
from apexrl.cli.options import budget_options
from apexrl.engine.registry import engine_choices
from apexrl.envs.registry import environment_names
from apexrl.tito import sampling

app = typer.Typer(
    help="Evaluate a model on a task dataset (Pass@1, Pass@k, Pass^k) and report runs.",
    no_args_is_help=True,
)


# choices from the registries (apexrl.envs.registry, apexrl.agent.registry, apexrl.engine.registry)
Env = StrEnum("Env", {n: n for n in environment_names()})
Agent = StrEnum("Agent", {n: n for n in agent_names()})
Engine = StrEnum("Engine", {n: n for n in engine_choices()})

# options `eval run` and `eval regrade` share
JUDGE_API_BASE_OPT = typer.Option(
    None, "--judge-api-base", help="OpenAI-compatible URL serving the judge (openai/<name>)."
)
SUMMARY_JSON_OPT = typer.Option(False, "--json", help="Print the summary as JSON.")


class Grader(StrEnum):
    apexrl = "apexrl"
    archipelago = "archipelago"


class Runtime(StrEnum):
    apexrl = "apexrl"
    archipelago = "archipelago"


class Reward(StrEnum):
    pass_ = "pass"
    score = "score"


@dataclass
class EvalDeps:
    """What `apexrl eval run` can be handed instead of its defaults, as click's context
    object (`app(obj=EvalDeps(...))`, `CliRunner().invoke(app, args, obj=EvalDeps(...))`):
    trial_fn(task_dir, TrialConfig) -> TrialOutcome runs each trial instead of Harbor's
    (benchmarks, custom harnesses; no environment preflight then)."""

    trial_fn: Callable | None = None


class Transcripts(StrEnum):
    auto = "auto"
    embed = "embed"
    beside = "beside"


class Format(StrEnum):
    table = "table"
    md = "md"
    json = "json"
    html = "html"


@app.command("run")
@budget_options
def run(
    ctx: typer.Context,
    model: str = typer.Argument(
        None, help="HF model id (org/name or org/name@rev), local checkpoint dir, or served name."
    ),
    tasks: str = typer.Option(
        ...,
        "--tasks",
        "-t",
        help="Task dirs folder, Parquet dataset, hf://org/name, or - (`tasks ls` records "
        "or paths on stdin: exactly those tasks).",
    ),
    out: Path = typer.Option(..., "-o", "--out", help="RUN_DIR (rerun the same to resume)."),
    endpoint: str = typer.Option(
        None, "--endpoint", envvar="APEXRL_ENDPOINT", help="Use a running engine at this URL."
    ),
    engine: Engine = typer.Option("auto", "--engine", help="Engine to start for MODEL."),
    vllm_python: str = typer.Option(
        None,
        "--vllm-python",
        help="Interpreter with vLLM (e.g. .venv-vllm/bin/python from `make vllm`); "
        "default: APEXRL_VLLM_PYTHON, else this one.",
    ),
    env: Env = typer.Option("local", "--env", help="Where trials run."),
    worlds: Path = typer.Option(
        None,
        "--worlds",
        envvar="APEXRL_WORLDS",
        help="World store: <world_id>/ or .zip files.",
    ),
    agent: Agent = typer.Option("apexrl", "--agent", help="apexrl (the model) or oracle."),
    attempts: int = typer.Option(1, "-k", "--attempts", help="Attempts per task."),
    concurrency: int = typer.Option(1, "-n", "--concurrency", help="Trials in flight."),
    limit: int = typer.Option(None, "--limit", help="Only the first N tasks."),
    task_id: list[str] = typer.Option(
        None, "--task-id", help="Only this task (its id or folder name; repeatable)."
    ),
    shuffle: bool = typer.Option(
        False, "--shuffle", help="Select in a random order fixed by --seed (0 when unset)."
    ),
    extend: bool = typer.Option(
        False, "--extend", help="Add this selection (tasks, -k) to the RUN_DIR's plan."
    ),
    domain: list[str] = typer.Option(None, "--domain", help="Only this domain (repeatable)."),
    judge: str = typer.Option(
        None,
        "--judge",
        envvar="APEXRL_JUDGE",
        help="LiteLLM judge model for free-text criteria (gemini/..., openai/...).",
    ),
    no_judge: bool = typer.Option(
        False, "--no-judge", help="Run without a judge: free-text criteria unjudged (unmet)."
    ),
    judge_api_base: str = typer.Option(
        None,
        "--judge-api-base",
        envvar="APEXRL_JUDGE_API_BASE",
        help="OpenAI-compatible URL serving the judge (openai/<name>).",
    ),
    grader: Grader = typer.Option(
        Grader.apexrl, "--grader", help="Who grades: apexrl, or archipelago's own grading runner."
    ),
    archipelago: Path = typer.Option(
        None,
        "--archipelago",
        help="archipelago checkout for --grader archipelago and --runtime archipelago "
        "(default: $APEXRL_ARCHIPELAGO, else `apexrl peer fetch`'s).",
    ),
    runtime: Runtime = typer.Option(
        Runtime.apexrl,
        "--runtime",
        help="Whose MCP servers serve the worlds: apexrl's own, or archipelago's own from "
        "the checkout (--env local; built by `make peer`, else on first use).",
    ),
    grader_option: list[str] = typer.Option(
        None,
        "--grader-option",
        help="One of apexrl's grading choices archipelago does not make (repeatable): "
        "last_assistant_answer, evidence_caps, reference_shortcut, lenient_file_types, "
        "free_json, fixed_sampling, few_retries, show_hidden_sheets, show_hidden_paths, "
        "sniff_text, deleted_paths_only, workbook_whole, db_as_file (docs/parity.md).",
    ),
    tokenizer: str = typer.Option(None, "--tokenizer", help="Tokenizer (default: MODEL's)."),
    chat_template: str = typer.Option(None, "--chat-template", help="Template file or name."),
    system_prompt: Path = typer.Option(
        None, "--system-prompt", help="System prompt file (default: apexrl's)."
    ),
    extra_prompt: Path = typer.Option(
        None, "--extra-prompt", help="File appended to each task's instruction (tool guidance)."
    ),
    prompts: str = typer.Option(
        None,
        "--prompts",
        help="recipe:PATH: the system and eval extra prompts from a checkout of the recipe "
        "(read, never run).",
    ),
    budgets: dict = None,  # one option per flagged budget (apexrl.cli.options)
    reward: Reward = typer.Option(
        Reward.pass_, "--reward", help="Trial reward: pass (0/1) or score (fraction met)."
    ),
    temperature: float = typer.Option(
        sampling.TEMPERATURE, "--temperature", help="Sampling temperature."
    ),
    top_p: float = typer.Option(sampling.TOP_P, "--top-p", help="Nucleus sampling."),
    top_k: int = typer.Option(
        sampling.TOP_K, "--top-k", help="Top-k sampling (-1: off, the recipe's)."
    ),
    min_p: float = typer.Option(
        sampling.MIN_P, "--min-p", help="Min-p sampling (0: off, the recipe's)."
    ),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Tokens per turn."),
    seed: int = typer.Option(None, "--seed", help="Sampling seed (attempt i uses seed + i)."),
    ray_address: str = typer.Option(
        None, "--ray-address", help="Ray cluster address ('auto', ray://...; 'local' starts one)."
    ),
    retry_errors: bool = typer.Option(
        False,
        "--retry-errors",
        help="Rerun the trials that ended in an infrastructure error (judge, engine, sandbox).",
    ),
    retry_task_errors: bool = typer.Option(
        False,
        "--retry-task-errors",
        help="Rerun the trials of broken tasks (task errors), once the task is fixed.",
    ),
    pass_env: list[str] = typer.Option(
        None, "--pass-env", help="Host env var a task's ${NAME} may read (repeatable)."
    ),
    tool: list[str] = typer.Option(
        None,
        "--tool",
        help="Offer the agent only this tool of the world's (repeatable; default: all). "
        "A name the world does not list fails the trial.",
    ),
    force: bool = typer.Option(False, "--force", help="Discard a RUN_DIR of another config."),
    json_out: bool = SUMMARY_JSON_OPT,
    # one spelling from here to the environment: --sandbox-X, a recipe's agent.sandbox_X,
    # SandboxSettings.X, the environment's X keyword (apexrl.envs.modal)
    sandbox_cpus: float = typer.Option(
        None, "--sandbox-cpus", help="CPUs per remote sandbox (--env modal; recipe: 2)."
    ),
    sandbox_memory_mb: int = typer.Option(
        None, "--sandbox-memory-mb", help="Memory per remote sandbox in MB (recipe: 4096)."
    ),
    sandbox_timeout_s: int = typer.Option(
        None,
        "--sandbox-timeout-s",
        "--sandbox-timeout",
        help="Remote sandbox lifetime in seconds (recipe: 6000).",
    ),
    image_profile: str = typer.Option(
        None,
        "--image-profile",
        help="How world images start: apexrl or mercor (default: the task's metadata).",
    ),
) -> None:
    """Evaluate MODEL on DATASET into RUN_DIR: results.parquet, trajectories/, summary.json.

    Starts the engine (vLLM on GPU, the local CPU engine otherwise) unless --endpoint
    is given. Rerunning the same command resumes: only trials without a result run.
    """
    from apexrl.agent.prompts import read_prompt
    from apexrl.errors import ExitCode, UsageError
    from apexrl.eval.runner import EvalRequest, run_eval
    from apexrl.grading.requirements import NO_JUDGE

    if no_judge and _from_config(ctx, "judge"):
        judge = judge_api_base = None  # --no-judge overrides a configured default judge
    if judge and no_judge:
        raise UsageError("--judge and --no-judge exclude each other", hint="pass one of them")
    output.refuse_dash(out, "-o", "a run folder")
    from apexrl.config import output_path

    out = output_path(out)  # a relative RUN_DIR under APEXRL_OUTPUT_ROOT when set
    selection = None
    if tasks == "-":
        import sys

        from apexrl.tasks.selection import read_lines

        selection = read_lines(sys.stdin)
    from apexrl.envs.registry import check_runtime
    from apexrl.trial.config import AgentBudgets, Sampling, SandboxSettings

    check_runtime(runtime.value, env.value)  # before any checkout is looked at
    checkout = _grader_checkout(grader, archipelago, judge, runtime)
    sys_p = read_prompt(system_prompt, "--system-prompt") if system_prompt else None
    extra_p = read_prompt(extra_prompt, "--extra-prompt") if extra_prompt else None
    if prompts:
        from apexrl.agent.recipe_prompts import parse_spec, recipe_prompts

        root = parse_spec(prompts)
        if root is None:
            raise UsageError(f"--prompts {prompts!r}: expected recipe:PATH")
        if system_prompt or extra_prompt:
            raise UsageError("--prompts excludes --system-prompt and --extra-prompt")
        sys_p, extra_p = recipe_prompts(root, "eval")
    options = _grader_options(grader_option)

    if image_profile:
        from apexrl.envs.profiles import get_profile

        get_profile(image_profile)  # a usage error now, not in every trial

    req = EvalRequest(
        tasks=tasks,
        run_dir=out,
        model=model,
        endpoint=endpoint,
        engine=engine.value,
        agent=agent.value,
        environment=env.value,
        worlds_dir=worlds,
        attempts=attempts,
        concurrency=concurrency,
        limit=limit,
        task_ids=list(task_id or []),
        shuffle=shuffle,
        extend=extend,
        domains=list(domain or []),
        judge=NO_JUDGE if no_judge else judge,
        judge_api_base=judge_api_base,
        tokenizer=tokenizer,
        chat_template=chat_template,
        system_prompt=sys_p,
        extra_prompt=extra_p,
        budgets=AgentBudgets(**budgets),
        reward=reward.value,
        grader=grader.value,
        archipelago=checkout,
        runtime=runtime.value,
        grader_options=options,
        sampling=Sampling(
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            min_p=min_p,
            max_tokens=max_tokens,
            seed=seed,
        ),
        ray_address=ray_address,
        retry_errors=retry_errors,
        retry_task_errors=retry_task_errors,
        force=force,
        sandbox=SandboxSettings(
            cpus=sandbox_cpus,
            memory_mb=sandbox_memory_mb,
            timeout_s=sandbox_timeout_s,
            image_profile=image_profile,
        ),
        vllm_python=vllm_python,
        pass_env=list(pass_env or []),
        tools=list(tool) if tool else None,
        command=output.command_line(),
        selection=selection,
    )
    created = not out.exists()
    try:
        with _live_progress() as (on_start, on_result):
            report, cfg = run_eval(
                req,
                trial_fn=ctx.obj.trial_fn if isinstance(ctx.obj, EvalDeps) else None,
                on_start=on_start,
                on_result=on_result,
                on_bad_task=lambda e: output.warn(f"skipped task: {e}"),
                on_info=output.info,
            )
    except KeyboardInterrupt:
        _interrupted(out)
        raise typer.Exit(130) from None
    except BaseException:
        if created and not (out / "run.json").exists():  # failed before any trial: no
            import shutil  # RUN_DIR with only a lock (or unpacked tasks) is left behind

            shutil.rmtree(out, ignore_errors=True)
        raise
    from apexrl.eval.report import summary_line

    s = report.summary
    output.info(
        f"{report.ran} trial(s) run, {report.skipped} already done; {summary_line(s)} -> {out}"
    )
    if s.criteria_unjudged:
        from apexrl.eval.report import unjudged_line

        output.warn(unjudged_line(s.criteria_unjudged))
    if json_out or not output.stdout_is_terminal():
        output.emit_records([s], json_out=True)
    else:
        from rich.console import Console

        from apexrl.eval.report import load_run, print_table

        print_table([load_run(out)], Console())
    for cls, msgs in s.error_messages.items():
        for msg, n in msgs.items():
            output.warn(f"{cls} ({n} trial(s)): {msg}")
    if report.lost:  # never scored: the same command runs them again
        output.warn(f"{len(report.lost)} trial(s) lost to the Ray cluster; rerun to run them")
        raise typer.Exit(int(ExitCode.PARTIAL))
    if s.trials_ungraded:  # infrastructure is never a score, and never exit 0
        from apexrl.eval.report import ungraded_line, ungraded_names

        output.error(f"{ungraded_line(s, out)}. Ungraded: {ungraded_names(s)}")
        raise typer.Exit(s.exit_code)
    if agent == "oracle" and s.pass_at_1.value < 1.0:
        output.error(
            f"the oracle passed {100 * s.pass_at_1.value:.1f}% of trials, not 100%: "
            "the tasks, worlds or grading are inconsistent (reasons above; see results.parquet)"
        )
        raise typer.Exit(int(ExitCode.CHECK_FAILED))


def _from_config(ctx: typer.Context, name: str) -> bool:
    """Whether option `name` took its value from the environment, .env or apexrl.toml."""
    from typer._click.core import ParameterSource

    return ctx.get_parameter_source(name) == ParameterSource.ENVIRONMENT


def _interrupted(run_dir: Path) -> None:
    """Ctrl-C: what is saved and the command that resumes (summary.json is written)."""
    import orjson

    from apexrl.errors import ApexError
    from apexrl.eval import resume
    from apexrl.eval.report import resume_command

    try:
        summary = orjson.loads((run_dir / "summary.json").read_bytes())
        config = resume.load_config(run_dir)
    except (OSError, ValueError, ApexError):
        output.error("interrupted before any trial ran")
        return
    done, planned = summary.get("trials_done"), summary.get("trials_planned")
    output.error(
        f"interrupted: {done} of {planned} trial(s) have a result in {run_dir}; "
        f"resume with: {resume_command(config, run_dir)}"
    )


def _grader_options(names: list[str] | None) -> list[str]:
    from apexrl.errors import UsageError
    from apexrl.grading.grader import check_options

    try:
        return sorted(check_options(names))
    except ValueError as e:
        raise UsageError(str(e)) from None


def _grader_checkout(
    grader: Grader, archipelago: Path | None, judge: str | None, runtime: Runtime
) -> str | None:
    """--grader archipelago: the checkout (checked, its runner built now, not per trial);
    --runtime archipelago: the checkout (checked now; its servers built before the trials)."""
    from apexrl.errors import UsageError

    if grader is not Grader.archipelago:
        if runtime is Runtime.archipelago:
            from apexrl.peer.runtime import find_checkout

            return str(find_checkout(archipelago))
        if archipelago is not None:
            raise UsageError("--archipelago is for --grader archipelago or --runtime archipelago")
        return None
    if not judge:
        raise UsageError(
            "--grader archipelago judges every criterion with an LLM: it needs --judge",
            hint="e.g. --judge openai/NAME --judge-api-base URL, or a provider model",
        )
    from apexrl.grading.archipelago import resolve_checkout, runner_dir

    checkout = resolve_checkout(archipelago)
    runner_dir(checkout, log=output.info)
    return str(checkout.root)


class _live_progress:  # noqa: N801 - used as a context manager
    """A Rich progress bar on stderr: trials done/total, pass rate, errors, tok/s."""

    def __enter__(self):
        self.prog = output.progress_bar()
        console = self.prog.console
        self.prog.__enter__()
        self.task = None
        self.line = None  # off a terminal: a progress line every APEXRL_PROGRESS_EVERY s

        def on_start(n_todo: int, n_planned: int) -> None:
            if n_todo < n_planned:
                output.info(f"resuming: {n_planned - n_todo} of {n_planned} trial(s) already done")
            self.task = self.prog.add_task("eval", total=n_todo)
            if not console.is_terminal:
                self.line = output.ProgressLine("eval", n_todo)

        def on_result(row, prog) -> None:
            if self.task is not None:
                self.prog.update(self.task, advance=1, description=prog.line())
            if self.line is not None:
                self.line.advance(1, prog.line().removeprefix("eval").strip())

        return on_start, on_result

    def __exit__(self, *exc):
        return self.prog.__exit__(*exc)


@app.command("regrade")
def regrade(
    run_dir: Path = typer.Argument(..., help="RUN_DIR of `apexrl eval run`."),
    out: Path = typer.Option(..., "-o", "--out", help="NEW_RUN folder (rerun the same to resume)."),
    grader: list[Grader] = typer.Option(
        None,
        "--grader",
        help="apexrl or archipelago; twice: both, with comparison.jsonl (default: the run's).",
    ),
    judge: str = typer.Option(None, "--judge", help="LiteLLM judge model (default: the run's)."),
    judge_api_base: str = JUDGE_API_BASE_OPT,
    archipelago: Path = typer.Option(
        None,
        "--archipelago",
        help="archipelago checkout (default: the run's, $APEXRL_ARCHIPELAGO, else `apexrl "
        "peer fetch`'s).",
    ),
    reward: Reward = typer.Option(None, "--reward", help="pass or score (default: the run's)."),
    grader_option: list[str] = typer.Option(
        None, "--grader-option", help="apexrl's grader options (default: the run's); see eval run."
    ),
    json_out: bool = SUMMARY_JSON_OPT,
) -> None:
    """Grade RUN_DIR's trials again, without running them, into NEW_RUN.

    Grades every trial whose agent finished, whatever its grading's outcome (a judge
    that failed included), from the evidence it kept (verifier/inputs/). NEW_RUN must
    be new, or a regrade of the same run with the same judge and options. With two graders, writes
    NEW_RUN/comparison.jsonl (task, criterion, verdict under each, same). Judge replies
    are cached by (model, prompt sha256): a rerun makes no judge call for a prompt seen.
    """
    from apexrl.config import output_path, run_path
    from apexrl.errors import ExitCode
    from apexrl.eval.regrade import RegradeRequest
    from apexrl.eval.regrade import regrade as do_regrade

    run_dir, out = run_path(run_dir), output_path(out)  # under APEXRL_OUTPUT_ROOT as eval run

    graders = [g.value for g in grader] if grader else []
    if not graders:
        from apexrl.eval.resume import load_config

        old = load_config(run_dir)
        graders = [old.grader if old else "apexrl"]
    rep = do_regrade(
        RegradeRequest(
            run_dir=run_dir,
            out=out,
            graders=graders,
            judge=judge,
            judge_api_base=judge_api_base,
            archipelago=str(archipelago) if archipelago else None,
            reward=reward.value if reward else None,
            options=_grader_options(grader_option) if grader_option else None,
        ),
        log=output.info,
    )
    from apexrl.eval.report import load_run, summary_line

    s = load_run(out).summary
    line = f"{rep.graded} grading(s) made, {rep.reused} reused, {rep.judge_calls} judge call(s)"
    if rep.criteria:
        line += f"; verdicts agree on {rep.same}/{rep.criteria} criteria"
    output.info(f"{line}; {summary_line(s)} -> {out}")
    record = {
        "out": str(out),
        "graders": graders,
        "graded": rep.graded,
        "reused": rep.reused,
        "kept": rep.kept,
        "missing": rep.missing,
        "task_errors": sorted(rep.task_errors),
        "judge_calls": rep.judge_calls,
        "criteria_compared": rep.criteria,
        "criteria_same": rep.same,
        "summary": s.model_dump(mode="json"),
    }
    output.emit_records([record], json_out=True)
    if rep.task_errors:  # named before the partial exit below: the author fixes the task
        shown = list(rep.task_errors.items())[:5]
        more = f" and {len(rep.task_errors) - 5} more" if len(rep.task_errors) > 5 else ""
        output.error(
            f"{len(rep.task_errors)} trial(s) not graded, their task is broken: "
            + "; ".join(f"{tid}: {why}" for tid, why in shown)
            + f"{more}; fix the task (`apexrl tasks validate`), then regrade again"
        )
    if rep.missing:
        output.warn(
            f"{len(rep.missing)} finished trial(s) kept no readable grading inputs (first: "
            f"{rep.missing[0]}); their rows are copied unchanged"
        )
        raise typer.Exit(int(ExitCode.PARTIAL))
    if s.trials_ungraded > len(rep.task_errors):  # trials a regrade cannot grade
        from apexrl.eval.report import ungraded_names

        n_task = sum(s.task_errors.values()) - len(rep.task_errors)
        fixes = []
        if s.trials_ungraded - len(rep.task_errors) > n_task:
            fixes.append(f"run them again with `apexrl eval run ... -o {run_dir} --retry-errors`")
        if n_task:  # rerunning a broken task unchanged fails the same way
            why = ", ".join(f"{k} {v}" for k, v in s.task_errors.items())
            fixes.append(
                f"{n_task} are broken tasks' (task errors: {why}): fix the task, "
                f"then `apexrl eval run ... -o {run_dir} --retry-task-errors`"
            )
        output.error(
            f"{s.trials_ungraded - len(rep.task_errors)} trial(s) stay ungraded (their agent "
            f"did not finish: {ungraded_names(s)}); {'; '.join(fixes)}, then regrade"
        )
    if s.trials_ungraded:  # never exit 0: 5 when only broken tasks, else the infra code
        raise typer.Exit(s.exit_code)


@app.command("view")
def view(
    runs: list[Path] = typer.Argument(
        ..., help="RUN_DIR of `apexrl eval run`; more than one: their tasks side by side."
    ),
    out: str = typer.Option(
        None,
        "-o",
        "--out",
        help="HTML file to write, - for stdout (default: RUN_DIR/viewer.html, or "
        "RUN_DIR/viewer-vs-<RUN_B>.html for several runs).",
    ),
    max_chars: int = typer.Option(
        8000,
        "--max-chars",
        help="Longest text kept whole on the page (a message, tool argument or result); "
        "longer ones keep head and tail and name the file with the rest.",
    ),
    transcripts: Transcripts = typer.Option(
        "auto",
        "--transcripts",
        help="embed: in the page (one file); beside: in FILE's <name>_files/ folder, "
        "loaded when opened (a light page for big runs); auto: embed up to 32 MB.",
    ),
) -> None:
    """One self-contained HTML page (no server, nothing fetched) to browse runs: a
    sortable, filterable table of tasks and trials, each trial's transcript (messages,
    tool calls and results, final answer, files written, each criterion's verdict and
    rationale), and with several runs the tasks whose outcome changed, side by side."""
    import sys

    from apexrl.artifacts.atomic import write_text_atomic
    from apexrl.errors import UsageError
    from apexrl.eval import viewer

    if max_chars < 200:
        raise UsageError("--max-chars must be at least 200")
    from apexrl.config import run_path

    runs = [run_path(r) for r in runs]  # relative RUN_DIRs `eval run -o` put under the root
    to_stdout = out == "-"
    target = None if out is None or to_stdout else _output_file(out)
    loaded = [viewer.load_view_run(r) for r in runs]
    total = sum(len(r.rows) for r in loaded)
    with output.progress("reading transcripts", total) as advance:
        for r in loaded:
            viewer.read_transcripts(r, cap=max_chars, on_trial=advance)
    embed = transcripts is Transcripts.embed or (
        transcripts is Transcripts.auto and (to_stdout or viewer.should_embed(loaded))
    )
    if to_stdout and not embed:
        raise UsageError("--transcripts beside needs -o FILE (the folder goes beside it)")
    target = target or viewer.default_view_path(runs)
    folder = viewer.beside_folder(target)
    page = viewer.render_viewer(loaded, cap=max_chars, beside=None if embed else folder.name)
    if to_stdout:
        sys.stdout.write(page)
        sys.stdout.flush()
        return
    if not embed:
        viewer.write_beside(folder, loaded)
        output.info(f"transcripts of {total} trial(s) in {folder}/ (keep it beside the page)")
    write_text_atomic(target, page)
    output.info(f"wrote {target} ({len(page.encode()) / 1e6:.1f} MB, {total} trial(s))")
    output.emit_path(target, format="html", trials=total)


@app.command("report")
def report(
    run_dir: Path = typer.Argument(..., help="RUN_DIR of `apexrl eval run`."),
    run_b: Path = typer.Argument(None, help="A second RUN_DIR: compare B against A."),
    fmt: Format = typer.Option(
        None, "--format", "-f", help="table (terminal default), md, json (piped default), html."
    ),
    out: str = typer.Option(
        None,
        "-o",
        "--out",
        help="File to write, - for stdout (html default: RUN_DIR/report.html).",
    ),
    allow_incomplete: bool = typer.Option(
        False,
        "--allow-incomplete",
        help="Exit 0 for an incomplete run too (its report says INCOMPLETE either way).",
    ),
) -> None:
    """Pass@1 / Pass@k / Pass^k / mean score with 95% CIs, per domain, errors,
    turns and tokens; with two runs, deltas (B - A) with paired CIs. An interrupted
    run, or one with ungraded trials, says INCOMPLETE first, with the command that
    resumes it; the report is still written, and the command exits 5 (partial)
    unless --allow-incomplete is given."""
    from apexrl.config import run_path
    from apexrl.eval import report as rep

    run_dir = run_path(run_dir)  # a relative RUN_DIR `eval run -o` put under the output root
    runs = [rep.load_run(run_dir)] + ([rep.load_run(run_path(run_b))] if run_b else [])
    for r in runs:
        if r.incomplete:
            output.warn(f"{r.label}: {r.incomplete}")
    _write_report(runs, run_dir, fmt, out)
    partial = [r.label for r in runs if r.incomplete]
    if partial and not allow_incomplete:  # its figures are not the run's: never exit 0
        from apexrl.errors import ExitCode

        output.error(
            f"report written, but {' and '.join(partial)} is incomplete: its figures cover "
            "part of the plan (exit 5; --allow-incomplete exits 0)"
        )
        raise typer.Exit(int(ExitCode.PARTIAL))


def _write_report(runs: list, run_dir: Path, fmt: Format | None, out: str | None) -> None:
    """The report of `runs` in `fmt`, to `out` (a file, - for stdout) or the terminal."""
    from apexrl.artifacts.atomic import write_text_atomic
    from apexrl.eval import report as rep

    to_stdout = out == "-"
    target = None if out is None or to_stdout else _output_file(out)
    if fmt is None:
        fmt = Format.table if output.stdout_is_terminal() and out is None else Format.json
        if target is not None:  # -o report.html / report.md: the format its name says
            fmt = {".html": Format.html, ".htm": Format.html, ".md": Format.md}.get(
                target.suffix, fmt
            )
    if fmt is Format.table:
        import os

        from rich.console import Console

        if target is not None:
            import io

            buf = io.StringIO()
            rep.print_table(runs, Console(file=buf, width=140, no_color=True))
            write_text_atomic(target, buf.getvalue())
            output.info(f"wrote {target}")
        else:
            rep.print_table(runs, Console(no_color=bool(os.environ.get("NO_COLOR")), width=140))
        return
    if fmt is Format.html:
        if target is None and not to_stdout:
            target = run_dir / "report.html"
        text = rep.render_html(runs, page=target)
    elif fmt is Format.md:
        text = rep.render_md(runs)
    else:
        import orjson

        # one NDJSON line when piped or written; indented for a person on a terminal
        pretty = output.stdout_is_terminal() and target is None and not to_stdout
        option = orjson.OPT_INDENT_2 if pretty else 0
        text = orjson.dumps(rep.render_json(runs), option=option).decode() + "\n"
    if target is not None:
        write_text_atomic(target, text)
        output.info(f"wrote {target}")
        if fmt is Format.html:
            output.emit_path(target, format="html")
        return
    typer.echo(text, nl=False)


def _output_file(out: str) -> Path:
    """-o FILE: its folder must exist (a typo is not silently created)."""
    from apexrl.errors import UsageError

    path = Path(out).expanduser()
    if path.is_dir():
        raise UsageError(f"-o {out} is a directory", hint="pass a file name, or - for stdout")
    if not path.parent.is_dir():
        raise UsageError(
            f"-o {out}: folder {path.parent} does not exist",
            hint="create it first, or pass - for stdout",
        )
    return path

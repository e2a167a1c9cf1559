"""`make mutate`: mutation testing of apexrl's safety modules, one module at a time.

    python -m tests.mutate                    # every module in MODULES, in order
    python -m tests.mutate envnames redact    # the named ones
    python -m tests.mutate --list
    python -m tests.mutate --recheck redact   # survivors against the tests as they are now

Each module is mutated by mutmut (a pinned dev dependency) against the few test files
that cover it, in a scratch copy of the tree (build/mutate/<module>/: mutmut writes its
mutants/ folder there, never into the sources). The score of each run is merged into
bench/results.json under "mutation": killed, survived, equivalent (the survivors named in
EQUIVALENT, each with why), score = killed / (killed + survived - equivalent), the command
and the date. Survivors are printed by name (`mutmut show NAME` in the scratch folder
shows the diff). Run it niced: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results.json"
SCRATCH = ROOT / "build" / "mutate"


@dataclass(frozen=True)
class Module:
    source: str  # the file mutated
    tests: tuple[str, ...]  # pytest arguments that select the tests covering it
    # mutmut's names of the functions mutated ('x_name', 'xǁClassǁmethod'; globs), when
    # not the whole file: the safety-critical part of a large module
    only: tuple[str, ...] = ()

    @property
    def dotted(self) -> str:
        return self.source.removesuffix(".py").replace("/", ".")

    def selected(self, mutant: str) -> bool:
        import fnmatch

        return not self.only or any(
            fnmatch.fnmatchcase(mutant, f"{self.dotted}.{f}__mutmut_*") for f in self.only
        )


SAFETY = "tests/safety/"
MODULES: dict[str, Module] = {
    "envnames": Module("apexrl/tasks/envnames.py", (SAFETY + "test_envnames.py",)),
    "redact": Module("apexrl/publish/redact.py", (SAFETY + "test_redact.py",)),
    "nofollow": Module("apexrl/artifacts/nofollow.py", (SAFETY + "test_extract_nofollow.py",)),
    "archive_extract": Module(
        "apexrl/artifacts/archive_extract.py",
        (SAFETY + "test_extract_nofollow.py",),
        only=(
            "x_check_name",
            "xǁLimitsǁcheck_ratio",
            "x_extract_members",
            "xǁ_Treeǁescaping_links",
            "xǁ_Treeǁdir_path",
        ),
    ),
    "metrics": Module(
        "apexrl/eval/metrics.py",
        (SAFETY + "test_metrics_exact.py",),
        only=(
            "xǁColumnsǁpassed",
            "xǁColumnsǁscore",
            "xǁColumnsǁungraded",
            "xǁTaskTableǁfrom_columns",
            "x_bootstrap",
            "x_resampled_means",
        ),
    ),
    "seccomp": Module("apexrl/envs/local/seccomp.py", (SAFETY + "test_seccomp.py",)),
    "judge_cache": Module(
        "apexrl/grading/judge_cache.py",
        (SAFETY + "test_judge_cache.py",),
        only=("xǁJudgeCacheǁ*", "x_is_verdict"),
    ),
    "grader": Module(
        "apexrl/grading/grader.py",
        (SAFETY + "test_grade_path.py",),
        only=(
            "x_grade",
            "x_check_options",
            "x_apply_options",
            "x_final_answer",
            "x__is_db_criterion",
        ),
    ),
    "regrade": Module(
        "apexrl/eval/regrade.py",
        ("tests/eval/test_regrade_claims.py",),
        only=("x_regrade_identity", "x_claim_output", "x_judge_settings"),
    ),
    "judge_verdict": Module(
        "apexrl/grading/judge.py", (SAFETY + "test_verdicts.py",), only=("x_parse_verdict",)
    ),
    "code_sandbox": Module(
        "apexrl/worlds/apps/code.py",
        (SAFETY + "test_code_sandbox.py",),
        only=("x_command_argv", "x__egress", "x__env"),
    ),
    "sandbox": Module(
        "apexrl/envs/local/sandbox.py",
        (SAFETY + "test_sandbox_exec.py",),
        only=(
            "x_bwrap_argv",
            "x_system_binds",
            "x_base_env",
            "x_with_env",
            "x_resolve_allowed",
            "x_pass_env_from_environment",
            "xǁSandboxLimitsǁprlimit_args",
        ),
    ),
    "memcg": Module("apexrl/envs/local/memcg.py", (SAFETY + "test_memcg.py",)),
    "tito_verify": Module(
        "apexrl/tito/verify.py",
        ("tests/tito/test_verify_edges.py", "tests/tito/test_replay.py"),
        only=("x_first_mismatch", "x_replay_one", "x__tail_is_space", "x__generated"),
    ),
}

# mutmut's statuses: a mutant the tests noticed (failed, hung, crashed) or did not
KILLED = frozenset({"killed", "timeout", "segfault", "caught by type check"})
SURVIVED = frozenset({"survived", "no tests", "suspicious"})

# Survivors that are equivalent mutants (no behaviour changes), by mutant name: why.
# mutmut numbers a function's mutants in order: after an edit of a module, run it again
# and check its names here anew (`mutmut show NAME` in build/mutate/<module>/).
_R = "apexrl.publish.redact."
_N = "apexrl.artifacts.nofollow."
_M = "apexrl.eval.metrics."
_ZIP = "the two columns always have one length: strict or not, zip pairs them alike"
_EMPTY = "an empty array's dtype is never read"
_MARKER = "no credential shape or known value starts with '[': a hit never starts at a marker"
_LONGEST = "reverse string order puts a value before every prefix of it, as longest-first"
_WALK = "each of os.walk(followlinks=False) and the lstat filter keeps out link folders"
_CODEC = "codec names are case-insensitive"
EQUIVALENT: dict[str, str] = {
    _R + "x__unescape_one__mutmut_4": "an escape's letter is never 'X': the same branch",
    _R + "x_base64_fragments__mutmut_3": "alignment 3 is alignment 0 one base64 group on",
    _R + "x_base64_fragments__mutmut_10": "padding after the value lies past the slice",
    _R + "x_base64_fragments__mutmut_16": "ceil(9k/6) == ceil(8k/6) for k = 0, 1, 2",
    _R + "x_base64_fragments__mutmut_17": "ceil(8k/7) == ceil(8k/6) for k = 0, 1, 2",
    _R + "xǁRedactorǁ_gzip__mutmut_3": "`where` only names an error, which is caught",
    _R + "xǁRedactorǁ_tar__mutmut_3": "`where` only names an error, which is caught",
    _R + "xǁRedactorǁ_mask__mutmut_5": _CODEC,
    _R + "xǁRedactorǁbytes_text__mutmut_9": _CODEC,
    _R + "xǁRedactorǁbytes_text__mutmut_12": _CODEC,
    _R + "xǁRedactorǁbytes_text__mutmut_39": _CODEC,
    _R + "xǁRedactorǁbytes_text__mutmut_41": _CODEC,
    _R + "xǁRedactorǁbytes_text__mutmut_45": _CODEC,
    _R + "xǁRedactorǁbytes_text__mutmut_47": _CODEC,
    _R + "xǁRedactorǁbytes_text__mutmut_28": "unchanged strict UTF-16 re-encodes to its bytes",
    _R + "xǁ_Unescapedǁ__init____mutmut_33": "an empty last segment is never looked up",
    _R + "xǁ_Unescapedǁ__init____mutmut_7": "an empty segment shares the next one's offsets",
    _R + "xǁRedactorǁ_find__mutmut_6": "a match of the alternation always names its group",
    _R + "xǁRedactorǁ_hits__mutmut_29": "offsets are never negative: -1 and -2 start alike",
    _R + "xǁRedactorǁ_hits__mutmut_34": _MARKER,
    _R + "xǁRedactorǁ_hits__mutmut_36": _MARKER,
    _R + "xǁRedactorǁ_hits__mutmut_37": _MARKER,
    _R + "xǁRedactorǁ_hits__mutmut_38": _MARKER,
    _R + "xǁRedactorǁ_known_regex__mutmut_4": _LONGEST,
    _R + "xǁRedactorǁ_known_regex__mutmut_7": _LONGEST,
    _R + "xǁRedactorǁtext__mutmut_6": "s[None:a] is s[0:a]",
    **{
        _M + m: why
        for m, why in (
            ("x_resampled_means__mutmut_1", "the draws come in one order whatever the chunk"),
            ("x_resampled_means__mutmut_26", "integers(n) is integers(0, n)"),
            ("x_resampled_means__mutmut_35", "astype(None) is float64"),
            ("xǁTaskTableǁfrom_columns__mutmut_34", "astype(None) is float64"),
            ("xǁTaskTableǁfrom_columns__mutmut_41", "astype(None) is float64"),
            ("xǁColumnsǁungraded__mutmut_11", _ZIP),
            ("xǁColumnsǁungraded__mutmut_14", _ZIP),
            ("xǁColumnsǁungraded__mutmut_15", _ZIP),
            ("xǁTaskTableǁfrom_columns__mutmut_17", _EMPTY),
            ("xǁTaskTableǁfrom_columns__mutmut_19", _EMPTY),
            ("xǁTaskTableǁfrom_columns__mutmut_21", _EMPTY),
            ("xǁTaskTableǁfrom_columns__mutmut_23", _EMPTY),
        )
    },
    **{
        _N + m: why
        for m, why in (
            ("x_open_regular__mutmut_33", "O_NONBLOCK changes nothing for a regular file"),
            ("x_open_regular__mutmut_36", "O_NONBLOCK changes nothing for a regular file"),
            ("x_read_regular__mutmut_8", "read(None) reads all, as read() does"),
            ("x_read_tail__mutmut_10", "seek(0) at size == n reads the same bytes"),
            ("x_regular_files__mutmut_7", "followlinks=None is false"),
            ("x_regular_files__mutmut_9", "followlinks defaults to False"),
            ("x_regular_files__mutmut_10", _WALK),
            ("x_regular_files__mutmut_18", _WALK),
            ("x_scrub__mutmut_9", "followlinks=None is false"),
            ("x_scrub__mutmut_11", "followlinks defaults to False"),
            ("x_scrub__mutmut_12", _WALK),
            ("x_scrub__mutmut_57", _WALK),
            ("x_scrub__mutmut_66", "the record's indentation only"),
            ("x_scrub__mutmut_68", "the record's indentation only"),
            ("x_scrub__mutmut_71", "the record's indentation only"),
            ("x_copy_regular__mutmut_20", "fchmod sets the mode right after"),
            ("x_copy_regular__mutmut_24", "fchmod sets the mode right after"),
            ("x_copy_regular__mutmut_35", "the copy's chunk size only"),
            ("x_copy_regular__mutmut_37", "the copy's chunk size only"),
            ("x_copy_regular__mutmut_38", "the copy's chunk size only"),
        )
    },
}


_MC = "apexrl.envs.local.memcg."
_A = "apexrl.artifacts.archive_extract."
_T = "apexrl.tito.verify."
_FIELDS = "mountinfo lines have 6+ fields before ' - ' (id, parent, dev, root, mount, options)"
EQUIVALENT.update(
    {
        "apexrl.worlds.apps.code.x_command_argv__mutmut_10": "network is only tested for truth",
        _MC + "x__cgroup_mounts__mutmut_8": "mountinfo escapes spaces (\\040): one ' - ' a line",
        _MC + "x__cgroup_mounts__mutmut_12": _FIELDS,
        _MC + "x__cgroup_mounts__mutmut_13": _FIELDS,
        _MC + "xǁTrialGroupǁoom_kills__mutmut_17": "'key value' lines: one space to split at",
        _MC + "xǁTrialGroupǁremove__mutmut_1": "the default retry time only (5 or 6 s)",
        _MC + "xǁTrialGroupǁremove__mutmut_13": "> or >= at the deadline: the retry time only",
        "apexrl.envs.local.sandbox.x_resolve_allowed__mutmut_3": "missing is only tested for truth",
        "apexrl.envs.local.sandbox.x_resolve_allowed__mutmut_18": "a missing variable's key is "
        "left out, whatever stood in for it",
        **{
            "apexrl.grading.grader.x_grade__mutmut_" + n: why
            for ns, why in (
                ("39 41 42 43", "a pending criterion's verdict is built with source 'judge'"),
                ("108", "pending holds criteria only when a judge is set"),
                ("201 204 205", "gather returns one result per job: zip pairs them alike"),
            )
            for n in ns.split()
        },
        **{
            "apexrl.grading.judge.x_parse_verdict__mutmut_" + n: why
            for ns, why in (
                ("12", "text left where the reasoning was is cut away by the brace search"),
                ("14", "no reply and 'XXXX' both hold no JSON object"),
                ("23", "a 'json' tag left in the fenced text is cut away by the brace search"),
                ("38 39", "this branch has no '{' at 0: find gives -1 or >= 1"),
                ("40", "'{' and '}' are never at one index: equal only when both are -1"),
                ("52 53 54 55", "the text parsed starts with '{': an object or a JSON error"),
            )
            for n in ns.split()
        },
        _A + "x_check_name__mutmut_9": "a name starting with 'X' takes the slow path: the same",
        _A + "x_extract_members__mutmut_148": "write_file never reads its limits",
        _A + "xǁ_Treeǁdir_path__mutmut_3": "'base/' and 'base' name one folder",
        _A + "xǁ_Treeǁdir_path__mutmut_24": "a cache only: each folder is lstat-checked anew",
        _M + "x_bootstrap__mutmut_43": "low <= point <= max: the upper clip of low never binds",
        _M + "x_bootstrap__mutmut_53": "high >= point >= min: the lower clip of high never binds",
        _T + "x_replay_one__mutmut_102": "max(2, n) differs from max(1, n) only for a 1-token "
        "stream, which holds no prompt and reply",
        _T + "x_first_mismatch__mutmut_15": "one more bisection step: the scan finds the same",
        _T + "x_first_mismatch__mutmut_16": "one bisection step fewer: the scan finds the same",
        _T + "x_first_mismatch__mutmut_26": "a[:lo] == b[:lo]: a scan from 0 finds the same",
        _T + "x__generated__mutmut_10": "j = -1 checks the last id again, already no stop",
    }
)


def _scratch(name: str, mod: Module) -> Path:
    """A copy of apexrl/ and tests/ with a pyproject that points mutmut at one module."""
    work = SCRATCH / name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so")
    shutil.copytree(ROOT / "apexrl", work / "apexrl", ignore=ignore)
    shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore)
    for so in (ROOT / "apexrl").rglob("*.so"):  # built C extensions, as they are
        shutil.copy2(so, work / so.relative_to(ROOT))
    py = (ROOT / "pyproject.toml").read_text()
    py += (
        "\n[tool.mutmut]\n"
        f'source_paths = ["apexrl/"]\n'
        f"only_mutate = [{json.dumps(mod.source)}]\n"
        f"pytest_add_cli_args_test_selection = {json.dumps(list(mod.tests))}\n"
        f'pytest_add_cli_args = ["-p", "no:cacheprovider"]\n'
        "use_git_change_detection = false\n"
    )
    (work / "pyproject.toml").write_text(py)
    return work


def _results(work: Path) -> dict[str, str]:
    """mutant name -> status, from `mutmut results --all true`."""
    out = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        cwd=work, capture_output=True, text=True, check=True,
    )  # fmt: skip
    status = {}
    for line in out.stdout.splitlines():
        name, _, what = line.strip().partition(": ")
        if name and what:
            status[name] = what.strip()
    return status


def run(name: str, *, rescore: bool = False) -> dict:
    """Mutate one module (or, with `rescore`, score its last run again: after EQUIVALENT
    changed) and return its figures."""
    mod = MODULES[name]
    if rescore:
        t0 = time.monotonic()
        return _score(name, mod, SCRATCH / name, t0)
    work = _scratch(name, mod)
    # the mutated tree first on the path, for test subprocesses too (made before mutmut
    # starts: a path entry missing at start-up is never looked in again)
    (work / "mutants").mkdir()
    env = {**os.environ, "PYTHONPATH": str(work / "mutants")}
    t0 = time.monotonic()
    names = [f"{mod.dotted}.{f}__mutmut_*" for f in mod.only]
    with open(work / "mutmut.log", "w") as log:
        subprocess.run(
            [sys.executable, "-m", "mutmut", "run", *names],
            cwd=work, env=env, stdout=log, stderr=log,
        )  # fmt: skip
    return _score(name, mod, work, t0)


def recheck(name: str) -> None:
    """Run the module's current tests against each mutant its last run left alive or
    could not map to a test (code the tests run in a subprocess: mutmut's coverage
    sees only its own process), the mutant switched on by mutmut's environment variable,
    which subprocesses inherit. A failing test run kills the mutant (rechecked.json)."""
    mod, work = MODULES[name], SCRATCH / name
    for t in mod.tests:  # the tests as they are now
        shutil.copy2(ROOT / t, work / "mutants" / t)
    status = {n: s for n, s in _results(work).items() if mod.selected(n)}
    todo = sorted(n for n, s in status.items() if s in SURVIVED and n not in EQUIVALENT)
    done = _rechecked(work)
    for n in todo:
        env = {**os.environ, "PYTHONPATH": str(work / "mutants"), "MUTANT_UNDER_TEST": n}
        try:
            r = subprocess.run(
                [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                 *mod.tests],
                cwd=work / "mutants", env=env, capture_output=True, text=True, timeout=900,
            )  # fmt: skip
            rc = r.returncode
        except subprocess.TimeoutExpired:
            rc = 1  # the mutant hangs the tests: noticed, as mutmut counts a timeout
        done[n] = "killed" if rc == 1 else "survived" if rc == 0 else "error"
        print(f"{n}: {done[n]}", flush=True)
        (work / "rechecked.json").write_text(json.dumps(done, indent=1, sort_keys=True))


def _rechecked(work: Path) -> dict[str, str]:
    f = work / "rechecked.json"
    return json.loads(f.read_text()) if f.is_file() else {}


def _score(name: str, mod: Module, work: Path, t0: float) -> dict:
    status = {n: s for n, s in _results(work).items() if mod.selected(n)}
    status.update({n: s for n, s in _rechecked(work).items() if s == "killed" and n in status})
    survivors = sorted(n for n, s in status.items() if s in SURVIVED)
    equivalent = [n for n in survivors if n in EQUIVALENT]
    killed = sum(s in KILLED for s in status.values())
    others = {s for s in status.values() if s not in KILLED | SURVIVED}
    denom = killed + len(survivors) - len(equivalent)
    return {
        "source": mod.source,
        "tests": list(mod.tests),
        "functions": list(mod.only) or "all",
        "mutants": len(status),
        "killed": killed,
        "survived": len(survivors),
        "equivalent": len(equivalent),
        "score": round(killed / denom, 3) if denom else None,
        "survivors": [n for n in survivors if n not in EQUIVALENT],
        "other_statuses": sorted(others),
        "wall_s": round(time.monotonic() - t0, 1),
    }


def record(name: str, res: dict, *, keep_wall: bool = False) -> None:
    current = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    mutation = current.get("mutation") or {}
    old = mutation.get("modules", {}).get(name)
    if keep_wall and old:  # a rescore: the run's own time and date stay
        res = {**res, "wall_s": old["wall_s"], "date": old.get("date")}
    else:
        res = {**res, "date": time.strftime("%Y-%m-%d", time.gmtime())}
    mutation.setdefault("modules", {})[name] = res
    mods = mutation["modules"].values()
    killed = sum(m["killed"] for m in mods)
    survived = sum(m["survived"] for m in mods)
    equivalent = sum(m["equivalent"] for m in mods)
    mutation.update(
        killed=killed,
        survived=survived,
        equivalent=equivalent,
        score=round(killed / (killed + survived - equivalent), 3) if killed + survived else None,
        command="make mutate MODULES='<name> ...' (nice -n 10 python -m tests.mutate; mutmut)",
        tool=f"mutmut {_mutmut_version()}",
        date=time.strftime("%Y-%m-%d", time.gmtime()),
    )
    current["mutation"] = mutation
    tmp = RESULTS.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, RESULTS)


def _mutmut_version() -> str:
    from importlib.metadata import version

    return version("mutmut")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.mutate")
    ap.add_argument("modules", nargs="*", help=f"of: {', '.join(MODULES)} (default: all)")
    ap.add_argument("--list", action="store_true", help="list the modules and their tests")
    ap.add_argument("--no-record", action="store_true", help="do not write bench/results.json")
    ap.add_argument(
        "--rescore", action="store_true", help="score the last run again (EQUIVALENT changed)"
    )
    ap.add_argument(
        "--recheck",
        action="store_true",
        help="run the current tests against the last run's survivors and untested mutants",
    )
    a = ap.parse_args(argv)
    if a.list:
        for n, m in MODULES.items():
            print(f"{n:14} {m.source}  <- {' '.join(m.tests)}")
        return 0
    unknown = [n for n in a.modules if n not in MODULES]
    if unknown:
        ap.error(f"unknown module(s) {', '.join(unknown)}; one of: {', '.join(MODULES)}")
    for name in a.modules or list(MODULES):
        if a.recheck:
            recheck(name)
        res = run(name, rescore=a.rescore or a.recheck)
        print(json.dumps({name: res}, indent=2))
        if not a.no_record:
            record(name, res, keep_wall=a.rescore or a.recheck)
    return 0


if __name__ == "__main__":
    sys.exit(main())

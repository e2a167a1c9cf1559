"""Every entry of the refused env-name list, the plain-name rule, and where names are
looked for in a task.toml (issue 42: no test checked each entry, PATH among them)."""

from __future__ import annotations

import pytest

from apexrl.tasks import envnames

LOADING = "it changes how programs load or start"
NOT_PLAIN = "not a plain variable name"


@pytest.mark.parametrize("name", sorted(envnames.NAMES))
def test_each_listed_name_is_refused_in_any_case(name):
    assert envnames.why_refused(name) == LOADING
    assert envnames.why_refused(name.lower()) == LOADING
    assert envnames.why_refused("X" + name) is None  # the name itself, not a part of one


def test_path_and_the_list_itself():
    """The list is what the docstring promises (a name dropped from it is a hole)."""
    assert envnames.why_refused("PATH") == LOADING
    assert {
        "GLIBC_TUNABLES", "GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH",
        "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR", "PATH", "PERL5LIB",
        "PERL5OPT", "PERLLIB", "RUBYLIB", "RUBYOPT", "NODE_OPTIONS", "NODE_PATH",
        "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "OPENSSL_CONF",
        "OPENSSL_ENGINES", "OPENSSL_MODULES", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4",
        "PROMPT_COMMAND",
    } == envnames.NAMES  # fmt: skip
    assert envnames.PREFIXES == ("LD_", "MALLOC_", "PYTHON", "BASH_FUNC_")


@pytest.mark.parametrize(
    "name",
    ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "ld_preload", "MALLOC_ARENA_MAX",
     "PYTHONPATH", "PYTHONSTARTUP", "pythonhome", "BASH_FUNC_ls%%"[:-2], "LD_"],
)  # fmt: skip
def test_prefixed_names_are_refused(name):
    assert envnames.why_refused(name) == LOADING


@pytest.mark.parametrize(
    "name", ["", "1ABC", "A-B", "A B", "A=B", "BASH_FUNC_ls%%", "A\nB", "A.B", "É", "PATH "]
)
def test_names_that_are_not_plain_are_refused(name):
    assert envnames.why_refused(name) == NOT_PLAIN


@pytest.mark.parametrize(
    "name", ["HOME", "LANG", "A", "_", "_A1", "a_b_9", "MY_PATH", "PATHS", "XPYTHON", "ENVX",
             "OLD_LD_PRELOAD", "MALLOC", "TZ", "NODE_ENV"]
)  # fmt: skip
def test_ordinary_names_pass(name):
    assert envnames.why_refused(name) is None


def test_refused_names_keeps_order_and_reasons():
    names = ["HOME", "PATH", "a b", "LANG", "LD_PRELOAD"]
    assert envnames.refused_names(names) == [
        ("PATH", LOADING), ("a b", NOT_PLAIN), ("LD_PRELOAD", LOADING)
    ]  # fmt: skip
    assert envnames.refused_names([]) == []


def test_every_env_table_of_a_task_is_read():
    raw = {
        "environment": {"env": {"PATH": "/x"}},
        "verifier": {"env": {"OK": "1"}, "environment": {"env": {"LD_PRELOAD": "/x.so"}}},
        "solution": {"env": {"BASH_ENV": "/x"}},
        "agent": {"env": {"PYTHONPATH": "/x"}, "environment": "not a table"},
        "other": {"env": {"PATH": "/ignored: not an env table"}},
        "steps": [
            {"env": {"ENV": "/x"}},
            {"verifier": {"env": {"PS4": "$(x)"}}, "agent": {"nothing": 1}},
            "not a step",
        ],
    }
    assert list(envnames.env_tables(raw)) == [
        ("[environment.env]", {"PATH": "/x"}),
        ("[verifier.env]", {"OK": "1"}),
        ("[verifier.environment.env]", {"LD_PRELOAD": "/x.so"}),
        ("[solution.env]", {"BASH_ENV": "/x"}),
        ("[agent.env]", {"PYTHONPATH": "/x"}),
        ("[[steps]] #1 env", {"ENV": "/x"}),
        ("[[steps]] #2 verifier.env", {"PS4": "$(x)"}),
    ]
    assert envnames.task_env_problems(raw) == [
        f"[environment.env] sets PATH: {LOADING}; remove it from task.toml",
        f"[verifier.environment.env] sets LD_PRELOAD: {LOADING}; remove it from task.toml",
        f"[solution.env] sets BASH_ENV: {LOADING}; remove it from task.toml",
        f"[agent.env] sets PYTHONPATH: {LOADING}; remove it from task.toml",
        f"[[steps]] #1 env sets ENV: {LOADING}; remove it from task.toml",
        f"[[steps]] #2 verifier.env sets PS4: {LOADING}; remove it from task.toml",
    ]
    assert list(envnames.env_tables({"environment": "x", "steps": None})) == []
    assert list(envnames.env_tables({"verifier": {"env": "x"}})) == []


def test_check_env_names_each_refused_name():
    envnames.check_env(None, "exec")
    envnames.check_env({}, "exec")
    envnames.check_env({"HOME": "/root"}, "exec")
    with pytest.raises(envnames.RefusedEnvError) as e:
        envnames.check_env({"HOME": "/", "PATH": "/x", "1X": "y"}, "exec of task t1")
    assert str(e.value) == (
        f"exec of task t1: refused environment variable(s) PATH ({LOADING}), 1X ({NOT_PLAIN})"
    )
    assert isinstance(e.value, ValueError)

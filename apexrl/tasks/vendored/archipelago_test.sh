#!/usr/bin/env bash
# Harbor verifier entrypoint of a task converted with `apexrl tasks convert --grader-from`:
# archipelago's grading runner (vendored in runner/) grades the run; grade.py writes
# /logs/verifier/reward.json. Runs after the agent; /tests is never visible to the agent.
#
# The runner needs Python 3.13 and its locked dependencies. In order:
#   1. $ARCHIPELAGO_GRADING_PYTHON: a Python that has them (apexrl's local environment
#      sets it when given grading_runtime=..., binding a built runner venv read-only);
#   2. uv and a package index: `uv sync --frozen` of runner/uv.lock into /tmp (what a
#      world image with uv and python3.13 does when the verifier has network);
#   3. otherwise no reward is written: a grading that could not run is not a 0.
set -uo pipefail
out="${APEXRL_VERIFIER_DIR:-/logs/verifier}"
mkdir -p "$out"
# Nothing the agent left in /logs/verifier counts (a reward file, planted verdicts):
# clear it, keeping only the stdout log Harbor is writing for this script.
find "$out" -mindepth 1 -maxdepth 1 ! -name test-stdout.txt -exec rm -rf -- {} +
here="$(cd "$(dirname "$0")" && pwd)"
# Nothing the agent left runs here: start in the tests folder, with a fresh HOME and
# TMPDIR (a .pth under the agent's user site, a venv or uv cache it planted), and an
# isolated Python (-I: a package like importlib/ in the working folder is not imported).
cd "$here"
scratch="$(mktemp -d)"
export HOME="$scratch" TMPDIR="$scratch"
py="${ARCHIPELAGO_GRADING_PYTHON:-}"
has_deps='import importlib.util as u, sys; sys.exit(not (u.find_spec("litellm") and u.find_spec("pydantic")))'
if [ -n "$py" ] && ! "$py" -I -c "$has_deps" >/dev/null 2>&1; then
  echo "ARCHIPELAGO_GRADING_PYTHON=$py cannot import the runner's dependencies" >&2
  py=""
fi
if [ -z "$py" ] && command -v uv >/dev/null 2>&1; then
  venv="$TMPDIR/archipelago-grading-venv"
  if UV_PROJECT_ENVIRONMENT="$venv" uv sync --frozen --no-dev --no-install-project \
    --project "$here/runner" --quiet >&2; then
    py="$venv/bin/python"
  else
    echo "uv sync of the grading runner's dependencies failed (no package index?)" >&2
  fi
fi
if [ -z "$py" ]; then
  msg="archipelago's grading runner cannot run here: no Python with its dependencies."
  msg="$msg Set ARCHIPELAGO_GRADING_PYTHON (apexrl's local environment: grading_runtime="
  msg="$msg an archipelago checkout, or APEXRL_GRADING_RUNTIME), or give the verifier uv,"
  msg="$msg python3.13 and a package index."
  echo "$msg" | tee "$out/grading_unavailable.txt" >&2
  exit 4
fi
exec "$py" -I "$here/grade.py"

#!/usr/bin/env bash
# Harbor verifier entrypoint: grade the run, write /logs/verifier/reward.json.
# Runs after the agent; /tests is never visible to the agent.
set -euo pipefail
mkdir -p /logs/verifier
# Nothing the agent left in /logs/verifier counts (a reward file, planted verdicts):
# clear it, keeping only the stdout log Harbor is writing for this script.
find /logs/verifier -mindepth 1 -maxdepth 1 ! -name test-stdout.txt -exec rm -rf -- {} +
# Nothing the agent left elsewhere runs here either: start in /tests, with a fresh HOME
# and TMPDIR (a .pth under the agent's user site, a module in its working folder), and
# an isolated Python (-I: no PYTHON* variables, no user site, no script folder on sys.path).
cd /tests
scratch="$(mktemp -d)"
export HOME="$scratch" TMPDIR="$scratch"
exec python3 -I /tests/grade.py

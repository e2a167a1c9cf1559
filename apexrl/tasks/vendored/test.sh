#!/usr/bin/env bash
# Harbor verifier entrypoint: grade the run, write /logs/verifier/reward.json.
# Runs after the agent; /tests is never visible to the agent.
set -euo pipefail
mkdir -p /logs/verifier
# Nothing the agent left in /logs/verifier counts (a reward file, planted verdicts):
# clear it, keeping only the stdout log Harbor is writing for this script.
find /logs/verifier -mindepth 1 -maxdepth 1 ! -name test-stdout.txt -exec rm -rf -- {} +
exec python3 /tests/grade.py

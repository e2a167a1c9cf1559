#!/usr/bin/env bash
# Harbor verifier entrypoint: grade the run, write /logs/verifier/reward.json.
# Runs after the agent; /tests is never visible to the agent.
set -euo pipefail
mkdir -p /logs/verifier
# Drop any reward file the agent may have written: only this verifier's counts.
rm -f /logs/verifier/reward.json /logs/verifier/reward.txt
exec python3 /tests/grade.py

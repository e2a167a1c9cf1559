"""Evaluation: run trials over a task dataset (resumable, bounded concurrency or Ray),
aggregate Pass@1 / Pass@k / Pass^k / mean score with bootstrap CIs, and report.

RUN_DIR layout (read by `apexrl publish traces`; keep it stable):

    run.json                      EvalRunConfig: the full resolved configuration
    results.jsonl                 append-only journal, one EvalResultRow per line (fsync'd)
    results.parquet               the journal compacted: one row per trial (last row wins)
    trajectories/<trial_id>/      trajectory.json (ATIF) + tokens.jsonl, written atomically
    logs/<trial_id>/              the trial's own folder (agent/, verifier/ logs)
    summary.json                  EvalSummary
"""

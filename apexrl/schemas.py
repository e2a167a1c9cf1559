"""Every artifact record apexrl writes, by name, for `apexrl schema NAME`.

Records live beside the code that writes them; this registry gathers them so
`artifacts` (the lowest layer) never imports the areas above it.
"""

from __future__ import annotations

from pydantic import BaseModel


def all_schemas() -> dict[str, type[BaseModel]]:
    from apexrl.agent.records import AgentRunRecord
    from apexrl.artifacts.models import SCHEMAS
    from apexrl.eval.models import EvalRunConfig, EvalSummary
    from apexrl.grading.models import GradeResult
    from apexrl.publish.models import PublishFile, PublishResult, RedactionFinding
    from apexrl.tito.records import TitoFinding
    from apexrl.tito.trajectory import TitoTrajectory
    from apexrl.train.concurrency import ConcurrencyPlan
    from apexrl.train.launch import RunManifest
    from apexrl.trial.config import TrialConfig
    from apexrl.worlds.models import (
        FileChange,
        ServeRecord,
        SnapshotRecord,
        ToolRecord,
        WorldDiff,
    )

    return {
        **SCHEMAS,
        "world-serve": ServeRecord,
        "world-tool": ToolRecord,
        "world-snapshot": SnapshotRecord,
        "world-file-change": FileChange,
        "world-diff": WorldDiff,
        "tito-trajectory": TitoTrajectory,
        "tito-finding": TitoFinding,
        "agent-run": AgentRunRecord,
        "trial-config": TrialConfig,
        "grade-result": GradeResult,
        "eval-run-config": EvalRunConfig,
        "eval-summary": EvalSummary,
        "train-manifest": RunManifest,
        "concurrency-plan": ConcurrencyPlan,
        "publish-file": PublishFile,
        "publish-result": PublishResult,
        "redaction-finding": RedactionFinding,
    }

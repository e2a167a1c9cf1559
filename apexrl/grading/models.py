"""Records of grading: one verdict per rubric criterion, and the grade of a trial."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from apexrl.artifacts.models import Record

VerdictSource = Literal["deterministic", "reference", "judge", "unjudged"]


class Verdict(BaseModel):
    """How one criterion was decided.

    source: deterministic (its check), reference (the output is the gold output),
    judge (the LLM judge's JSON verdict), unjudged (needs a judge and none was set:
    counts as unmet)."""

    model_config = ConfigDict(extra="forbid")
    verifier_id: str
    criteria: str = ""
    met: bool
    source: VerdictSource
    rationale: str | None = None
    error: str | None = None
    judge_model: str | None = None
    attempts: int = 0  # judge calls made for this criterion (bad JSON is retried)
    prompt_sha256: str | None = None  # of the judge's user prompt (with judge_system_prompt)


class FileChangeSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")
    created: list[str] = Field(default_factory=list)
    modified: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)


class GradeResult(Record):
    """The verifier's output for one trial (written as grading.json beside reward.json)."""

    task_id: str = ""
    reward: float  # the trial reward: `score` or pass (0/1), per reward_mode
    reward_mode: Literal["pass", "score"] = "pass"
    passed: bool = False  # every criterion met (Pass@k counts this, whatever the reward)
    score: float  # fraction of criteria met
    criteria_met: int
    criteria_total: int
    verdicts: list[Verdict]
    changes: FileChangeSummary | None = None  # None: no before-state to diff against
    answer_chars: int = 0
    judge_model: str | None = None
    judge_prompt_version: str | None = None
    judge_system_prompt: str | None = None
    duration_s: float = 0.0
    grader: Literal["apexrl", "archipelago"] = "apexrl"  # who graded (--grader)
    grader_commit: str | None = None  # archipelago: the checkout's commit, else its content key
    grader_options: list[str] = Field(default_factory=list)  # GRADER_OPTIONS names in force
    judge_calls: int | None = None  # judge calls made (cached prompts cost none); None: unknown

    @staticmethod
    def tally(verdicts: list[Verdict], reward: str) -> dict:
        """The fields the verdicts decide: criteria met and total, passed (every criterion
        met, none at all is no pass), score (the fraction met) and the reward per `reward`
        ("score", else pass as 0/1)."""
        met = sum(v.met for v in verdicts)
        total = len(verdicts)
        passed = total > 0 and met == total
        score = met / total if total else 0.0
        return {
            "reward": score if reward == "score" else float(passed),
            "reward_mode": reward,
            "passed": passed,
            "score": score,
            "criteria_met": met,
            "criteria_total": total,
            "verdicts": verdicts,
        }

    def rewards(self) -> dict[str, float]:
        """Harbor's reward.json: a flat object of numbers."""
        return {
            "reward": self.reward,
            "pass": float(self.passed),
            "score": self.score,
            "criteria_met": float(self.criteria_met),
            "criteria_total": float(self.criteria_total),
        }

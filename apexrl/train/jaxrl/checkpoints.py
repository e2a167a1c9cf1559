"""The checkpoints of a JAX run (RL and the supervised warm start write the same layout).

<ckpt_dir>/global_step_<N>/: trainer/ (adapter + optimizer state, for --resume),
adapter.tar.gz (the PEFT adapter an engine loads and `apexrl train export` merges) and
state.json (written last: a folder without it is incomplete and ignored);
<ckpt_dir>/latest_ckpt_global_step.txt names the latest, as SkyRL names it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from apexrl.artifacts.atomic import write_text_atomic

if TYPE_CHECKING:
    from apexrl.train.recipe import LoadedRecipe

MANIFEST_NAME = "apexrl_manifest.json"
LATEST = "latest_ckpt_global_step.txt"
ADAPTER = "adapter.tar.gz"


def latest_step(ckpt_dir: Path) -> int | None:
    """The latest complete checkpoint's step, or None."""
    f = Path(ckpt_dir) / LATEST
    if not f.is_file():
        return None
    try:
        step = int(f.read_text().strip())
    except ValueError:
        return None
    return step if (Path(ckpt_dir) / f"global_step_{step}" / "state.json").is_file() else None


class RunFolder:
    """Where a run (RL or warm start) checkpoints: the recipe's checkpoint.path with
    {run_name} filled in (`ckpt_dir`), the folder above it (`root`), and whether this
    start resumes from what is there."""

    def __init__(self, loaded: LoadedRecipe, *, resume: bool) -> None:
        self.loaded = loaded
        self.run_name = loaded.recipe.resolved_run_name
        path = loaded.recipe.checkpoint.path.format(run_name=self.run_name)
        self.ckpt_dir = Path(path).expanduser().resolve()
        self.root = self.ckpt_dir.parent
        self.resume = resume

    def latest_step(self) -> int | None:
        return latest_step(self.ckpt_dir)

    def check_resume(self) -> str:
        from apexrl.train.launch import resume_line

        return resume_line(str(self.ckpt_dir), self.latest_step(), self.resume)


def write_checkpoint(ckpt_dir: Path, policy, step: int, state: dict, *, keep: int) -> Path:
    """global_step_<step>/ for the policy (a JaxPolicy), `keep` of them kept."""
    ckpt_dir = Path(ckpt_dir)
    final = ckpt_dir / f"global_step_{step}"
    tmp = ckpt_dir / f".global_step_{step}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    policy.save_state(tmp / "trainer")
    policy.save_adapter(tmp / ADAPTER)
    (tmp / "state.json").write_text(json.dumps({"global_step": step, **state}), "utf-8")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    write_text_atomic(ckpt_dir / LATEST, str(step))
    steps = sorted(
        int(p.name.removeprefix("global_step_"))
        for p in ckpt_dir.glob("global_step_*")
        if p.name.removeprefix("global_step_").isdigit()
    )
    for s in steps[: -max(keep, 1)]:
        shutil.rmtree(ckpt_dir / f"global_step_{s}", ignore_errors=True)
    return final

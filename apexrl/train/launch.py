"""Submitting a run: the job folder, the manifest, Ray's job submission API, resume.

The job is `python -m apexrl.train.entrypoint run_spec.json` in a Ray job whose
working_dir holds run_spec.json and manifest.json, with apexrl itself shipped as a
py_module (the cluster runs exactly this code) and the forwarded variables in the
runtime env's env_vars (read at submit time; never written to a file).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from apexrl import __version__
from apexrl.artifacts.checkout import checkout_revision
from apexrl.errors import ApexError, RemoteError, UsageError
from apexrl.tasks.pack import source_digest
from apexrl.train.recipe import LoadedRecipe
from apexrl.train.render import RunSpec
from apexrl.train.sft_data import SftSource
from apexrl.trial.config import TrialSpec

MANIFEST_NAME = "apexrl_manifest.json"
SPEC_NAME = "run_spec.json"
TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


class RunManifest(BaseModel):
    """Written next to the checkpoints: what exactly this run is."""

    model_config = ConfigDict(extra="forbid")
    schema_version: str = "1"
    apexrl_version: str = __version__
    run_name: str
    recipe: str
    recipe_source: str
    recipe_chain: list[str]
    recipe_sha256: str
    overrides: list[str]
    model: str
    dataset: str | None = None
    dataset_digest: str | None = None
    world_images: dict[str, str] = Field(default_factory=dict)  # world_id -> ref@digest
    git_revision: str | None = None
    git_dirty: bool | None = None
    resume: bool = False
    checkpoint_path: str
    ray_address: str | None = None
    job_id: str | None = None
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat())
    env_forwarded: list[str] = Field(default_factory=list)  # names present at submit, no values
    trial: TrialSpec | None = None  # how the rollouts' trials run (the same record as eval's)
    # the training data's licence and terms (apexrl.tasks.terms), and the user's statement
    # of their right to train on data marked evaluation-only (--training-rights)
    data_terms: list[dict] = Field(default_factory=list)
    training_rights: str | None = None
    # `apexrl train sft`: the eval runs learned from and the trials kept of each
    sft_sources: list[SftSource] | None = None
    # what makes two warm starts one run (apexrl.train.jaxrl.sft.run_identity): a --resume
    # or a fresh start over a folder whose manifest has another is refused
    sft_identity: str | None = None


def git_revision(cwd: Path | None = None) -> tuple[str | None, bool | None]:
    """The revision of the apexrl source tree that runs (not of the caller's working
    directory); (None, None) when apexrl is not a git checkout (an installed wheel)."""
    if cwd is None:
        cwd = package_dir().parent
        if not (cwd / ".git").exists():
            return None, None
    return checkout_revision(cwd)


def world_images(images: str | None) -> dict[str, str]:
    if not images or not Path(images).expanduser().is_file():
        return {}
    from apexrl.artifacts.jsonl import read_records
    from apexrl.artifacts.models import ImageRecord

    return {
        rec.world_id: f"{rec.ref.split('@')[0]}@{rec.digest}"
        for rec in read_records(Path(images).expanduser(), ImageRecord)
    }


def recipe_provenance(loaded: LoadedRecipe) -> dict:
    """The manifest fields every backend records: where the recipe came from, its
    overrides, and the code's git revision."""
    rev, dirty = git_revision()
    return {
        "recipe_source": loaded.source,
        "recipe_chain": loaded.chain,
        "recipe_sha256": loaded.sha256,
        "overrides": loaded.overrides,
        "git_revision": rev,
        "git_dirty": dirty,
    }


def make_manifest(
    loaded: LoadedRecipe, spec: RunSpec, *, ray_address: str | None, environ=None
) -> RunManifest:
    environ = os.environ if environ is None else environ
    return RunManifest(
        run_name=spec.run_name,
        recipe=spec.recipe,
        **recipe_provenance(loaded),
        model=spec.skyrl["trainer.policy.model.path"],
        dataset=spec.data_train,
        dataset_digest=source_digest(spec.data_train),
        world_images=world_images(loaded.recipe.data.images),
        resume=spec.resume,
        checkpoint_path=spec.plan.checkpoint_path,
        ray_address=ray_address,
        env_forwarded=[k for k in spec.env_forward if environ.get(k)],
        trial=spec.generator.spec(),
    )


# --- checkpoints --------------------------------------------------------------------------
def latest_checkpoint(ckpt_path: str) -> int | None:
    """SkyRL's latest saved step in a local checkpoint folder (None: none, or remote)."""
    if "://" in ckpt_path:
        return None
    f = Path(ckpt_path).expanduser() / "latest_ckpt_global_step.txt"
    if f.is_file():
        try:
            return int(f.read_text().strip())
        except ValueError:
            return None
    return None


def check_resume(spec: RunSpec) -> str:
    """Refuse to start fresh over existing checkpoints, or to resume from nothing."""
    ckpt = spec.plan.checkpoint_path
    step = latest_checkpoint(ckpt)
    if "://" in ckpt:
        return "resume: latest checkpoint in " + ckpt if spec.resume else "fresh run"
    return resume_line(ckpt, step, spec.resume)


def resume_line(ckpt: str, step: int | None, resume: bool) -> str:
    """The start line for a run whose latest checkpoint is `step`; refuses a fresh start
    over checkpoints and a resume from nothing (GPU and JAX paths alike)."""
    if resume and step is None:
        raise UsageError(
            f"--resume: no checkpoint in {ckpt}",
            hint="drop --resume to start fresh, or set checkpoint.path to the run's folder",
        )
    if not resume and step is not None:
        raise UsageError(
            f"{ckpt} already holds checkpoints (step {step})",
            hint="pass --resume to continue, or --set run_name=NEW for a new run",
        )
    return f"resume from global_step_{step}" if resume else "fresh run"


# --- the job ------------------------------------------------------------------------------
def job_dir(spec: RunSpec, manifest: RunManifest) -> Path:
    d = Path(tempfile.mkdtemp(prefix="apexrl-job-"))
    (d / SPEC_NAME).write_text(spec.model_dump_json(indent=1), "utf-8")
    (d / MANIFEST_NAME).write_text(manifest.model_dump_json(indent=1), "utf-8")
    return d


def package_dir() -> Path:
    import apexrl

    return Path(apexrl.__file__).resolve().parent


def job_runtime_env(spec: RunSpec, workdir: Path, *, ship_code: bool, environ=None) -> dict:
    from apexrl.train.render import runtime_env

    env = runtime_env(spec, environ)
    env["working_dir"] = str(workdir)
    if ship_code:
        env["py_modules"] = [str(package_dir())]
    return env


def entrypoint_command(check_only: bool, python: str = "python") -> str:
    """The job's command; `python` is the cluster's interpreter (this one for a local Ray)."""
    import shlex

    cmd = f"{shlex.quote(python)} -m apexrl.train.entrypoint {SPEC_NAME}"
    return cmd + " --check-only" if check_only else cmd


class RayJobs:
    """Thin wrapper over Ray's JobSubmissionClient with classified failures."""

    def __init__(self, address: str, timeout_s: float = 60.0) -> None:
        try:
            from ray.job_submission import JobSubmissionClient
        except ImportError:  # pragma: no cover - ray is in the train and dev extras
            raise UsageError("Ray is not installed", hint="pip install 'apexrl[train]'") from None
        self.address = address
        try:
            self.client = JobSubmissionClient(address)
        except Exception as e:
            raise RemoteError(
                f"cannot reach the Ray cluster at {address}: {e}",
                retryable=True,
                hint="is the head node up and its dashboard port (8265) reachable?",
            ) from None

    def submit(
        self, entrypoint: str, runtime_env: dict, submission_id: str, wait_s: float = 120.0
    ) -> str:
        """Submit; a head whose job agent is still starting is retried for `wait_s`."""
        deadline = time.monotonic() + wait_s
        delay = 1.0
        while True:
            try:
                return self.client.submit_job(
                    entrypoint=entrypoint, runtime_env=runtime_env, submission_id=submission_id
                )
            except Exception as e:
                starting = "No available agent" in str(e) or "try again later" in str(e)
                if not starting or time.monotonic() + delay > deadline:
                    raise RemoteError(f"Ray rejected the job: {e}", retryable=starting) from None
                time.sleep(delay)
                delay = min(delay * 2, 10.0)

    def status(self, job_id: str) -> str:
        return str(self.client.get_job_status(job_id).value)

    def logs(self, job_id: str) -> str:
        return self.client.get_job_logs(job_id)

    def stop(self, job_id: str) -> bool:
        return bool(self.client.stop_job(job_id))

    def tail(self, job_id: str, write: Callable[[str], Any], on_status, poll_s: float) -> str:
        """Stream logs with Ray's websocket tail (new text only, however long the log),
        reporting status changes; returns the final status."""
        import asyncio

        async def run() -> str:
            last = None

            async def watch() -> str:
                nonlocal last
                while True:
                    status = self.status(job_id)
                    if status != last:
                        on_status(status)
                        last = status
                    if status in TERMINAL:
                        return status
                    await asyncio.sleep(poll_s)

            watcher = asyncio.create_task(watch())
            async for chunk in self.client.tail_job_logs(job_id):
                write(chunk)
            status = await watcher
            return status

        return asyncio.run(run())


def follow(
    jobs: RayJobs,
    job_id: str,
    *,
    write: Callable[[str], Any],
    on_status: Callable[[str], Any] = lambda s: None,
    poll_s: float = 1.0,
    timeout_s: float | None = None,
) -> str:
    """Stream the job's logs (new text only) until it ends; returns the final status."""
    if hasattr(jobs, "tail") and timeout_s is None:
        return jobs.tail(job_id, write, on_status, poll_s)
    seen = 0
    last = None
    t0 = time.monotonic()
    while True:
        status = jobs.status(job_id)
        if status != last:
            on_status(status)
            last = status
        text = jobs.logs(job_id)
        if len(text) > seen:
            write(text[seen:])
            seen = len(text)
        if status in TERMINAL:
            return status
        if timeout_s is not None and time.monotonic() - t0 > timeout_s:
            raise RemoteError(f"job {job_id} still {status} after {timeout_s:.0f}s", retryable=True)
        time.sleep(poll_s)


class LocalRay:
    """A Ray head started for this run on 127.0.0.1 (its own temp dir, dashboard for the
    job API); stopped by terminating the process we started (never `ray stop`)."""

    def __init__(self, num_cpus: int | None = None, timeout_s: float = 90.0) -> None:
        self.num_cpus = num_cpus
        self.timeout_s = timeout_s
        self.proc: subprocess.Popen | None = None
        self.tmp = Path(tempfile.mkdtemp(prefix="apxray-", dir="/tmp"))
        self.address = ""

    def __enter__(self) -> LocalRay:
        import socket

        def free() -> int:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                return s.getsockname()[1]

        port, dash = free(), free()
        ray_bin = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
        if not ray_bin:
            raise UsageError(
                "the `ray` command is not installed", hint="pip install 'apexrl[train]'"
            )
        cmd = [
            ray_bin, "start", "--head", "--block",
            "--node-ip-address=127.0.0.1", f"--port={port}",
            "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}",
            f"--temp-dir={self.tmp}", "--disable-usage-stats",
        ]  # fmt: skip
        if self.num_cpus is not None:
            cmd.append(f"--num-cpus={self.num_cpus}")
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
        self.log = (self.tmp / "head.log").open("wb")
        self.proc = subprocess.Popen(
            cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        self.address = f"http://127.0.0.1:{dash}"
        self.gcs_address = f"127.0.0.1:{port}"  # for ray.init(address=...)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        import httpx

        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise ApexError(f"local Ray head exited: see {self.tmp / 'head.log'}")
            try:
                r = httpx.get(self.address + "/api/version", timeout=2.0)
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.__exit__(None, None, None)
        raise RemoteError(f"local Ray head not ready after {self.timeout_s:.0f}s", retryable=True)

    def __exit__(self, *exc) -> None:
        import signal

        if self.proc is not None and self.proc.poll() is None:
            # SIGTERM stops the head's processes (all in the group we created); the
            # blocking `ray start` itself lingers, so the group gets SIGKILL after a grace.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        if getattr(self, "log", None):
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

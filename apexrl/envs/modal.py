"""`modal`: a Harbor environment running each trial in a Modal sandbox from the world's image.

Import path: `apexrl.envs.modal:ModalEnvironment`. Kwargs:
  app_name             Modal app the sandboxes belong to (default "apexrl")
  registry_secret      Modal secret holding AWS credentials for ECR pulls
                       (default $APEXRL_MODAL_ECR_SECRET, else "aws-ecr")
  private_registry_secret  for a non-ECR private registry: a Modal secret with
                       REGISTRY_USERNAME / REGISTRY_PASSWORD
  image                image ref override (default: the task's world image, from
                       task.toml [metadata] image + image_digest, else the Dockerfile FROM)
  image_profile        how the image runs its world (apexrl.envs.profiles): "apexrl"
                       (entrypoint, port 8080, /world) or "mercor" (/app/tools/start.sh
                       <task_slug>, port 8000, /filesystem + /.apps_data, POST
                       /data/snapshot); default: what the task's metadata records
  gateway_port         the world gateway's port inside the sandbox (default: the profile's)
  cpus, memory_mb, timeout_s  the sandbox's size and lifetime, as apexrl.trial.config.
                       SandboxSettings names them (`--sandbox-cpus/--sandbox-memory-mb/
                       --sandbox-timeout-s`, a recipe's agent.sandbox_*); turned into
                       Modal's own keywords (cpu, memory, timeout) here only. Modal's
                       default lifetime is 5 minutes: too short
  region, secrets (more Modal secret names), gateway_ready_timeout_s

The gateway's port is declared when the sandbox is created, through Modal's
public API (`Sandbox.create(..., encrypted_ports=[port])`), and reached through
the sandbox's tunnel (`sandbox.tunnels()[port].url`); nothing of Harbor's own
Modal environment is copied or patched. The sandbox runs the image's entrypoint
(`apexrl-world-entrypoint`: the world's MCP gateway on 0.0.0.0:port); the task's
input files are overlaid on /world after it starts (the tool servers read files
on each call). Task env keys that are apexrl secrets (required_env_keys, e.g.
FMP_API_KEY) are passed as an ephemeral Modal secret, never on a command line.

`modal` is imported lazily (pip install modal); it is not a dependency of apexrl.
"""

from __future__ import annotations

import asyncio
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities

from apexrl.envs.profiles import APEXRL
from apexrl.errors import UsageError

ENV_TYPE = "apexrl-modal"
ECR_HOST = re.compile(r"^\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/")
WORLD_ROOT = "/world"
ENTRYPOINT = APEXRL.command[0]  # apexrl world images' entrypoint
LOG_DIRS = ("/logs/agent", "/logs/verifier", "/logs/artifacts")
DEFAULT_SANDBOX_TIMEOUT_S = 4 * 3600


def _modal():
    try:
        import modal
    except ImportError as e:
        raise UsageError(
            "the modal environment needs the Modal client",
            hint="pip install 'apexrl[modal]' (or pip install modal), then modal setup",
        ) from e
    return modal


async def _aio(fn, *args: Any, **kwargs: Any) -> Any:
    """Call a Modal method through its async interface (`.aio`) when it has one."""
    a = getattr(fn, "aio", None)
    if a is not None:
        return await a(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


@dataclass
class TaskImage:
    ref: str
    required_env_keys: list[str] = field(default_factory=list)
    world_id: str | None = None
    task_slug: str | None = None
    profile: str | None = None  # the image profile the task's metadata names, if any


def task_image(environment_dir: Path, override: str | None = None) -> TaskImage:
    """The world image of a task: its metadata (task.toml [metadata] image + digest, or
    archipelago.json's ecr_image), else the Dockerfile's FROM."""
    from apexrl.tasks.convert import image_pin
    from apexrl.tasks.meta import find_task_meta

    meta = find_task_meta(environment_dir.parent)
    ref = override
    if not ref and meta is not None and meta.image:
        ref = image_pin(meta.image, meta.image_digest)
    if not ref:
        dockerfile = environment_dir / "Dockerfile"
        if dockerfile.is_file():
            for line in dockerfile.read_text(encoding="utf-8").splitlines():
                if line.strip().upper().startswith("FROM "):
                    ref = line.split()[1]
                    break
    if not ref:
        raise UsageError(
            f"{environment_dir.parent}: no world image (task.toml [metadata] image, "
            "archipelago.json ecr_image, or a FROM line)",
            hint="push the world image (apexrl image push) and convert with --images",
        )
    return TaskImage(
        ref=ref,
        required_env_keys=list(meta.required_env_keys) if meta else [],
        world_id=meta.world_id if meta else None,
        task_slug=meta.task_slug if meta else None,
        profile=meta.image_profile if meta else None,
    )


def is_ecr(ref: str) -> bool:
    return bool(ECR_HOST.match(ref))


class ModalEnvironment(BaseEnvironment):
    def __init__(
        self,
        environment_dir: Path,
        environment_name: str,
        session_id: str,
        trial_paths,
        task_env_config,
        *args: Any,
        app_name: str = "apexrl",
        registry_secret: str | None = None,
        private_registry_secret: str | None = None,
        image: str | None = None,
        image_profile: str | None = None,
        gateway_port: int | None = None,
        timeout_s: int = DEFAULT_SANDBOX_TIMEOUT_S,
        cpus: float | None = None,
        memory_mb: int | None = None,
        region: str | None = None,
        secrets: list[str] | None = None,
        gateway_ready_timeout_s: float = 300.0,
        worlds_dir: Any = None,  # accepted for parity with `local`; the image holds the world
        pass_env: list[str] | None = None,
        agent_network: str = "task",
        **kwargs: Any,
    ) -> None:
        from apexrl.envs.local.sandbox import pass_env_from_environment
        from apexrl.envs.network import check_agent_network

        self._agent_network = check_agent_network(agent_network)

        self._pass_env = set(pass_env or []) | pass_env_from_environment()
        self.app_name = app_name
        self.registry_secret = (
            registry_secret or os.environ.get("APEXRL_MODAL_ECR_SECRET") or "aws-ecr"
        )
        self.private_registry_secret = private_registry_secret
        self.image_override = image
        self.image_profile_override = image_profile
        self.gateway_port_override = int(gateway_port) if gateway_port else None
        self.timeout_s = int(timeout_s or DEFAULT_SANDBOX_TIMEOUT_S)
        self.cpus = cpus
        self.memory_mb = memory_mb
        self.region = region
        self.secret_names = list(secrets or [])
        self.gateway_ready_timeout_s = float(gateway_ready_timeout_s)
        self.gateway_url: str | None = None
        self.tunnel_url: str | None = None
        self._sandbox: Any = None
        super().__init__(
            environment_dir,
            environment_name,
            session_id,
            trial_paths,
            task_env_config,
            *args,
            **kwargs,
        )

    def _maybe_resolve_task_env(self) -> None:
        """`${NAME}` in the task's [environment.env] reads the host only for --pass-env names."""
        from apexrl.envs.local.sandbox import resolve_allowed

        if not self.task_env_config.env:
            return
        resolved, refused = resolve_allowed(self.task_env_config.env, self._pass_env)
        for name in refused:
            self.logger.warning(f"task env: ${{{name}}} not passed (allow it with --pass-env)")
        self._persistent_env = {**resolved, **self._persistent_env}

    @staticmethod
    def type() -> str:
        return ENV_TYPE

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        # block_network=True stops outbound traffic; tunnels (the gateway) still work
        return EnvironmentCapabilities(disable_internet=True)

    def _validate_definition(self) -> None:
        from apexrl.envs.profiles import profile_for_task

        self.image = task_image(Path(self.environment_dir), self.image_override)
        self.profile = profile_for_task(self.image_profile_override, self.image.profile)
        self.gateway_port = self.gateway_port_override or self.profile.port
        self.world_before_dir: Path | None = None  # the world at start (snapshot profiles)
        self._tmp: tempfile.TemporaryDirectory | None = None

    # --- the plan: task + config -> Modal calls ------------------------------------------
    def forwarded_env(self) -> dict[str, str]:
        """Task env keys that are set here and known to apexrl (apexrl.secrets)."""
        from apexrl.secrets import SECRET_ENV_KEYS

        keys = [k for k in self.image.required_env_keys if k in SECRET_ENV_KEYS]
        return {k: os.environ[k] for k in keys if os.environ.get(k)}

    def sandbox_kwargs(self, modal: Any, app: Any, image: Any) -> dict[str, Any]:
        secrets = [modal.Secret.from_name(n) for n in self.secret_names]
        env = self.forwarded_env()
        if env:
            secrets.append(modal.Secret.from_dict(env))
        kw: dict[str, Any] = {
            "app": app,
            "image": image,
            "timeout": self.timeout_s,
            "encrypted_ports": [self.gateway_port],
            "secrets": secrets,
            "env": self._start_env(),
            "workdir": self.profile.filesystem,
        }
        if self.cpus is not None:
            kw["cpu"] = self.cpus
        if self.memory_mb is not None:
            kw["memory"] = self.memory_mb
        if self.region:
            kw["region"] = self.region
        if self._network_disabled or not self._agent_online():
            # the agent reaches the gateway through the tunnel; only outbound is blocked
            kw["block_network"] = True
        return kw

    def _agent_online(self) -> bool:
        """One policy per sandbox: with agent_network="explicit" (apexrl's runs, graded on
        the host) online only when the task's own [agent] table asks (apexrl.envs.network)."""
        if self._agent_network != "explicit":
            return True
        from apexrl.envs.network import agent_phase_asks_network

        return agent_phase_asks_network(Path(self.environment_dir).parent)

    def _start_env(self) -> dict[str, str]:
        env = {
            k: v.replace(str(self.profile.port), str(self.gateway_port))
            for k, v in (self.profile.start_env().items())
        }
        if self.profile.name == "apexrl" and self.image.world_id:
            env["APEXRL_WORLD_ID"] = self.image.world_id
        return env

    def start_argv(self) -> list[str]:
        return self.profile.start_argv(self.image.task_slug)

    def modal_image(self, modal: Any) -> Any:
        ref = self.image.ref
        if is_ecr(ref):
            return modal.Image.from_aws_ecr(
                ref, secret=modal.Secret.from_name(self.registry_secret)
            )
        if self.private_registry_secret:
            secret = modal.Secret.from_name(self.private_registry_secret)
            return modal.Image.from_registry(ref, secret=secret)
        return modal.Image.from_registry(ref)

    # --- lifecycle ----------------------------------------------------------------------
    async def start(self, force_build: bool) -> None:
        modal = _modal()
        app = await _aio(modal.App.lookup, self.app_name, create_if_missing=True)
        image = self.modal_image(modal)
        kw = self.sandbox_kwargs(modal, app, image)
        self._sandbox = await _aio(modal.Sandbox.create, *self.start_argv(), **kw)
        try:
            tunnels = await _aio(self._sandbox.tunnels)
            self.tunnel_url = tunnels[self.gateway_port].url.rstrip("/")
            self.gateway_url = self.tunnel_url + self.profile.mcp_path
            await self._exec_args(["mkdir", "-p", *LOG_DIRS], timeout_sec=60)
            link = self.profile.link_world_command()
            if link:  # agents, oracles and graders address the world as /world
                res = await self._exec_args(link, timeout_sec=60)
                if res.return_code != 0:
                    raise RuntimeError(f"cannot link /world to the image's world: {res.stderr}")
            files = Path(self.environment_dir) / "task_files"
            for top, real in self.profile.roots().items():
                if (files / top).is_dir() and any((files / top).iterdir()):
                    await self.upload_dir(files / top, real)
            await self._wait_gateway()
            if self.profile.snapshot_endpoint:
                await self._initial_snapshot()
        except BaseException:
            await self.stop(delete=True)
            raise

    async def _wait_gateway(self) -> None:
        import httpx

        deadline = time.monotonic() + self.gateway_ready_timeout_s
        last = "no answer"
        async with httpx.AsyncClient(timeout=10) as hc:
            while time.monotonic() < deadline:
                try:
                    r = await hc.get(f"{self.tunnel_url}{self.profile.health_path}")
                    if r.status_code == 200:
                        return
                    last = f"HTTP {r.status_code}: {r.text[:200]}"
                except httpx.HTTPError as e:
                    last = type(e).__name__
                await asyncio.sleep(1.0)
        raise RuntimeError(
            f"the world gateway in sandbox {self.session_id} was not healthy within "
            f"{self.gateway_ready_timeout_s:.0f}s ({last})"
        )

    async def _initial_snapshot(self) -> None:
        """The world as the task starts, from the image's snapshot endpoint, kept on the
        host (the agent cannot touch it): the before-state of the grader's file diff."""
        from apexrl.envs.profiles import fetch_snapshot

        data = await fetch_snapshot(self.tunnel_url, self.profile)
        self._tmp = tempfile.TemporaryDirectory(prefix="apexrl-modal-before-")
        before = Path(self._tmp.name) / "world"
        before.mkdir()
        from apexrl.artifacts.archive_extract import extract_tar_or_targz

        # sandbox-written bytes (gzip or plain tar): links, devices and escapes are skipped
        res = extract_tar_or_targz(
            data, before, where="world snapshot (sandbox)", skip_refused=True
        )
        for r in res.refused:
            self.logger.warning(f"world snapshot: refused {r.name!r}: {r.reason}")
        self.world_before_dir = before

    async def stop(self, delete: bool) -> None:
        sb, self._sandbox = self._sandbox, None
        if sb is not None:
            await _aio(sb.terminate)

    # --- exec and files -----------------------------------------------------------------
    async def _exec_args(
        self, args: list[str], *, cwd: str | None = None, timeout_sec: int | None = None
    ) -> ExecResult:
        if self._sandbox is None:
            raise RuntimeError("the sandbox is not running; call start() first")
        kw: dict[str, Any] = {}
        if cwd:
            kw["workdir"] = cwd
        if timeout_sec:
            kw["timeout"] = int(timeout_sec)
        proc = await _aio(self._sandbox.exec, *args, **kw)
        out, err, code = await asyncio.gather(
            _aio(proc.stdout.read), _aio(proc.stderr.read), _aio(proc.wait)
        )

        def text(x: Any) -> str:
            return x.decode("utf-8", "replace") if isinstance(x, bytes) else (x or "")

        return ExecResult(stdout=text(out), stderr=text(err), return_code=int(code))

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        merged = self._merge_env(env) or {}
        # values travel as argv of `env`, never through a shell
        args = ["env", *(f"{k}={v}" for k, v in merged.items()), "bash", "-c", command]
        return await self._exec_args(args, cwd=cwd, timeout_sec=timeout_sec)

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        target_path = self.profile.world_path(target_path)
        data = Path(source_path).read_bytes()
        parent = str(Path(target_path).parent)
        await self._exec_args(["mkdir", "-p", parent], timeout_sec=60)
        f = await _aio(self._sandbox.open, target_path, "wb")
        try:
            await _aio(f.write, data)
        finally:
            await _aio(f.close)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        source_path = self.profile.world_path(source_path)
        f = await _aio(self._sandbox.open, source_path, "rb")
        try:
            data = await _aio(f.read)
        finally:
            await _aio(f.close)
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        Path(target_path).write_bytes(data)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        target_dir = self.profile.world_path(target_dir)
        from apexrl.artifacts.archive_write import (
            Entry,
            file_entry,
            gzip_bytes,
            tar_bytes,
            walk_sorted,
        )

        entries = [
            Entry(rel, "dir", 0o755)
            if is_dir
            else file_entry(rel, full, executable=bool(os.stat(full).st_mode & 0o111))
            for rel, full, is_dir in walk_sorted(Path(source_dir))
        ]
        with tempfile.TemporaryDirectory(prefix="apexrl-modal-") as tmp:
            local = Path(tmp) / "upload.tar.gz"
            local.write_bytes(gzip_bytes(tar_bytes(entries)))
            remote = f"/tmp/apexrl-upload-{os.getpid()}-{time.monotonic_ns()}.tar.gz"
            await self.upload_file(local, remote)
        res = await self._exec_args(
            ["sh", "-c", 'mkdir -p "$1" && tar -xzf "$2" -C "$1" && rm -f "$2"', "sh"]
            + [target_dir, remote],
            timeout_sec=600,
        )
        if res.return_code != 0:
            raise RuntimeError(f"upload to {target_dir} failed: {res.stderr}")

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        remote = f"/tmp/apexrl-download-{os.getpid()}-{time.monotonic_ns()}.tar.gz"
        if source_dir.rstrip("/") == WORLD_ROOT and self.profile.world_is_split:
            # the image keeps the world elsewhere: archive its roots as filesystem/ and
            # .apps_data/ (never the /world links themselves)
            args = ["tar", "-czf", remote]
            for top, real in self.profile.roots().items():
                parent, name = real.rstrip("/").rsplit("/", 1)
                args += ["-C", parent or "/", f"--transform=s,^{name},{top},", name]
        else:
            args = ["tar", "-czf", remote, "-C", self.profile.world_path(source_dir), "."]
        res = await self._exec_args(args, timeout_sec=600)
        if res.return_code != 0:
            raise RuntimeError(f"download of {source_dir} failed: {res.stderr}")
        with tempfile.TemporaryDirectory(prefix="apexrl-modal-") as tmp:
            local = Path(tmp) / "download.tar.gz"
            await self.download_file(remote, local)
            target = Path(target_dir)
            target.mkdir(parents=True, exist_ok=True)
            from apexrl.artifacts.archive_extract import extract_targz

            # sandbox-written bytes: links, devices and escapes are skipped and logged
            res = extract_targz(
                local.read_bytes(), target, where=f"{source_dir} (sandbox)", skip_refused=True
            )
            for r in res.refused:
                self.logger.warning(f"download of {source_dir}: refused {r.name!r}: {r.reason}")
        await self._exec_args(["rm", "-f", remote], timeout_sec=60)

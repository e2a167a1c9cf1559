"""`local`: a Harbor environment with no Docker: bubblewrap over a private copy of the world.

Import path: `apexrl.envs.local:LocalEnvironment` (kwargs: worlds_dir, the world
store; cache_dir; work_dir, where trial folders go; gateway_ready_timeout_s;
grading_runtime, else $APEXRL_GRADING_RUNTIME: an archipelago checkout or a built
grading runner, whose venv and interpreter every exec sees read-only, named by
$ARCHIPELAGO_GRADING_PYTHON, so a task converted with `--grader-from` grades with
archipelago's runner in a sandbox with no package index).

The network policy may change between phases (Harbor's `[verifier] network_mode`):
each exec is a fresh sandbox that takes the policy in force, so a task can keep the
agent's code offline and let its verifier reach the judge.

The in-sandbox grader (an exec that runs a program from /tests: Harbor's verifier
running tests/test.sh) is isolated from what the agent touched (issue 42, finding 1):
it starts in /tests, its /tmp and /root (HOME, TMPDIR) are fresh empty folders, the
world and the agent's logs are read-only to it and /logs/verifier is emptied first.
/tests is read-only to every exec (Harbor fills it from the host), so nothing an agent
plants there runs in the grader.

Each trial gets a folder (work_dir/apexrl-trial-*) holding a private, writable
copy of its world (the store's pristine world plus the task's input files) and
the sandbox's /tmp, /root, /tests and /solution. Every exec, and the world's MCP
gateway, runs in a bubblewrap sandbox that sees:

    /world                 the private world copy (rw)
    /logs/agent, /logs/verifier, /logs/artifacts   the trial's log folders (rw)
    /solution, /tmp, /root                         private folders (rw)
    /tests                 the task's tests, as Harbor uploads them (ro)
    /usr, /bin, /lib*, a few /etc files, the Python running apexrl (ro)

and nothing else of the host: no home, no project folder, no host environment
variables (the sandbox starts from an empty environment), its own PID namespace
(a process left behind by an exec dies with it), and no network for execs when
the task's policy says so. The gateway's URL is `gateway_url`.

An online agent (issue 42, finding 2) never shares the host's network: its execs and
its code-tool commands run in network namespaces of their own whose one way out is an
HTTP(S) proxy to public addresses (`apexrl.envs.local.egress`). The in-sandbox grader
keeps the verifier phase's policy (the judge may be on this host).

Seams: the bubblewrap command line and its promises are `apexrl.envs.local.sandbox`; trial
folders and gateways started ahead of their trials, `apexrl.envs.local.pool`; the gateway
is forked from a pre-imported fork server (`apexrl.envs.local.warm`, `apexrl.envs.local.forkserver`)
when apexrl runs as root, else (or with APEXRL_LOCAL_FORKSERVER=0) started as a fresh
Python in its own bubblewrap sandbox; either way it runs in the same kind of per-trial
sandbox. This module is the Harbor environment itself.

Cleanup: stop() kills the gateway and removes the trial folder; the sandbox dies
with the process that started it (--die-with-parent); trial folders whose owner
process is gone (a crash, SIGKILL) are removed the next time an environment
starts.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import secrets
import shlex
import shutil
import signal
import sys
import time
import weakref
from pathlib import Path, PurePosixPath
from typing import Any

from harbor.constants import MAIN_SERVICE_NAME
from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.models.task.config import NetworkMode

from apexrl.artifacts.archive_extract import native_tar
from apexrl.artifacts.nofollow import REFUSED_FILE, RefusedPath, copy_regular, regular_files
from apexrl.envs.local import sandbox, scratch
from apexrl.envs.local.pool import (  # noqa: F401  (the warm pool's names, re-exported)
    DIR_PREFIX,
    GATEWAY_LOG,
    OWNER_FILE,
    POOL,
    SPAWNER,
    Slot,
    _proc_start,
    new_slot,
    peer_binds,
    prewarm_count,
)
from apexrl.envs.local.sandbox import (
    SandboxDiedError,
    SandboxError,
    base_env,
    chown_tree,
    pass_env_from_environment,
    resolve_allowed,
)
from apexrl.envs.local.warm import log_tail
from apexrl.tasks import envnames
from apexrl.worlds.store import (
    TaskWorld,
    WorldState,
    WorldStore,
    overlay_sources,
    stats_of,
    task_world,
    walk_files,
)

ENV_TYPE = "apexrl-local"
DEFAULT_CWD = "/world/filesystem"
PEER_CWD = "/filesystem"
PEER_START_S = 180.0  # archipelago's servers: ~3-10 s each, started at once, on a busy host
TESTS = "/tests"
# the grader's own /tmp and /root: fresh folders in the trial folder, made per grading
GRADER_DIRS = {"/tmp": "grader-tmp", "/root": "grader-home"}
_LIVE: weakref.WeakSet = weakref.WeakSet()


class SandboxExecTimeoutError(RuntimeError):
    pass


def bwrap_path() -> str:
    try:
        return sandbox.bwrap_path()
    except sandbox.SandboxStartError as e:
        raise SandboxError(str(e), kind="start") from None


def default_work_dir() -> Path:
    """Where trial folders go: $APEXRL_LOCAL_WORKDIR, else RAM or disk by
    $APEXRL_LOCAL_SCRATCH (`apexrl.envs.local.scratch`)."""
    chosen = scratch.choose()
    warn = scratch.warning(chosen)
    if warn is not None:
        _warn_once(warn)
    return chosen.path if chosen.kind == "set" else scratch.own_folder(chosen.path)


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        print(f"apexrl: warning: {message}", file=sys.stderr)


def sweep_stale(work_dir: Path) -> int:
    """Remove trial folders whose owner process is gone. Returns how many."""
    n = 0
    if not work_dir.is_dir():
        return 0
    for d in work_dir.glob(DIR_PREFIX + "*"):
        try:
            owner = json.loads((d / OWNER_FILE).read_text())
            pid, boot = int(owner["pid"]), owner.get("start")
        except (OSError, ValueError, KeyError):
            # no owner file yet: the pid is in the name (apexrl-trial-<pid>-xxxx)
            try:
                pid, boot = int(d.name[len(DIR_PREFIX) :].split("-", 1)[0]), None
            except ValueError:
                with contextlib.suppress(OSError):  # foreign debris: only when old
                    if time.time() - d.stat().st_mtime > 3600:
                        shutil.rmtree(d, ignore_errors=True)
                        n += 1
                continue
        if not sandbox.pid_alive(pid) or (boot is not None and _proc_start(pid) != boot):
            sandbox.remove_trial_folder(d)
            n += 1
    return n


class LocalEnvironment(BaseEnvironment):
    """Harbor environment: bubblewrap over a private world copy (see the module doc)."""

    def __init__(
        self,
        *args: Any,
        worlds_dir: str | Path | None = None,
        cache_dir: str | Path | None = None,
        work_dir: str | Path | None = None,
        gateway: bool = True,
        gateway_ready_timeout_s: float = 60.0,
        keep: bool = False,
        prewarm: bool | None = None,
        pass_env: list[str] | None = None,
        grading_runtime: str | Path | None = None,
        image_profile: str | None = None,
        runtime: str = "apexrl",
        archipelago: str | None = None,
        agent_network: str = "task",
        **kwargs: Any,
    ) -> None:
        from apexrl.artifacts.archipelago_runner import RUNTIME_ENV
        from apexrl.envs.network import check_agent_network
        from apexrl.envs.profiles import get_profile

        self._agent_network = check_agent_network(agent_network)

        if image_profile:
            get_profile(image_profile)  # a usage error before any sandbox work
        self._image_profile_override = image_profile or None
        self.profile = None  # apexrl.envs.profiles.ImageProfile, set at start
        self._grading_runtime_path = grading_runtime or os.environ.get(RUNTIME_ENV) or None
        self._grading_runtime = None  # resolved at start (may build the runner)
        self._pass_env = set(pass_env or []) | pass_env_from_environment()
        # runtime "archipelago": the world is served by a checkout's own servers
        # (apexrl.peer.gateway), inside this same sandbox; None: apexrl's own
        self._peer: Any = None
        if runtime != "apexrl":
            from apexrl.peer.gateway import cached_plan, check_runtime

            check_runtime(runtime)
            self._peer = cached_plan(archipelago)
        self._worlds_dir = Path(worlds_dir) if worlds_dir else None
        self._cache_dir = Path(cache_dir) if cache_dir else None
        self._work_dir = Path(work_dir) if work_dir else default_work_dir()
        self._gateway_enabled = gateway
        self._gateway_timeout = gateway_ready_timeout_s
        self._keep = keep
        self._prewarm = prewarm_count() if prewarm is None else (2 if prewarm else 0)
        self.root: Path | None = None
        self.world_dir: Path | None = None
        self.gateway_url: str | None = None
        self.gateway_health_url: str | None = None
        self._slot: Slot | None = None
        self._world_state: WorldState | None = None
        self._task_world: TaskWorld | None = None
        self._stopped = False
        self._egress: Any = None  # apexrl.envs.local.egress.EgressProxy of an online agent
        super().__init__(*args, **kwargs)

    # --- Harbor's interface ----------------------------------------------------------

    @staticmethod
    def type() -> str:
        return ENV_TYPE

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(
            disable_internet=True, mounted=False, dynamic_network_policy=True
        )

    async def _apply_network_policy(self, network_policy: Any) -> None:
        """Nothing to switch: every exec starts a sandbox with the policy in force."""
        return None

    def _validate_definition(self) -> None:
        task_world(self.environment_dir.parent)  # the task must name its world

    async def start(self, force_build: bool) -> None:
        t0 = time.monotonic()
        bwrap_path()
        if self._worlds_dir is None:
            raise SandboxError(
                "the local environment needs a world store (worlds_dir / --worlds DIR)",
                kind="start",
            )
        self._work_dir.mkdir(parents=True, exist_ok=True)
        if self._grading_runtime_path and self._grading_runtime is None:
            self._grading_runtime = await asyncio.to_thread(self._resolve_grading_runtime)
        await asyncio.to_thread(sweep_stale, self._work_dir)
        tw = self._task_world = task_world(self.environment_dir.parent)
        self.profile = await asyncio.to_thread(self._resolve_profile)
        _LIVE.add(self)
        try:
            # warm slots run apexrl's gateway: archipelago's servers start with their world
            warm_ok = self._gateway_enabled and self._prewarm and self._peer is None
            slot = POOL.take(self._work_dir) if warm_ok else None
            if slot is None:
                peer_ro = tuple(self._peer.read_only_paths()) if self._peer else ()
                slot = await asyncio.wrap_future(
                    SPAWNER.submit(
                        new_slot,
                        self._work_dir,
                        self._gateway_timeout,
                        self._gateway_enabled,
                        peer_ro,
                    )
                )
            self._slot = slot
            self.root = slot.root
            await asyncio.to_thread(self._make_world, tw)
            if self._agent_online():  # its way out: public addresses only (module doc)
                self._egress = await asyncio.to_thread(_start_egress, self.root / "tmp")
            if self._gateway_enabled:
                await self._start_gateway(tw)
                if warm_ok:  # the next trials' sandboxes warm up while this one runs
                    POOL.refill(self._work_dir, self._gateway_timeout, self._prewarm)
        except BaseException:
            await self.stop(delete=True)
            raise
        self.logger.debug(f"local sandbox ready in {time.monotonic() - t0:.2f}s at {self.root}")

    async def stop(self, delete: bool) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._egress is not None:
            _stop_egress(self._egress)
        slot = self._slot
        if slot is not None:
            await asyncio.to_thread(slot.kill)
            with contextlib.suppress(OSError):  # keep the gateway's log with the trial
                shutil.copyfile(slot.root / GATEWAY_LOG, self.trial_paths.trial_dir / GATEWAY_LOG)
        if self.root is not None and (delete or not self._keep):
            await asyncio.to_thread(sandbox.remove_trial_folder, self.root)
        _LIVE.discard(self)

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        dst = self._writable(target_path)
        dst.parent.mkdir(parents=True, exist_ok=True)
        self._inside_mount(dst.parent, target_path)
        # never write through a link the agent planted (O_NOFOLLOW on the target)
        await asyncio.to_thread(copy_regular, source_path, dst)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        dst = self._writable(target_dir)
        dst.mkdir(parents=True, exist_ok=True)
        self._inside_mount(dst, target_dir)
        await asyncio.to_thread(_drop_links, dst)
        await asyncio.to_thread(shutil.copytree, source_dir, dst, symlinks=True, dirs_exist_ok=True)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        """Copy a regular file out; a link the agent made is refused, never followed."""
        src = self._readable(source_path)
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(copy_regular, src, target_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        """Copy the regular files of a sandbox folder out; links and special files are
        skipped and listed in the target's refused_links.json."""
        src = self._readable(source_dir).resolve()
        dst = Path(target_dir).resolve()
        if dst == src:
            return  # already there (a mounted folder)
        await asyncio.to_thread(_copy_regular_tree, src, dst)

    def is_path_mounted(self, environment_path: Any, host_path: Path) -> bool:
        """The log folders are the trial's own folders: nothing to download."""
        mapped = self.host_path(str(environment_path))
        return mapped is not None and mapped.resolve() == Path(host_path).resolve()

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        if self.root is None or self._stopped:
            raise SandboxError("the sandbox is not running", kind="died")
        if self._slot is not None and self._slot.started and self._slot.proc is not None:
            rc = self._slot.proc.poll()
            if rc is not None:
                raise SandboxDiedError(f"the sandbox's gateway process died (exit {rc})")
        merged = self._merge_env(env) or {}
        _refuse_env(merged, "exec env")
        if self._grading_runtime is not None:
            from apexrl.artifacts.archipelago_runner import SANDBOX_PYTHON_ENV

            merged.setdefault(SANDBOX_PYTHON_ENV, self._grading_runtime.python)
        await asyncio.to_thread(self._own_log_dirs)
        program = tests_program(command)
        grading = program is not None
        if program is not None:  # the grader: nothing the agent left in its way (module doc)
            await asyncio.to_thread(self._fresh_grader_dirs, program)
            merged.update(HOME="/root", TMPDIR="/tmp")
        online = self._policy_online() if grading else self._agent_online()
        egress = online and not grading and self._egress is not None
        argv_cmd = ["/bin/bash", "-c", command]
        if egress:  # its own network namespace, the proxy its only way out
            from apexrl.envs.local import egress as eg

            merged.update(eg.proxy_env())
            argv_cmd = ["/bin/bash", "-c", eg.bridge_command(sys.executable), "egress", command]
        # bwrap and its helpers get the fixed base environment only; the merged values
        # reach the command inside the sandbox through a descriptor (never argv)
        cmd, env_fd = sandbox.with_env(argv_cmd, merged)
        if grading:
            cwd = TESTS
        argv = (
            self._bwrap_argv(
                cwd=cwd or self.task_env_config.workdir or self._default_cwd(),
                network=online and not egress,
                grading=grading,
            )
            + cmd
        )
        group = self._slot.group if self._slot is not None else None
        if group is not None:  # the trial's memory cap covers its commands too
            argv = group.join_argv(argv)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                env=base_env({}),
                pass_fds=() if env_fd is None else (env_fd,),
            )
        finally:
            if env_fd is not None:
                os.close(env_fd)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout=timeout_sec or None)
        except (TimeoutError, asyncio.CancelledError):
            _kill_group(proc)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), timeout=5)
            if asyncio.current_task() is not None and asyncio.current_task().cancelling():
                raise
            raise SandboxExecTimeoutError(
                f"Command timed out after {timeout_sec} seconds"
            ) from None
        rc = proc.returncode if proc.returncode is not None else -1
        if rc < 0:  # killed by a signal: report it like a shell would
            rc = 128 - rc
        return ExecResult(
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            return_code=rc,
        )

    def _maybe_resolve_task_env(self) -> None:
        """The task's [environment.env]: `${NAME}` reads the host only for names the
        user allowed (--pass-env / APEXRL_PASS_ENV); others take their `:-default` or
        are left out, so a dataset cannot ask for HF_TOKEN and get it."""
        if not self.task_env_config.env:
            return
        _refuse_env(self.task_env_config.env, "the task's [environment.env]")
        resolved, refused = resolve_allowed(self.task_env_config.env, self._pass_env)
        for name in refused:
            self.logger.warning(
                f"task env: ${{{name}}} not passed to the sandbox (allow it with --pass-env {name})"
            )
        self._persistent_env = {**resolved, **self._persistent_env}

    # --- apexrl's additions -------------------------------------------------------------

    @property
    def runtime(self) -> str:
        return "archipelago" if self._peer is not None else "apexrl"

    def host_path(self, sandbox_path: str) -> Path | None:
        """The host path behind a sandbox path, or None when it is not a mounted folder
        (or names '..'). Links inside are the caller's to refuse (they may point out)."""
        if not str(sandbox_path).startswith("/") or ".." in PurePosixPath(sandbox_path).parts:
            return None
        mount = self._mount_of(sandbox_path)
        if mount is None:
            return None
        target, source = mount
        return source.joinpath(*PurePosixPath(sandbox_path).relative_to(target).parts)

    def _mount_of(self, sandbox_path: str) -> tuple[PurePosixPath, Path] | None:
        """(sandbox folder, host folder) of the first writable mount holding the path."""
        p = PurePosixPath(sandbox_path)
        for target, source in self._mounts_rw():
            t = PurePosixPath(target)
            if p == t or p.is_relative_to(t):
                return t, Path(source)
        return None

    def world_state(self) -> WorldState:
        """The world before (pristine sources, stats at start) and after (the private copy)."""
        if self._world_state is None or self.world_dir is None:
            raise SandboxError("the sandbox has no world (not started)", kind="died")
        return self._world_state

    def _policy_online(self) -> bool:
        return self._network_policy.network_mode != NetworkMode.NO_NETWORK

    def _agent_online(self) -> bool:
        """Whether the agent's code (an exec, the code tool) gets network: the policy in
        force, or with agent_network="explicit" (apexrl's runs) only what the task's own
        [agent] table asks for (apexrl.envs.network)."""
        if self._agent_network == "explicit":
            from apexrl.envs.network import agent_phase_asks_network

            return agent_phase_asks_network(self.environment_dir.parent)
        return self._policy_online()

    @property
    def gateway_pid(self) -> int | None:
        slot = self._slot
        return slot.proc.pid if slot is not None and slot.proc is not None else None

    # --- internals ----------------------------------------------------------------------

    def _make_world(self, tw: TaskWorld) -> None:
        store = WorldStore(self._worlds_dir, self._cache_dir)  # type: ignore[arg-type]
        pristine = store.pristine(tw.world_id)
        assert self.root is not None
        world = self.root / "world"
        uid = self._slot.uid if self._slot is not None else None
        sources = [pristine] if tw.task_files is None else [pristine, tw.task_files]
        in_c = [_copy_world(src, world, uid) for src in sources]  # every copy runs
        fs = world / "filesystem"
        if not fs.is_dir():
            fs.mkdir()
            chown_tree(fs, uid)
        # the fork server's mount points under /world were made by root: chown them
        owned = all(in_c) and not any(t.startswith("/world/") for _, t in sandbox.zygote_rebinds())
        self.world_dir = world
        for _, d in self._mounts_rw():
            d.mkdir(parents=True, exist_ok=True)
        profile_roots = set(self.profile.roots().values()) if self.profile is not None else set()
        for target, d in self._mounts_rw():  # the sandbox's uid owns its writable folders
            if target in profile_roots:
                continue  # the world copy again (chowned as /world, or not at all)
            if target not in ("/tests", "/solution") and not (target == "/world" and owned):
                chown_tree(d, uid)
        self._world_state = WorldState(
            after_root=world,
            before=overlay_sources(pristine, tw.task_files),
            before_stats=stats_of(walk_files(world)),
        )

    def _mounts_rw(self) -> list[tuple[str, Path]]:
        assert self.root is not None
        tp = self.trial_paths
        pairs = [
            ("/logs/agent", tp.agent_dir),
            ("/logs/verifier", tp.verifier_dir),
            # where Harbor expects the convention artifacts folder on the host
            ("/logs/artifacts", tp.host_artifact_path(MAIN_SERVICE_NAME, "/logs/artifacts")),
            ("/world", self.root / "world"),
            ("/tests", self.root / "tests"),
            ("/solution", self.root / "solution"),
            ("/tmp", self.root / "tmp"),
            ("/root", self.root / "home"),
        ]
        # an image profile that keeps the world elsewhere (Mercor's: /filesystem and
        # /.apps_data) sees the same copy there too, as its images would show it
        if self.profile is not None and self.profile.world_is_split:
            for top, real in self.profile.roots().items():
                pairs.append((real, self.root / "world" / top))
        if self._peer is not None:  # the world where archipelago's servers see it
            have = {t for t, _ in pairs}
            pairs += [(t, d) for t, d in peer_binds(self.root) if t not in have]
        return sorted(pairs, key=lambda t: -len(t[0]))

    def _resolve_profile(self):
        """The image profile: the flag (image_profile=), else what the task's metadata
        records (recipe-format tasks: Mercor's images), else apexrl's."""
        from apexrl.envs.profiles import profile_for_task
        from apexrl.tasks.meta import find_task_meta

        recorded = None
        if not self._image_profile_override:
            meta = find_task_meta(self.environment_dir.parent, require_world=False)
            recorded = meta.image_profile if meta is not None else None
        return profile_for_task(self._image_profile_override, recorded)

    def _default_cwd(self) -> str:
        """Where an exec starts: the world's files, where the image profile keeps them
        (at /filesystem, where archipelago's servers see them, with runtime archipelago)."""
        if self._peer is not None:
            return PEER_CWD
        return self.profile.filesystem if self.profile is not None else DEFAULT_CWD

    def _writable(self, sandbox_path: str) -> Path:
        host = self.host_path(sandbox_path)
        if host is None:
            raise PermissionError(
                f"{sandbox_path} is not writable in the local sandbox "
                "(writable: /world, /logs/*, /tests, /solution, /tmp, /root, and the image "
                "profile's /filesystem and /.apps_data)"
            )
        return host

    def _inside_mount(self, host: Path, sandbox_path: str) -> None:
        """Refuse a host path that resolves out of its mount (through a planted link)."""
        mount = self._mount_of(sandbox_path)
        if mount is not None and host.resolve().is_relative_to(mount[1].resolve()):
            return
        raise PermissionError(f"{sandbox_path} leads out of the sandbox (a link)")

    def _readable(self, sandbox_path: str) -> Path:
        host = self.host_path(sandbox_path)
        if host is None or not host.exists():
            raise FileNotFoundError(f"{sandbox_path} does not exist in the local sandbox")
        self._inside_mount(host, sandbox_path)
        return host

    def _own_log_dirs(self) -> None:
        """Harbor may (re)create the log folders after start: hand them to the sandbox uid."""
        uid = self._slot.uid if self._slot is not None else None
        if uid is None:
            return
        for target, d in self._mounts_rw():
            if target.startswith("/logs/"):
                d.mkdir(parents=True, exist_ok=True)
                if os.lstat(d).st_uid != uid:
                    os.chown(d, uid, uid, follow_symlinks=False)

    def _bwrap_argv(self, *, cwd: str, network: bool, grading: bool = False) -> list[str]:
        uid = self._slot.uid if self._slot is not None else None
        ro = self._grading_runtime.paths if self._grading_runtime is not None else ()
        rw, ro_binds = self._exec_binds(grading)
        return sandbox.bwrap_argv(rw, cwd=cwd, network=network, uid=uid, ro=ro, ro_binds=ro_binds)

    def _exec_binds(self, grading: bool) -> tuple[list[tuple[str, Path]], list[tuple[str, Path]]]:
        """(read-write, read-only) binds of an exec. /tests is read-only to every exec
        (Harbor writes it from the host). An agent's: the rest writable. The grader's:
        /logs/verifier writable, /tmp and /root its own fresh folders, the rest (the
        world, the agent's logs, /solution) read-only."""
        assert self.root is not None
        rw: list[tuple[str, Path]] = []
        ro: list[tuple[str, Path]] = []
        for target, source in self._mounts_rw():
            if target == TESTS:
                ro.append((target, source))
            elif target in GRADER_DIRS and grading:
                rw.append((target, self.root / GRADER_DIRS[target]))
            elif grading and target != "/logs/verifier":
                ro.append((target, source))
            else:
                rw.append((target, source))
        return rw, ro

    def _fresh_grader_dirs(self, program: str) -> None:
        """Empty /tmp, /root and /logs/verifier for the grader (no link followed), and
        make the program it runs executable (Harbor's `chmod +x` runs as an ordinary
        exec, which sees /tests read-only)."""
        assert self.root is not None
        uid = self._slot.uid if self._slot is not None else None
        for name in GRADER_DIRS.values():  # in the trial folder: no agent writes there
            d = self.root / name
            d.mkdir(exist_ok=True)
            _empty_folder(d)
            chown_tree(d, uid)
        _empty_folder(self.trial_paths.verifier_dir)
        script = self.host_path(program)
        if script is not None and script.is_file() and not script.is_symlink():
            script.chmod(script.stat().st_mode | 0o555)

    def _resolve_grading_runtime(self):
        from apexrl.artifacts.archipelago_runner import grading_runtime
        from apexrl.errors import ApexError

        try:
            return grading_runtime(self._grading_runtime_path, log=self.logger.info)
        except ApexError as e:
            raise SandboxError(f"grading_runtime: {e}", kind="start") from None

    async def _start_gateway(self, tw: TaskWorld) -> None:
        slot = self._slot
        assert slot is not None and slot.proc is not None
        log = slot.root / GATEWAY_LOG
        try:
            token = secrets.token_urlsafe(24)  # only this trial's agent learns the URL
            rec = await asyncio.wait_for(
                asyncio.to_thread(
                    slot.handshake,
                    tw.world_id,
                    token=token,
                    # never the gateway's host network: an online agent's code tool
                    # goes out through the egress proxy, like its execs
                    code_network=self._agent_online() and self._egress is None,
                    code_egress=self._egress is not None,
                    peer=self._peer.as_json() if self._peer is not None else None,
                ),
                timeout=self._gateway_timeout + 5 + (PEER_START_S if self._peer else 0),
            )
        except TimeoutError:
            raise SandboxError(
                f"world {tw.world_id}: the gateway was not ready within "
                f"{self._gateway_timeout:.0f}s (log: {log})",
                kind="gateway",
            ) from None
        if not rec or "url" not in rec:
            tail = log_tail(log)
            raise SandboxError(
                f"world {tw.world_id}: the gateway did not start (exit {slot.proc.poll()}): {tail}",
                kind="gateway",
            )
        self.gateway_url, self.gateway_health_url = rec["url"], rec["health_url"]

    def _sync_cleanup(self) -> None:
        """At interpreter exit: kill what is left and remove the trial folder."""
        if self._egress is not None:
            _stop_egress(self._egress)
        if self._slot is not None:
            self._slot.kill()
        if self.root is not None and not self._keep:
            sandbox.remove_trial_folder(self.root)


def _start_egress(tmp: Path):
    """The trial's egress proxy, its socket in the trial's /tmp (made before the agent
    runs; execs and the gateway's code tool see it there)."""
    from apexrl.envs.local.egress import SANDBOX_SOCKET, EgressProxy

    return EgressProxy(tmp / PurePosixPath(SANDBOX_SOCKET).name)


def _stop_egress(proxy) -> None:
    proxy.close()


def tests_program(command: str) -> str | None:
    """The program from /tests an exec runs (Harbor's verifier running the task's
    tests/test.sh: `(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1`), else None."""
    lex = shlex.shlex(command, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    try:
        words = list(lex)
    except ValueError:
        return None
    while words and words[0] == "(":
        words = words[1:]
    if words and PurePosixPath(words[0]).name in ("bash", "sh"):
        words = words[1:]
    if not words:
        return None
    p = PurePosixPath(words[0])
    if p.is_relative_to(TESTS) and p != PurePosixPath(TESTS) and ".." not in p.parts:
        return words[0]
    return None


def _empty_folder(folder: Path) -> None:
    """Remove what is in `folder` (links removed, never followed)."""
    if not folder.is_dir():
        return
    for p in folder.iterdir():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def _refuse_env(env: dict[str, str], where: str) -> None:
    """A name that changes how programs load is refused (`apexrl.tasks.envnames`)."""
    try:
        envnames.check_env(env, where)
    except envnames.RefusedEnvError as e:
        raise SandboxError(str(e), kind="start") from None


def _copy_world(src: Path, dst: Path, uid: int | None) -> bool:
    """Merge `src` into the trial's world copy (shutil.copytree(dirs_exist_ok=True)); in C
    (`_fasttar.copy_tree`, the GIL released, chowned to `uid` as it goes) when the tree is
    plain folders and files, True then. Otherwise copytree, links copied as links: the
    host never reads through a link a dataset's task files hold."""
    native = native_tar()
    owner = -1 if uid is None else uid
    if native is not None and native.copy_tree(str(src), str(dst), owner) is not None:
        return True
    shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
    return False


def _copy_regular_tree(src: Path, dst: Path) -> None:
    refused = []
    for p in regular_files(src):
        if p.is_relative_to(dst):  # never copy a folder into itself
            continue
        out = dst / p.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            copy_regular(p, out)
        except RefusedPath as e:
            refused.append({"path": str(p.relative_to(src)), "reason": str(e)})
    for dirpath, dirnames, filenames in os.walk(src):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink() or not (p.is_dir() or p.is_file()):
                refused.append(
                    {"path": str(p.relative_to(src)), "reason": "a link or special file"}
                )
    if refused:
        dst.mkdir(parents=True, exist_ok=True)
        (dst / REFUSED_FILE).write_text(json.dumps({"refused": refused}, indent=1) + "\n")


def _drop_links(root: Path) -> None:
    """Remove every symlink under `root` (the agent's), so a copy into it stays inside."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink():
                p.unlink()


def _kill_group(proc: asyncio.subprocess.Process, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


@atexit.register
def _cleanup_all() -> None:
    for env in list(_LIVE):
        with contextlib.suppress(Exception):
            env._sync_cleanup()
    with contextlib.suppress(Exception):
        POOL.drain()
    with contextlib.suppress(Exception):
        from apexrl.envs.local import warm

        warm.close_all()

"""ENVIRONMENTS: where a trial's sandbox runs, by name (`--env`, recipe `agent.environment`).

Each entry says how Harbor builds it and what it needs, so the CLI choices, recipe
validation, the trial's Harbor config (apexrl.trial.run), preflight
(apexrl.envs.preflight) and `apexrl doctor` all derive from this one table. Nothing
here imports the environment itself: `import_path` is loaded only when a trial runs.

Adding an environment: a module with a Harbor `BaseEnvironment` subclass, and one
line below (optionally a preflight check in apexrl/envs/preflight.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from apexrl.errors import UsageError


@dataclass(frozen=True)
class EnvironmentEntry:
    name: str
    summary: str
    # "module:Class" of a Harbor BaseEnvironment apexrl provides; None: Harbor's own
    # environment of type `name` (podman, docker), which runs the world image as it is
    import_path: str | None = None
    world_store: bool = False  # reads worlds from --worlds on this host (preflight checks them)
    remote_sandbox: bool = False  # takes SandboxSettings (CPUs, memory, lifetime, image profile)
    # "module:function" (name, env) -> list[Problem]: why no trial could start here
    preflight: str | None = None
    tools: tuple[str, ...] = ()  # host commands it runs (`apexrl doctor`)
    credentials: tuple[str, ...] = ()  # env keys it authenticates with (`apexrl doctor`)
    # the pyproject extra that installs what it imports, and the modules that extra must
    # make importable: `apexrl doctor` imports them, preflight asks for the extra
    extra: str | None = None
    modules: tuple[str, ...] = ()
    # runs archipelago's own servers inside its sandbox (`runtime = "archipelago"`,
    # apexrl.peer.gateway): checked once per trial spec (check_runtime)
    peer_runtime: bool = False

    @property
    def harbor_owned(self) -> bool:
        return self.import_path is None


ENVIRONMENTS: dict[str, EnvironmentEntry] = {
    e.name: e
    for e in (
        EnvironmentEntry(
            "local",
            "bubblewrap over a private copy of the world, on this host",
            import_path="apexrl.envs.local:LocalEnvironment",
            world_store=True,
            preflight="apexrl.envs.preflight:check_local",
            tools=("bwrap",),
            peer_runtime=True,
        ),
        EnvironmentEntry(
            "modal",
            "Modal sandboxes from the world's image",
            import_path="apexrl.envs.modal:ModalEnvironment",
            remote_sandbox=True,
            preflight="apexrl.envs.preflight:check_modal",
            credentials=("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"),
            extra="modal",
            modules=("modal",),
        ),
        EnvironmentEntry(
            "podman",
            "Harbor's podman environment running the world image",
            preflight="apexrl.envs.preflight:check_container_cli",
            tools=("podman",),
        ),
        EnvironmentEntry(
            "docker",
            "Harbor's docker environment running the world image",
            preflight="apexrl.envs.preflight:check_container_cli",
            tools=("docker",),
        ),
    )
}


def environment_names() -> tuple[str, ...]:
    return tuple(ENVIRONMENTS)


def get_environment(name: str) -> EnvironmentEntry:
    if name not in ENVIRONMENTS:
        raise UsageError.unknown("environment", name, ENVIRONMENTS)
    return ENVIRONMENTS[name]


def runtime_supported(runtime: str, environment: str) -> bool:
    """`runtime = "archipelago"` runs archipelago's servers inside the environment's
    sandbox: only an environment whose entry says `peer_runtime` can."""
    return runtime != "archipelago" or get_environment(environment).peer_runtime


def check_runtime(runtime: str, environment: str) -> None:
    """runtime_supported, or a UsageError (exit 2) naming what can run it."""
    if not runtime_supported(runtime, environment):
        able = " or ".join(e.name for e in ENVIRONMENTS.values() if e.peer_runtime)
        raise UsageError(
            f"--runtime archipelago runs archipelago's servers in the local sandbox, "
            f"not in --env {environment}",
            hint=f"use --env {able}, or --runtime apexrl",
        )

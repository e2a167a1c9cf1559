"""Harbor environments for apexrl trials.

local  `apexrl.envs.local:LocalEnvironment`: bubblewrap over a private copy of the world
       (no Docker), the world's MCP gateway inside the sandbox, warm sandboxes.
modal  `apexrl.envs.modal:ModalEnvironment`: Modal sandboxes from the world's ECR image.

`apexrl.envs.registry.ENVIRONMENTS` names them all (CLI choices, recipe validation,
trial dispatch, preflight, doctor). Harbor's own `podman`/`docker` environments run
apexrl world images as they are (the task's [environment] docker_image).
`apexrl.worlds.store` resolves a task's world from a world store (`--worlds DIR`).
"""

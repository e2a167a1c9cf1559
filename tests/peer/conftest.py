"""The archipelago checkout and its built runtimes, for the parity tier (marker `peer`).

`make test` runs these only when a checkout is found (it builds the runtimes first with
`make peer`, and deselects the tier with one line when there is none); CI always has one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def checkout() -> Path:
    from apexrl.peer.runtime import find_checkout

    return find_checkout()


@pytest.fixture(scope="session")
def example_worlds(tmp_path_factory) -> list[Path]:
    """The example worlds' zips, the one with every app first."""
    from apexrl.tasks.example import write_example

    out = tmp_path_factory.mktemp("example")
    write_example(out, seed=0)
    worlds = json.loads((out / "world_descriptions.json").read_text())
    worlds.sort(key=lambda w: -len(w["apps"]))
    return [out / "world_files_zipped" / f"{w['world_id']}.zip" for w in worlds]


@pytest.fixture(scope="session")
def published_world(tmp_path_factory) -> Path:
    from tests.published_shape import build

    root = tmp_path_factory.mktemp("published")
    build(root, bad=False)
    return sorted((root / "world_files_zipped").glob("*.zip"))[0]

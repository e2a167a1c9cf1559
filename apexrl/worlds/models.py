"""Records the world runtime writes: the serve line, snapshots and diffs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from apexrl.artifacts.models import Record


class ServerStatus(BaseModel):
    name: str
    ok: bool
    detail: str = ""  # probe summary, or the error when not ok
    tools: list[str] = Field(default_factory=list)


class ServeRecord(Record):
    """The one line `world serve` prints once every server answers."""

    world_id: str
    url: str  # the MCP endpoint (streamable HTTP)
    health_url: str
    host: str
    port: int
    world_dir: str
    servers: list[str]
    n_tools: int
    snapshot_url: str | None = None  # POST: the world's snapshot tar.gz (profile mercor)


class SnapshotFile(BaseModel):
    path: str  # 'filesystem/...' or '.apps_data/...'
    size: int
    sha256: str


class SnapshotRecord(Record):
    """A snapshot of a world's state: a tar of filesystem/ and .apps_data/."""

    world_id: str
    tar_path: str
    n_files: int
    size_bytes: int  # total size of the files (not of the tar)
    sha256: str  # digest of the sorted (path, sha256) list: equal state, equal digest
    files: list[SnapshotFile] = Field(default_factory=list)


class FileChange(Record):
    """One file created, modified or deleted between two snapshots."""

    path: str
    change: Literal["created", "modified", "deleted"]
    size_before: int | None = None
    size_after: int | None = None
    sha256_before: str | None = None
    sha256_after: str | None = None


class WorldDiff(Record):
    before: str
    after: str
    created: list[FileChange] = Field(default_factory=list)
    modified: list[FileChange] = Field(default_factory=list)
    deleted: list[FileChange] = Field(default_factory=list)

    @property
    def changes(self) -> list[FileChange]:
        return sorted([*self.created, *self.modified, *self.deleted], key=lambda c: c.path)


class ToolRecord(Record):
    """One tool a world's gateway lists."""

    name: str  # as the agent calls it (e.g. excel_read_tab)
    server: str  # the server it belongs to (e.g. excel)
    surface: str  # archipelago (the one surface)
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=dict)  # JSON Schema of the arguments
    args: str = ""  # compact signature for tables: "file_path, tab_index, cell_range?"

"""`world verify`: one case set on apexrl's servers and on archipelago's, over two
copies of one world; a record per case and a summary by server."""

from __future__ import annotations

import asyncio
import math
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from apexrl.peer.cases import Case, cases_for
from apexrl.peer.compare import changes, normalise, tree_state
from apexrl.peer.runtime import Runtime, servers
from apexrl.peer.sessions import Reply


class Side(BaseModel):
    error: bool
    content: list[str]
    files: dict[str, str] = {}


class VerifyRecord(BaseModel):
    """One case: the call, both replies (as the model sees them) and the files each
    left changed; `same` when both agree after normalisation."""

    server: str
    tool: str
    args: dict[str, Any]
    same: bool
    apexrl: Side
    peer: Side


class ServerSummary(BaseModel):
    server: str
    cases: int
    identical: int


class VerifySummary(BaseModel):
    world: str
    cases: int
    identical: int
    servers: list[ServerSummary]

    @property
    def ok(self) -> bool:
        return self.cases > 0 and self.identical == self.cases

    def line(self) -> str:
        by = ", ".join(f"{s.server} {s.identical}/{s.cases}" for s in self.servers)
        return f"{self.identical}/{self.cases} identical ({by})"


def prepare_copies(world: Path, work: Path) -> tuple[Path, Path]:
    """Two copies (apexrl's, the peer's) of a world zip or folder, each holding
    filesystem/ and .apps_data/."""
    from apexrl.worlds.world import open_world

    w = open_world(world, workdir=work / "src" if world.is_file() else None)
    try:
        copies = []
        for name in ("apexrl", "peer"):
            dest = work / name
            dest.mkdir(parents=True)
            for sub in ("filesystem", ".apps_data"):
                src = w.root / sub
                if src.is_dir():
                    shutil.copytree(src, dest / sub, symlinks=True)
                else:
                    (dest / sub).mkdir()
            copies.append(dest)
    finally:
        w.close()
    shutil.rmtree(work / "src", ignore_errors=True)
    return copies[0], copies[1]


# apps whose writes are stamped to the second ("now") and listed newest first, ties in
# file order: mail (Date), chat (post time), calendar (created/updated)
SECOND_STAMPED = frozenset({"mail", "chat", "calendar"})


async def next_second(last_write_end: float | None, clock=time.time, sleep=asyncio.sleep):
    """Wait until a new wall-clock second has begun since the last write ended.

    Each write case runs on apexrl's side, then the peer's, some milliseconds apart.
    When a second boundary falls between the two, one side's new item ties (same
    second) with an earlier write and the other's does not, so a newest-first listing
    orders them differently on the two sides although both servers sort alike. Every
    write starting in a second of its own makes the order the case order on both."""
    if last_write_end is None:
        return
    wait = math.floor(last_write_end) + 1 - clock()
    if wait > 0:
        await sleep(wait)


def _same(a: Side, p: Side, now: datetime) -> bool:
    na = [normalise(t, now=now) for t in a.content]
    np_ = [normalise(t, now=now) for t in p.content]
    return a.error == p.error and na == np_ and a.files == p.files


async def _run_server(
    name: str,
    cases: list[Case],
    rt: Runtime,
    a_root: Path,
    p_root: Path,
    emit: Callable[[VerifyRecord], None],
    now: datetime,
) -> ServerSummary:
    from apexrl.peer.sessions import apexrl_session, peer_session

    same = 0
    last_write: float | None = None
    async with peer_session(rt, p_root) as peer, apexrl_session(name, a_root) as ours:
        for case in cases:
            before = (tree_state(a_root), tree_state(p_root)) if case.writes else None
            if case.writes and name in SECOND_STAMPED:
                await next_second(last_write)
            ra: Reply = await ours.call(case.tool, case.args)
            rp: Reply = await peer.call(case.tool, case.args)
            if case.writes:
                last_write = time.time()
            fa = fp = {}
            if before is not None:
                fa = changes(before[0], tree_state(a_root))
                fp = changes(before[1], tree_state(p_root))
            a = Side(error=ra.error, content=ra.blocks, files=fa)
            p = Side(error=rp.error, content=rp.blocks, files=fp)
            rec = VerifyRecord(
                server=name, tool=case.tool, args=case.args, same=_same(a, p, now), apexrl=a, peer=p
            )
            same += rec.same
            emit(rec)
    return ServerSummary(server=name, cases=len(cases), identical=same)


def verify(
    world: Path,
    runtimes: dict[str, Runtime],
    *,
    emit: Callable[[VerifyRecord], None],
    on_progress: Callable[[str], None] | None = None,
    work_dir: Path | None = None,
) -> VerifySummary:
    """Run the case set of every server in `runtimes` (apexrl names) over two copies of
    `world`; `emit` gets each record as it is made."""
    say = on_progress or (lambda _m: None)
    order = [s.name for s in servers() if s.name in runtimes]
    summaries = []
    with tempfile.TemporaryDirectory(prefix="apexrl-verify-", dir=work_dir) as tmp:
        a_root, p_root = prepare_copies(world, Path(tmp))
        cases = cases_for(a_root, order)
        now = datetime.now(UTC)
        for name in order:
            mine = [c for c in cases if c.server == name]
            folder = runtimes[name].server.folder
            say(f"{name}: starting archipelago's {folder} server, {len(mine)} cases")
            s = asyncio.run(_run_server(name, mine, runtimes[name], a_root, p_root, emit, now))
            say(f"{name}: {s.identical}/{s.cases} identical")
            summaries.append(s)
    return VerifySummary(
        world=str(world),
        cases=sum(s.cases for s in summaries),
        identical=sum(s.identical for s in summaries),
        servers=summaries,
    )

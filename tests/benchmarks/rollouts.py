"""Rollouts at scale: N concurrent simulated trials through apexrl's real agent loop.

What is real: `AgentLoop` (apexrl.agent.loop), `TitoSession` / `TokenState`
(apexrl.tito), the real Qwen3 tokenizer and chat template, one `EngineClient`
(httpx, `/v1/completions` with token-id prompts) per trial as ApexAgent makes it,
and the trial's records (tito.json: `TitoTrajectory` JSON; apexrl_agent.json).

What is a double (benchmark only):
  engine  `BenchEngine`: a scripted completions server in its own process (an asyncio
          HTTP/1.1 server on 127.0.0.1) that answers each request after a scripted
          latency with pre-tokenized Qwen3 completions (thinking + one tool call, stop
          token appended, one logprob per token, the prompt ids echoed as vLLM does);
          the turn count is read from the prompt (stop tokens), the last turn answers
          without a tool call.
  world   `BenchTools`: a ToolBox double whose tools return at once with document-like
          text of a scripted size (default 2-4k tokens per observation).
Everything is a deterministic function of the trial's instruction, so records do not
depend on scheduling (in-process or sharded over worker processes).

The driver measures: RSS (VmRSS / peak VmHWM from /proc), event-loop lag (a 10 ms
ticker's overshoot), CPU (getrusage) per agent step and achieved steps/s. With
`shards=K` the trials run in K worker processes (apexrl.trial.shards), each with its
own event loop; their figures are summed (RSS, CPU) or pooled (lag samples).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import random
import resource
import statistics
import time
import zlib
from array import array
from dataclasses import asdict, dataclass, field
from pathlib import Path

MODEL = "bench-scripted"
TOOLS_PER_SERVER = {
    "filesystem": ["read_text_file", "search_files", "get_directory_tree", "get_file_metadata"],
    "excel": ["read_tab", "list_tabs", "write_cell", "add_tab"],
    "word": ["read_document", "create_document", "edit_paragraph"],
    "powerpoint": ["read_slides", "create_deck"],
    "pdfs": ["read_pdf_pages", "search_pdf", "read_page_as_image"],
    "mail": ["list_messages", "read_message", "send_message"],
    "calendar": ["list_events", "create_event"],
    "chat": ["list_channels", "read_history", "post_message"],
    "code_execution": ["code_exec"],
}


@dataclass
class Shape:
    """The shape of a simulated trial (tokens, turns, latency)."""

    turns: int = 20  # engine calls; the last one answers without a tool call
    obs_tokens: tuple[int, int] = (2000, 4000)  # tokens per tool result
    completion_tokens: tuple[int, int] = (150, 600)  # sampled tokens per turn
    latency_s: tuple[float, float] = (1.0, 2.0)  # per engine call
    context_window: int = 262_144

    @property
    def approx_tokens(self) -> int:
        o = sum(self.obs_tokens) / 2
        c = sum(self.completion_tokens) / 2
        return int(self.turns * c + (self.turns - 1) * o)


# --- the world double ----------------------------------------------------------------------
_WORDS = [
    "revenue",
    "margin",
    "forecast",
    "quarter",
    "board",
    "memo",
    "clause",
    "agreement",
    "counterparty",
    "valuation",
    "ebitda",
    "multiple",
    "synergy",
    "client",
    "deliverable",
    "slide",
    "appendix",
    "risk",
    "exposure",
    "liability",
    "indemnity",
    "schedule",
    "tranche",
    "covenant",
    "partner",
    "analyst",
    "market",
    "share",
    "growth",
    "segment",
    "region",
    "pricing",
    "churn",
    "retention",
    "cohort",
    "baseline",
    "scenario",
    "upside",
    "downside",
]


def _corpus(seed: int = 0, n_chars: int = 400_000) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    line: list[str] = []
    while size < n_chars:
        w = rng.choice(_WORDS)
        if rng.random() < 0.15:
            w = f"{rng.randint(1, 99_999):,}"
        elif rng.random() < 0.05:
            w = f"{rng.uniform(0, 100):.1f}%"
        line.append(w)
        size += len(w) + 1
        if len(line) >= rng.randint(8, 18):
            out.append(" ".join(line).capitalize() + ".")
            line = []
    return "\n".join(out)


class BenchTools:
    """A ToolBox double: the tools of a nine-server world; every call returns at once
    with document text of 2-4k tokens (deterministic in the call's arguments)."""

    def __init__(self, obs_tokens: tuple[int, int], chars_per_token: float, corpus: str) -> None:
        self.obs_tokens = obs_tokens
        self.cpt = chars_per_token
        self.corpus = corpus
        self.reconnects = 0
        self.tools = [
            {
                "type": "function",
                "function": {
                    "name": f"{srv}_{name}",
                    "description": f"{name.replace('_', ' ').capitalize()} in the world's "
                    f"{srv.replace('_', ' ')} app. Returns the content as text.",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "file_path": {"type": "string", "description": "Absolute path."},
                            "query": {"type": "string", "description": "What to look for."},
                        },
                        "required": ["file_path"],
                    },
                },
            }
            for srv, names in TOOLS_PER_SERVER.items()
            for name in names
        ]
        self.names = {t["function"]["name"] for t in self.tools}

    async def call(self, name: str, arguments: dict, *, timeout_s: float):
        from apexrl.agent.mcp_tools import ToolOutcome

        key = zlib.crc32(json.dumps([name, arguments], sort_keys=True).encode())
        lo, hi = self.obs_tokens
        n_chars = int((lo + key % max(1, hi - lo + 1)) * self.cpt)
        start = key % max(1, len(self.corpus) - n_chars)
        return ToolOutcome("ok", self.corpus[start : start + n_chars], 0.0)

    async def reconnect(self, *, ready_timeout_s: float = 30.0) -> None:
        self.reconnects += 1

    async def close(self) -> None:
        return None


# --- the engine double (own process) ---------------------------------------------------------
def _completion_bank(shape: Shape, tools: list[str], corpus: str, cpt: float):
    """Pre-tokenized completions: (text, ids) with thinking + a tool call, and finals."""
    from apexrl.tito.tokenizer import load_tokenizer
    from tests.scripted_engine import tool_call_text

    tok = load_tokenizer("qwen3")
    rng = random.Random(7)
    calls, finals = [], []
    lo, hi = shape.completion_tokens
    for k in range(64):
        n = int(rng.randint(lo, hi) * cpt)
        s = rng.randrange(len(corpus) - n)
        think = corpus[s : s + n]
        name = tools[k % len(tools)]
        args = {"file_path": f"/filesystem/docs/file_{k:03d}.txt", "query": _WORDS[k % len(_WORDS)]}
        text = tool_call_text(name, args, think=think)
        calls.append(text)
    for k in range(8):
        finals.append(
            f"The analysis is complete. Final answer {k}: " + corpus[k * 97 : k * 97 + 300]
        )
    stop = tok.token_to_id("<|im_end|>")

    def enc(text: str) -> tuple[str, list[int]]:
        return text, [*tok.encode(text), stop]

    return [enc(t) for t in calls], [enc(t) for t in finals], stop


def _engine_main(conn, shape: Shape, seed: int) -> None:
    """Entry of the engine process: serve until the pipe closes."""
    import orjson

    from apexrl.tito.tokenizer import load_tokenizer

    tok = load_tokenizer("qwen3")
    corpus = _corpus(seed)
    cpt = len(corpus[:20000]) / len(tok.encode(corpus[:20000]))
    tools = [f"{s}_{n}" for s, names in TOOLS_PER_SERVER.items() for n in names]
    calls, finals, stop = _completion_bank(shape, tools, corpus, cpt)
    # an initial prompt holds 2 stop tokens (system, user); each full step adds 2
    base_stops = 2

    def answer(body: dict) -> tuple[float, bytes]:
        prompt = body["prompt"]
        key = zlib.crc32(array("i", prompt[-256:]).tobytes())
        turn = max(0, (prompt.count(stop) - base_stops) // 2)
        text, ids = (finals if turn >= shape.turns - 1 else calls)[
            key % 64 % len(finals if turn >= shape.turns - 1 else calls)
        ]
        max_tokens = int(body.get("max_tokens") or 16)
        finish = "stop"
        if len(ids) > max_tokens:
            ids, finish = ids[:max_tokens], "length"
            text = tok.decode(ids)
        choice = {
            "index": 0,
            "text": text,
            "finish_reason": finish,
            "token_ids": ids,
            "prompt_token_ids": prompt,
            "logprobs": {"token_logprobs": [-0.25 - (i % 7) / 8 for i in range(len(ids))]},
        }
        lo, hi = shape.latency_s
        delay = lo + (key % 1000) / 1000 * (hi - lo)
        out = {"id": f"cmpl-{key:x}", "object": "text_completion", "model": MODEL}
        out["choices"] = [choice]
        return delay, orjson.dumps(out)

    models = orjson.dumps(
        {"object": "list", "data": [{"id": MODEL, "max_model_len": shape.context_window}]}
    )

    class Proto(asyncio.Protocol):
        def connection_made(self, transport) -> None:
            self.t = transport
            self.buf = bytearray()

        def data_received(self, data: bytes) -> None:
            self.buf += data
            while True:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
                length = 0
                for h in head[1:]:
                    k, _, v = h.partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v.strip())
                if len(self.buf) < end + 4 + length:
                    return
                body = bytes(self.buf[end + 4 : end + 4 + length])
                del self.buf[: end + 4 + length]
                method, path = head[0].split(" ")[:2]
                if method == "GET":
                    self.send(200, models if path.startswith("/v1/models") else b"{}")
                    continue
                delay, data_out = answer(orjson.loads(body))
                asyncio.get_running_loop().call_later(delay, self.send, 200, data_out)

        def send(self, status: int, data: bytes) -> None:
            if self.t.is_closing():
                return
            self.t.write(
                f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n\r\n".encode()
                + data
            )

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Proto, "127.0.0.1", 0, backlog=4096)
        conn.send(server.sockets[0].getsockname()[1])
        await loop.run_in_executor(None, _wait_closed, conn)
        server.close()

    asyncio.run(serve())


def _wait_closed(conn) -> None:
    with contextlib.suppress(EOFError):
        conn.recv()


class BenchEngine:
    """The engine double in its own (spawned) process, on 127.0.0.1."""

    def __init__(self, shape: Shape, seed: int = 0) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_engine_main, args=(child, shape, seed), daemon=True)
        self.proc.start()
        deadline = time.monotonic() + 120
        while not self._conn.poll(0.2):
            if not self.proc.is_alive() or time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError("the bench engine did not start")
        self.url = f"http://127.0.0.1:{self._conn.recv()}"

    def close(self) -> None:
        self._conn.close()
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)

    def __enter__(self) -> BenchEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- the driver --------------------------------------------------------------------------------
def rss_kb() -> tuple[int, int]:
    """(VmRSS, VmHWM) of this process in kB."""
    cur = peak = 0
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                cur = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1])
    return cur, peak


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0: write 5 to clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@dataclass
class DriverStats:
    trials: int = 0
    steps: int = 0
    tokens: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    rss_base_kb: int = 0
    rss_peak_kb: int = 0
    rss_end_kb: int = 0
    lag_ms: list[float] = field(default_factory=list)
    record_bytes: int = 0


class _Ctx:
    """What every trial of one driver shares (loaded once per process)."""

    def __init__(self, shape: Shape, seed: int) -> None:
        from apexrl.tito.template import resolve_template
        from apexrl.tito.tokenizer import load_tokenizer

        self.shape = shape
        self.tok = load_tokenizer("qwen3")
        self.tname, self.template = resolve_template(None, self.tok.chat_template)
        self.corpus = _corpus(seed)
        sample = self.corpus[:20000]
        self.cpt = len(sample) / len(self.tok.encode(sample))
        self.warm_up()

    def warm_up(self) -> None:
        """Pay the one-time costs (template compile, httpx import) before measuring."""
        from apexrl.tito.session import TitoSession

        tools = BenchTools(self.shape.obs_tokens, self.cpt, self.corpus)
        s = TitoSession(self.tok, chat_template=self.template, template_name=self.tname)
        s.start([{"role": "user", "content": "warm up"}], tools=tools.tools)
        s.add_observations([{"role": "tool", "tool_call_id": "c", "content": "x"}])
        import httpx  # noqa: F401  (EngineClient imports it on first use)


_CTX: dict[tuple, _Ctx] = {}


def _ctx(shape: Shape, seed: int) -> _Ctx:
    key = (json.dumps(asdict(shape)), seed)
    if key not in _CTX:
        _CTX[key] = _Ctx(shape, seed)
    return _CTX[key]


async def run_one(i: int, url: str, shape: Shape, seed: int, out_dir: str | None) -> dict:
    """One simulated trial the way ApexAgent runs it (engine client, TITO session, agent
    loop, records); returns its summary. Writes tito.json / apexrl_agent.json under
    out_dir/<trial> when out_dir is given (else serializes them and drops the bytes)."""
    from apexrl.agent.loop import AgentLoop
    from apexrl.agent.offload import write_off_loop
    from apexrl.tito.client import EngineClient, RetryPolicy
    from apexrl.tito.session import TitoSession
    from apexrl.trial.config import AgentBudgets, Sampling

    c = _ctx(shape, seed)
    budgets = AgentBudgets(max_steps=shape.turns + 5, context_window=shape.context_window)
    client = EngineClient(
        url,
        model=MODEL,
        timeout_s=budgets.llm_timeout_s,
        retry=RetryPolicy(max_retries=2, base_delay_s=0.5, max_delay_s=4.0),
    )
    client.max_context = shape.context_window
    tools = BenchTools(shape.obs_tokens, c.cpt, c.corpus)
    session = TitoSession(c.tok, chat_template=c.template, template_name=c.tname, model=MODEL)
    loop = AgentLoop(
        session=session,
        client=client,
        tools=tools,  # type: ignore[arg-type]
        budgets=budgets,
        sampling=Sampling(),
        context_window=shape.context_window,
    )
    tid = f"trial-{i:05d}"
    try:
        rec = await loop.run(f"Task {i}: build the market size table for client {i * 7919 % 997}.")
    finally:
        await client.aclose()

    def write() -> tuple[bytes, str]:  # as ApexAgent writes them: the record-writer thread
        tito_json = session.trajectory_json(
            tid, status=rec.status, error_class=rec.error_class, mask=session.state.mask.tolist()
        )
        rec_json = rec.model_dump_json(indent=2)
        if out_dir is not None:
            d = Path(out_dir) / tid
            d.mkdir(parents=True, exist_ok=True)
            (d / "tito.json").write_bytes(tito_json)
            (d / "apexrl_agent.json").write_text(rec_json)
        return tito_json, rec_json

    tito_json, rec_json = await write_off_loop(write)
    return {
        "status": rec.status,
        "steps": rec.steps,
        "tokens": rec.stream_tokens,
        "bytes": len(tito_json) + len(rec_json),
    }


async def _ticker(samples: list[float], stop: asyncio.Event, period: float = 0.01) -> None:
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(period)
        samples.append((time.perf_counter() - t - period) * 1000)


async def drive(
    ids: list[int], url: str, shape: Shape, seed: int = 0, out_dir: str | None = None
) -> DriverStats:
    """Run trials `ids` concurrently in this process's event loop and measure."""
    import gc

    _ctx(shape, seed)  # load the tokenizer and the corpus before measuring
    gc.collect()
    st = DriverStats(trials=len(ids))
    reset_peak_rss()
    st.rss_base_kb = rss_kb()[0]
    stop = asyncio.Event()
    tick = asyncio.create_task(_ticker(st.lag_ms, stop))
    c0, t0 = cpu_s(), time.perf_counter()
    results = await asyncio.gather(*(run_one(i, url, shape, seed, out_dir) for i in ids))
    st.wall_s = time.perf_counter() - t0
    st.cpu_s = cpu_s() - c0
    stop.set()
    await tick
    st.rss_end_kb, st.rss_peak_kb = rss_kb()
    for r in results:
        st.steps += r["steps"]
        st.tokens += r["tokens"]
        st.record_bytes += r["bytes"]
        st.statuses[r["status"]] = st.statuses.get(r["status"], 0) + 1
    return st


async def drive_shard(
    ids: list[int], url: str, shape: dict, seed: int, out_dir: str | None
) -> dict:
    """Entry of one worker process (apexrl.trial.shards), in its event loop."""
    shape["obs_tokens"] = tuple(shape["obs_tokens"])
    return asdict(await drive(ids, url, Shape(**shape), seed, out_dir))


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def summarize(parts: list[DriverStats], n: int, wall_s: float) -> dict:
    steps = sum(p.steps for p in parts)
    cpu = sum(p.cpu_s for p in parts)
    lag = [x for p in parts for x in p.lag_ms]
    workers = [p for p in parts if p.trials]
    rss_peak = sum(p.rss_peak_kb for p in parts)
    rss_base = sum(p.rss_base_kb for p in parts)
    statuses: dict[str, int] = {}
    for p in parts:
        for k, v in p.statuses.items():
            statuses[k] = statuses.get(k, 0) + v
    tokens = sum(p.tokens for p in parts)
    return {
        "trials": n,
        "processes": len(workers),
        "statuses": statuses,
        "steps": steps,
        "tokens_total": tokens,
        "tokens_per_trial": round(tokens / max(1, n)),
        "wall_s": round(wall_s, 2),
        "steps_per_s": round(steps / wall_s, 2) if wall_s else 0.0,
        "cpu_s": round(cpu, 2),
        "cpu_ms_per_step": round(1000 * cpu / max(1, steps), 3),
        "rss_base_mb": round(rss_base / 1024, 1),
        "rss_peak_mb": round(rss_peak / 1024, 1),
        "rss_per_trial_mb": round((rss_peak - rss_base) / 1024 / max(1, n), 3),
        "lag_ms": {
            "p50": round(statistics.median(lag), 2) if lag else 0.0,
            "p99": round(_pct(lag, 0.99), 2),
            "max": round(max(lag), 2) if lag else 0.0,
            "samples": len(lag),
        },
        "record_mb": round(sum(p.record_bytes for p in parts) / 2**20, 1),
    }


def run_scale(
    n: int,
    shape: Shape,
    *,
    shards: int = 0,
    seed: int = 0,
    out_dir: str | None = None,
    engine_url: str | None = None,
) -> dict:
    """N concurrent trials; in this process (shards=0) or over `shards` worker processes."""
    engine = None if engine_url else BenchEngine(shape, seed)
    url = engine_url or engine.url  # type: ignore[union-attr]
    try:
        t0 = time.perf_counter()
        if shards <= 0:
            parts = [asyncio.run(drive(list(range(n)), url, shape, seed, out_dir))]
        else:
            from apexrl.trial.shards import ShardPool

            groups = [list(range(k, n, shards)) for k in range(shards)]

            async def fan_out() -> list[dict]:
                with ShardPool(shards) as pool:
                    return await asyncio.gather(
                        *(
                            pool.submit(
                                "tests.benchmarks.rollouts:drive_shard",
                                g,
                                url,
                                asdict(shape),
                                seed,
                                out_dir,
                                shard=k,
                            )
                            for k, g in enumerate(groups)
                        )
                    )

            reset_peak_rss()  # the parent's own peak during this run
            parts = [DriverStats(**d) for d in asyncio.run(fan_out())]
            # the parent (pool, pipes) counts too: a part with its whole RSS and no trials
            parts.append(DriverStats(rss_peak_kb=rss_kb()[1]))
        wall = time.perf_counter() - t0
    finally:
        if engine is not None:
            engine.close()
    out = summarize(parts, n, wall)
    out["shape"] = {**asdict(shape), "approx_tokens": shape.approx_tokens}
    out["shards"] = shards
    return out


def _isolated_main(conn, n: int, shape: dict, shards: int, seed: int) -> None:
    shape["obs_tokens"] = tuple(shape["obs_tokens"])
    try:
        conn.send(("ok", run_scale(n, Shape(**shape), shards=shards, seed=seed)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()


def run_isolated(n: int, shape: Shape, *, shards: int = 0, seed: int = 0) -> dict:
    """run_scale in a fresh (spawned) driver process: its RSS is this run's alone, not
    what an earlier run in the same process left allocated."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_isolated_main, args=(child, n, asdict(shape), shards, seed))
    proc.start()
    child.close()
    try:
        kind, value = parent.recv()
    except EOFError:
        kind, value = "error", f"the driver process died (exit code {proc.exitcode})"
    proc.join(30)
    if kind != "ok":
        raise RuntimeError(value)
    return value


if __name__ == "__main__":  # quick manual run: python -m tests.benchmarks.rollouts N TURNS
    import sys

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    shards = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    lat = float(os.environ.get("LAT", "1.0"))
    res = run_scale(n, Shape(turns=turns, latency_s=(lat, 2 * lat)), shards=shards)
    print(json.dumps(res, indent=1))

"""Tool servers are declarations: one `Server` per module, its tools module-level functions
(callable one by one with a world), and one failure type whose style is the peer's."""

from __future__ import annotations

import asyncio
import inspect

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult

from apexrl.worlds.servers import Failed, Server, Style, failure, guard
from apexrl.worlds.servers.archipelago import excel, filesystem
from apexrl.worlds.surface import ARCHIPELAGO
from apexrl.worlds.world import open_world


def test_each_module_declares_its_server_once():
    """The surface is read from the declarations: one name per server, its app, its
    archipelago folder, its tools in listing order."""
    servers = ARCHIPELAGO.servers
    assert [s.name for s in servers] == [m.rsplit(".", 1)[-1] for m in ARCHIPELAGO.modules]
    assert len({s.app for s in servers}) == len(servers)
    word = ARCHIPELAGO.server("word")
    assert (word.app, word.peer_folder, word.aliases[0]) == ("docs", "documents", "documents")
    assert ARCHIPELAGO.server("excel").tools[:3] == (
        "create_spreadsheet",
        "delete_spreadsheet",
        "read_tab",
    )
    assert sum(len(s.tools) for s in servers) == 73


def test_a_tool_is_a_function_of_its_world(world_dir):
    """A tool is called directly with its world (a unit test needs no gateway); bound,
    its schema shows the arguments only."""
    w = open_world(world_dir)
    assert "'notes.txt' (text/plain file)" in filesystem.list_files(w, "/")
    (bound,) = [f for f in filesystem.SERVER.bind(w) if f.__name__ == "list_files"]
    assert list(inspect.signature(bound).parameters) == ["path"]
    assert bound("/") == filesystem.list_files(w, "/")
    with pytest.raises(Failed) as e:  # the failure the gateway words as excel's peer does
        excel.read_tab(w, "/missing.xlsx", 0)
    assert e.value.style is Style.TEXT and str(e.value) == "File not found: /missing.xlsx"


def test_one_failure_helper_words_each_peer_style():
    assert failure("read_tab", "File not found: /a.xlsx", Style.TEXT) == "File not found: /a.xlsx"
    r = failure("read_mail", "no such mail", Style.INVALID_PARAMS)
    assert isinstance(r, CallToolResult) and r.is_error
    assert r.content[0].text == "Invalid params: Error calling tool 'read_mail': no such mail"
    r = failure("", "Validation error: input.subject: Value error, x", Style.INTERNAL_ERROR)
    assert r.content[0].text == "Internal error: Validation error: input.subject: Value error, x"
    with pytest.raises(MCPError) as e:
        failure("read_image", "Image not found", Style.RPC_INTERNAL_ERROR)
    assert e.value.error.code == -32603
    assert (
        e.value.error.message == "Internal error: Error calling tool 'read_image': Image not found"
    )
    with pytest.raises(MCPError) as e:
        failure("", "Validation error: request.file_path: bad", Style.RPC_INVALID_PARAMS)
    assert e.value.error.code == -32602
    assert e.value.error.message == "Invalid params: Validation error: request.file_path: bad"


def test_the_guard_answers_a_failure_as_the_raising_tool():
    """A tool raises `Failed`; the gateway's guard answers it in the tool's name (or the
    one the failure gives), sync or async."""
    server = Server("probe_server", app="probe_app")

    @server.tool
    def lookup(world, key: str) -> str:
        raise Failed(f"No key {key}", Style.INTERNAL_ERROR)

    @server.tool
    async def alookup(world, key: str) -> str:
        raise Failed(f"No key {key}", Style.INVALID_PARAMS, tool="lookup")

    sync, coro = (guard(f) for f in server.bind(object()))
    assert sync(key="k").content[0].text == "Internal error: Error calling tool 'lookup': No key k"
    answer = asyncio.run(coro(key="k"))
    assert answer.content[0].text == "Invalid params: Error calling tool 'lookup': No key k"
    assert server.tools == ("lookup", "alookup")
    with pytest.raises(ValueError, match="already has a tool 'lookup'"):
        server.tool(lookup)

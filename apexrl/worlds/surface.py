"""Tool surfaces: which servers a world gateway mounts and which tools each one lists.

A surface is data: for every server, the name its tools are prefixed with, the world
app it serves (`files`, `docs`, `sheets`, ...) and the other names a world may give that
app, the module holding the implementations (`tools(world)` returns functions whose
`__name__` is the tool's base name, `probe(world)` checks the server's data), and the
ordered tool names the gateway registers. A module function not named here is not
listed; a name here without a function is an error at gateway build time. The world
apps are the default surface's (`apexrl.worlds.world.app_names`): one `ServerSpec` adds
a server and its app.

The one surface, `archipelago`, is the server and tool names, arguments and semantics of
Mercor's archipelago MCP servers, the action space recipe-trained checkpoints learned:
`code_execution_code_exec(code=...)`, `excel_read_tab`, `filesystem_search_files`,
`pdfs_read_pdf_pages`, ... Tool names are always prefixed with the server's name.
"""

from __future__ import annotations

from dataclasses import dataclass

from apexrl.errors import UsageError

DEFAULT_SURFACE = "archipelago"


@dataclass(frozen=True)
class ServerSpec:
    name: str  # prefix of its tool names
    app: str  # the world app it serves (`files`, `docs`, ...: apexrl.worlds.world.app_names)
    module: str  # implementation: tools(world) + probe(world)
    tools: tuple[str, ...]  # tool base names, in listing order
    # more names a world's `apps` list may give its app (besides `app` and `name`;
    # lower-case, '_' for '-' and ' ')
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Surface:
    name: str
    always_prefix: bool
    servers: tuple[ServerSpec, ...]
    description: str = ""
    flat_schemas: bool = False  # inline $refs, drop generated titles (as archipelago lists)

    def server(self, name: str) -> ServerSpec:
        for s in self.servers:
            if s.name == name:
                return s
        raise KeyError(name)

    def for_apps(self, apps: list[str]) -> list[ServerSpec]:
        """The servers serving `apps` (world app names), in this surface's order."""
        return [s for s in self.servers if s.app in apps]

    def tool_name(self, server: str, base: str, n_servers: int) -> str:
        return f"{server}_{base}" if (self.always_prefix or n_servers > 1) else base


_A = "apexrl.worlds.servers.archipelago"

ARCHIPELAGO = Surface(
    name="archipelago",
    always_prefix=True,
    flat_schemas=True,
    description="archipelago's MCP servers (the recipe's action space)",
    servers=(
        ServerSpec(
            "filesystem",
            "files",
            f"{_A}.filesystem",
            (
                "list_files",
                "read_image_file",
                "read_text_file",
                "search_files",
                "get_file_metadata",
                "get_directory_tree",
            ),
            aliases=("file_system", "file_browser"),
        ),
        ServerSpec(
            "word",
            "docs",
            f"{_A}.word",
            (
                "create_document",
                "delete_document",
                "get_document_overview",
                "read_document_content",
                "read_image",
                "add_content_text",
                "edit_content_text",
                "delete_content_text",
                "add_image",
                "modify_image",
                "apply_formatting",
                "header_footer",
                "page_margins",
                "page_orientation",
                "comments",
            ),
            aliases=("documents", "document", "docx"),
        ),
        ServerSpec(
            "excel",
            "sheets",
            f"{_A}.excel",
            (
                "create_spreadsheet",
                "delete_spreadsheet",
                "read_tab",
                "read_csv",
                "list_tabs_in_spreadsheet",
                "add_tab",
                "delete_tab",
                "edit_spreadsheet",
                "add_content_text",
                "delete_content_cell",
                "create_chart",
                "filter_tab",
            ),
            aliases=("spreadsheets", "spreadsheet", "xlsx"),
        ),
        ServerSpec(
            "powerpoint",
            "slides",
            f"{_A}.powerpoint",
            (
                "create_deck",
                "delete_deck",
                "add_slide",
                "edit_slides",
                "add_image",
                "modify_image",
                "insert_chart",
                "insert_table",
                "add_shape",
                "read_slides",
                "read_completedeck",
                "read_individualslide",
                "read_image",
            ),
            aliases=("presentations", "pptx"),
        ),
        ServerSpec(
            "pdfs",
            "pdf",
            f"{_A}.pdfs",
            ("create_pdf", "read_pdf_pages", "read_image", "read_page_as_image", "search_pdf"),
        ),
        ServerSpec(
            "mail",
            "mail",
            f"{_A}.mail",
            (
                "list_mails",
                "read_mail",
                "search_mail",
                "send_mail",
                "reply_mail",
                "reply_all_mail",
                "forward_mail",
            ),
            aliases=("email", "e_mail"),
        ),
        ServerSpec(
            "chat",
            "chat",
            f"{_A}.chat",
            (
                "list_channels",
                "get_channel_history",
                "get_thread_replies",
                "get_user_profile",
                "get_users",
                "post_message",
                "reply_to_thread",
                "add_reaction",
                "delete_post",
            ),
            aliases=("messaging",),
        ),
        ServerSpec(
            "calendar",
            "calendar",
            f"{_A}.calendar",
            ("list_events", "read_event", "create_event", "update_event", "delete_event"),
        ),
        ServerSpec(
            "code_execution",
            "code",
            f"{_A}.code_execution",
            ("code_exec",),
            aliases=("terminal", "shell"),
        ),
    ),
)

SURFACES: dict[str, Surface] = {s.name: s for s in (ARCHIPELAGO,)}


def get_surface(name: str | None = None) -> Surface:
    """The surface called `name` (None: archipelago)."""
    key = (name or DEFAULT_SURFACE).strip().lower()
    try:
        return SURFACES[key]
    except KeyError:
        raise UsageError(
            f"unknown tool surface {key!r}", hint=f"known surfaces: {', '.join(SURFACES)}"
        ) from None

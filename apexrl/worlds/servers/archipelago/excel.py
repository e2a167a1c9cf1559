"""archipelago `excel` server: .xlsx workbooks (openpyxl) addressed by 0-based tab index,
plus CSV reading, with archipelago's result formats: tables are tab-separated with the
column letters first and row numbers in front, one cell is a Python-style
`{'cell': ..., 'value': ...}`, writes answer with a `{'status': 'success', ...}` record,
and a failure is an ordinary result naming it.

Formula cells show the value the spreadsheet app cached, empty when the file has none
(as archipelago shows them). `APEXRL_EXCEL_COMPUTE_FORMULAS=1` (off by default) computes
those instead (`apexrl.worlds.formulas`): better for a model, but not what recipe-trained
checkpoints saw."""

from __future__ import annotations

import csv
import io
import math
import os
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from apexrl.errors import ApexError
from apexrl.worlds.apps import sheets as _sheets
from apexrl.worlds.servers import Failed, Server
from apexrl.worlds.servers.archipelago import (
    file_arg,
    new_file,
    path_problem,
    vpath,
)
from apexrl.worlds.world import World

SERVER = Server(
    "excel",
    app="sheets",
    aliases=("spreadsheets", "spreadsheet", "xlsx"),
    peer_folder="spreadsheets",
)

_XLSX = (".xlsx", ".xlsm")
COMPUTE_ENV = "APEXRL_EXCEL_COMPUTE_FORMULAS"


def _compute_uncached() -> bool:
    return os.environ.get(COMPUTE_ENV, "").strip().lower() in ("1", "true", "yes")


Cell = str | int | float | bool | None
XlsxPath = Annotated[str, Field(description="Path of the .xlsx file, e.g. '/data/report.xlsx'.")]
TabIndex = Annotated[int, Field(ge=0, description="0-based worksheet tab index.")]


class SheetData(BaseModel):
    headers: list[Cell] | None = Field(None, description="Column headers (first row)")
    rows: list[list[Cell]] = Field(default_factory=list, description="Data rows")


class SheetDefinition(SheetData):
    name: str = Field(description="Tab name (max 31 characters)")


class FilterOperator(StrEnum):
    equals = "equals"
    not_equals = "not_equals"
    greater_than = "greater_than"
    less_than = "less_than"
    greater_than_or_equal = "greater_than_or_equal"
    less_than_or_equal = "less_than_or_equal"
    contains = "contains"
    not_contains = "not_contains"
    starts_with = "starts_with"
    ends_with = "ends_with"
    is_empty = "is_empty"
    is_not_empty = "is_not_empty"


class FilterCondition(BaseModel):
    column: str = Field(description="Column letter ('B') or header name when use_headers")
    operator: FilterOperator
    value: Cell = Field(None, description="Value to compare (not for is_empty/is_not_empty)")


class SetCell(BaseModel):
    type: Literal["set_cell"]
    sheet: str | None = Field(None, description="Tab name (default: the active tab)")
    cell: str
    value: Cell


class AppendRows(BaseModel):
    type: Literal["append_rows"]
    sheet: str
    rows: list[list[Cell]] = Field(default_factory=list)


class RenameSheet(BaseModel):
    type: Literal["rename_sheet"]
    sheet: str
    new_name: str


class FormatCells(BaseModel):
    type: Literal["format_cells"]
    sheet: str
    range: str
    font_bold: bool | None = None
    font_italic: bool | None = None
    font_color: str | None = None
    fill_color: str | None = None


class SetNumberFormat(BaseModel):
    type: Literal["set_number_format"]
    sheet: str
    range: str
    format: str


class MergeCells(BaseModel):
    type: Literal["merge_cells"]
    sheet: str
    range: str


class SetColumnWidth(BaseModel):
    type: Literal["set_column_width"]
    sheet: str
    column: str
    width: float


class FreezePanes(BaseModel):
    type: Literal["freeze_panes"]
    sheet: str
    cell: str | None = None


Operation = Annotated[
    SetCell
    | AppendRows
    | RenameSheet
    | FormatCells
    | SetNumberFormat
    | MergeCells
    | SetColumnWidth
    | FreezePanes,
    Field(discriminator="type"),
]


def _xlsx(world: World, file_path: str):
    return file_arg(world, file_path, _XLSX)


def _tab(wb, tab_index: int):
    if not 0 <= tab_index < len(wb.worksheets):
        raise ApexError(
            f"tab_index {tab_index} out of range: the workbook has {len(wb.worksheets)} tab(s) "
            f"{wb.sheetnames} (0-based)"
        )
    return wb.worksheets[tab_index]


def _by_name(wb, name: str | None):
    if name is None:
        return wb.active
    if name not in wb.sheetnames:
        raise ApexError(f"no tab {name!r}; tabs are {wb.sheetnames}")
    return wb[name]


def _shown(v: Any, number_format: str | None = None) -> Any:
    """A cell value as archipelago shows it: datetimes as ISO dates (with the time unless
    midnight), date-formatted serial numbers as dates, anything else unchanged."""
    from datetime import date, datetime, time

    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d") if v.time() == time(0, 0) else v.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(v, date):
        return v.strftime("%Y-%m-%d")
    if isinstance(v, int | float) and not isinstance(v, bool) and number_format:
        from openpyxl.styles.numbers import is_date_format
        from openpyxl.utils.datetime import from_excel

        try:
            if is_date_format(number_format) and 1 <= float(v) <= 2958465:
                return _shown(from_excel(float(v)))
        except (ValueError, OverflowError, TypeError):
            pass
    return v


def _save(world: World, wb, p) -> None:
    """Save a workbook this server changed. archipelago recalculates every workbook it
    writes (LibreOffice), so its formulas then have values: files saved here are
    remembered and their formulas computed when read, to the same effect."""
    wb.save(str(p))
    world.cache.setdefault("excel_written", set()).add(str(p))


def _written(world: World, p) -> bool:
    return str(p) in world.cache.get("excel_written", ())


def _grid(
    wb, cached, title: str, cells, compute: bool = False
) -> tuple[list[list[Any]], dict[str, str]]:
    """Shown values of `cells` (rows of formula-workbook cells) and their formulas; a
    formula without a cached value is empty unless computed (`compute`, for a file this
    server wrote, or the compute option)."""
    from apexrl.worlds.formulas import Evaluator  # openpyxl: not needed to read SERVER

    cws = cached[title]
    ev = Evaluator(wb) if (compute or _compute_uncached()) else None
    grid, formulas = [], {}
    for row in cells:
        out = []
        for c in row:
            v = c.value
            if isinstance(v, str) and v.startswith("="):
                formulas[c.coordinate] = v
                v = cws[c.coordinate].value
                if v is None and ev is not None:
                    v = _recalculated(ev.value(title, c.coordinate))
            out.append(_shown(v, c.number_format))
        grid.append(out)
    return grid, formulas


def _recalculated(v: Any) -> Any:
    """A computed formula result as a recalculation by LibreOffice leaves it in the file
    (the peer recalculates after every write): a float to 15 significant digits."""
    if isinstance(v, float) and math.isfinite(v):
        return float(f"{v:.15g}")
    return v


def computed_values(wb, cached, title: str, rng: tuple[int, int, int, int]) -> list[list[Any]]:
    """Values over (min_col, min_row, max_col, max_row) with every formula computed (for
    charts drawn from a sheet, which need numbers)."""
    c1, r1, c2, r2 = rng
    cells = wb[title].iter_rows(min_row=r1, max_row=r2, min_col=c1, max_col=c2)
    return _grid(wb, cached, title, cells, compute=True)[0]


def _trim(values: list[list[Any]], keep_rows: set[int] | None = None) -> list[list[Any]]:
    """Trailing rows and columns with nothing in them cut (rows in keep_rows stay)."""
    while values and all(v is None for v in values[-1]) and len(values) not in (keep_rows or ()):
        values.pop()
    width = max((len(r) for r in values), default=0)
    while width and all(len(r) < width or r[width - 1] is None for r in values):
        width -= 1
    return [r[:width] for r in values]


def _table(
    values: list[list[Any]],
    label: str,
    *,
    formulas: dict[str, str] | None = None,
    compact: bool = False,
    first_row: int = 1,
    first_col: int = 1,
) -> str:
    """archipelago's table: 'Range: LABEL', then 'Table:' with the column letters, each
    row after its number (a formula cell as 'value (formula)'); CSV when compact."""
    from openpyxl.utils.cell import get_column_letter

    def s(v: Any) -> str:
        return "" if v is None else str(v)

    if not values:
        return "" if compact else f"Range: {label}\nTable: (empty)"
    if compact:
        buf = io.StringIO()
        csv.writer(buf).writerows([[s(v) for v in r] for r in values])
        return buf.getvalue().rstrip("\r\n")
    width = max(len(r) for r in values)
    lines = ["\t" + "\t".join(get_column_letter(first_col + i) for i in range(width))]
    for i, r in enumerate(values):
        cells = [str(first_row + i)]
        for j in range(width):
            v = r[j] if j < len(r) else None
            f = (formulas or {}).get(f"{get_column_letter(first_col + j)}{first_row + i}")
            if j >= len(r):
                cells.append("")
            elif f:
                cells.append(f"({f})" if v is None or v == "" else f"{v} ({f})")
            else:
                cells.append(s(v))
        lines.append("\t".join(cells))
    return f"Range: {label}\nTable:\n" + "\n".join(lines)


def _truncated(table: str, cut: bool, vals: list[list[Any]]) -> str:
    """A table cut by max_rows/max_cols says how much it shows after its range line."""
    if not cut:
        return table
    head, rest = table.split("\n", 1)
    width = max((len(r) for r in vals), default=0)
    return f"{head}\n\n[truncated to {len(vals)} rows, {width} cols]\n\n{rest}"


def _filtered(
    label: str,
    n_filters: int,
    header: list[Any] | None,
    hits: list[tuple[int, list[Any]]],
    total: int,
    *,
    first_col: int,
    compact: bool,
    diagnostics: str = "",
) -> str:
    """filter_tab's answer: range, filter count, 'Rows matched: k/n', then the header
    row (as H) and the matching rows under their sheet row numbers; no match: no table,
    then `diagnostics` when asked for."""
    from openpyxl.utils.cell import get_column_letter

    if not hits:  # as the peer: no table, and with diagnostics what the columns hold
        if compact:
            return ""
        lines = [
            f"Range: {label}",
            f"Filters applied: {n_filters}",
            f"Rows matched: 0/{total}",
            "Table: (no matching rows)",
        ]
        return "\n".join(lines) + (f"\n\n{diagnostics}" if diagnostics else "")
    body = ([header] if header is not None else []) + [r for _, r in hits]
    if compact:
        buf = io.StringIO()
        csv.writer(buf).writerows([["" if v is None else str(v) for v in r] for r in body])
        return buf.getvalue().rstrip("\r\n")
    width = max((len(r) for r in body), default=0)
    lines = [
        f"Range: {label}",
        f"Filters applied: {n_filters}",
        f"Rows matched: {len(hits)}/{total}",
    ]
    lines.append("Table:")
    lines.append("\t" + "\t".join(get_column_letter(first_col + i) for i in range(width)))
    labelled = ([("H", header)] if header is not None else []) + [(str(n), r) for n, r in hits]
    for name, r in labelled:
        cells = ["" if j >= len(r) or r[j] is None else str(r[j]) for j in range(width)]
        lines.append("\t".join([name, *cells]))
    return "\n".join(lines)


def _diagnostics(filters, cols: list[int], header, rows: list[list[Any]]) -> str:
    """What filter_tab's columns hold when nothing matched (include_diagnostics): up to
    five values (with their types) of each filtered column among the first ten rows, then
    the filters tried, laid out as the peer lays them out."""
    from openpyxl.utils.cell import get_column_letter

    parts = []
    for f, idx in zip(filters, cols, strict=True):
        seen = [r[idx] for r in rows[:10] if idx < len(r) and r[idx] is not None][:5]
        if not seen:
            parts.append(f"Column '{f.column}' has no values in first 10 rows")
            continue
        name = f.column
        if header is not None and idx < len(header):
            head = "" if header[idx] is None else str(header[idx])
            name = f"{head} (column {get_column_letter(idx + 1)})"
        values = ", ".join(f"{v!r} ({type(v).__name__})" for v in seen)
        parts.append(f"Column '{name}' sample values: {values}")
    # the operator as the peer's enum formats under Python 3.12+: its class and member name
    tried = ", ".join(
        f"{f.column} FilterOperator.{FilterOperator(f.operator).value.upper()} {f.value!r}"
        for f in filters
    )
    return (
        "No rows matched. Debug info:\n"
        + "\n".join(f"  - {p}" for p in parts)
        + f"\nFilter attempted: {tried}"
    )


def _record(**fields: Any) -> str:
    """A write's answer: {'status': 'success', ...} in Python's notation."""
    return repr({"status": "success", **fields})


def _open_xlsx(world: World, file_path: str):
    """The workbook file of a tool argument, checked as archipelago checks it."""
    if not isinstance(file_path, str) or not file_path:
        raise Failed("File path is required")
    problem = path_problem(file_path, ".xlsx")
    if problem:
        raise Failed(problem)
    try:
        p = world.fs_path(file_path)
    except ApexError:
        raise Failed(f"Invalid path: {file_path}") from None
    if not p.exists():
        raise Failed(f"File not found: {file_path}")
    if not p.is_file():
        raise Failed(f"Not a file: {file_path}")
    return p


def _read_tab(world: World, file_path: str, tab_index: int):
    """The workbook file, the workbook (formulas), its cached values and the tab a
    tool reads; archipelago's words for a tab index out of range."""
    p = _open_xlsx(world, file_path)
    wb = _sheets._load(p)
    cached = _sheets._load(p, data_only=True)
    if tab_index >= len(wb.worksheets):
        raise Failed(
            f"Tab index {tab_index} is out of range. Available sheets: {len(wb.worksheets)}"
        )
    return p, wb, cached, wb.worksheets[tab_index]


def _coerce(v: Any) -> Any:
    return _sheets._coerce(v) if isinstance(v, str) else v


def _match(cell: Any, op: FilterOperator, want: Any) -> bool:
    if op is FilterOperator.is_empty:
        return cell is None or str(cell).strip() == ""
    if op is FilterOperator.is_not_empty:
        return not (cell is None or str(cell).strip() == "")
    if cell is None:
        return op in (FilterOperator.not_equals, FilterOperator.not_contains)
    try:
        a, b = float(cell), float(want)
        numeric = True
    except (TypeError, ValueError):
        a, b, numeric = str(cell).lower(), str(want).lower(), False
    if op is FilterOperator.equals:
        return a == b
    if op is FilterOperator.not_equals:
        return a != b
    if op in (
        FilterOperator.greater_than,
        FilterOperator.less_than,
        FilterOperator.greater_than_or_equal,
        FilterOperator.less_than_or_equal,
    ):
        if not numeric:
            return False
        return {
            "greater_than": a > b,
            "less_than": a < b,
            "greater_than_or_equal": a >= b,
            "less_than_or_equal": a <= b,
        }[op.value]
    sa, sb = str(cell).lower(), str(want).lower()
    return {
        "contains": sb in sa,
        "not_contains": sb not in sa,
        "starts_with": sa.startswith(sb),
        "ends_with": sa.endswith(sb),
    }[op.value]


@SERVER.tool
def create_spreadsheet(
    world: World,
    directory: Annotated[str, Field(description="Directory, e.g. '/' or '/reports'.")],
    file_name: Annotated[str, Field(description="File name ending with .xlsx.")],
    sheets: Annotated[list[SheetDefinition], Field(description="Tabs with headers/rows.")],
) -> str:
    """Create a new .xlsx workbook with the given tabs (name, optional headers, rows;
    a string starting with '=' is stored as a formula)."""
    import openpyxl

    if not sheets:
        raise ApexError("sheets must contain at least one sheet definition")
    names = [s.name for s in sheets]
    if len(set(names)) != len(names) or any(not n or len(n) > 31 for n in names):
        raise ApexError("sheet names must be unique, non-empty and at most 31 characters")
    with world.lock:
        p = new_file(world, directory, file_name, ".xlsx")
        wb = openpyxl.Workbook()
        wb.remove(wb.active)
        for s in sheets:
            _fill(wb.create_sheet(s.name), s)
        p.parent.mkdir(parents=True, exist_ok=True)
        _save(world, wb, p)
    return _record(file_name=file_name, file_path=vpath(world, p), sheets_created=len(sheets))


@SERVER.tool
def delete_spreadsheet(world: World, file_path: XlsxPath) -> str:
    """Delete a workbook file."""
    p = (
        _xlsx(
            world,
            file_path,
        )
        if world.fs_path(file_path).exists()
        else None
    )
    if p is not None:
        with world.lock:
            p.unlink()
    return _record(file_path=file_path)


@SERVER.tool
def read_tab(
    world: World,
    file_path: XlsxPath,
    tab_index: TabIndex,
    cell_range: Annotated[
        str | None, Field(description="'B5' (one cell) or 'A1:C5'; omit for the whole tab.")
    ] = None,
    include_formulas: Annotated[bool, Field(description="Also list formula strings.")] = False,
    max_rows: int | None = 1000,
    max_cols: int | None = 100,
    compact: Annotated[bool, Field(description="CSV output instead of a table.")] = False,
) -> str:
    """Read the values of a worksheet tab, a range ('A1:C5') or one cell ('B5');
    include_formulas also shows each formula beside its value."""
    p, wb, cached, ws = _read_tab(world, file_path, tab_index)
    if cell_range is None:
        rows = list(ws.iter_rows(min_row=1, min_col=1, max_row=ws.max_row, max_col=ws.max_column))
        cut = (max_rows is not None and len(rows) > max_rows) or (
            max_cols is not None and ws.max_column > max_cols
        )
        rows = [r[:max_cols] if max_cols is not None else r for r in rows[:max_rows]]
        vals, formulas = _grid(wb, cached, ws.title, rows, _written(world, p))
        keep = {int(k.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ")) for k in formulas}
        vals = _trim(vals, keep if include_formulas else None)
        return _truncated(
            _table(vals, "all", formulas=formulas if include_formulas else None, compact=compact),
            cut and not compact,
            vals,
        )
    ref = cell_range.strip().upper()
    if ":" in ref:
        from openpyxl.utils import range_boundaries

        try:
            c1, r1, c2, r2 = range_boundaries(ref)
            # rows past the sheet's last row are not there (the peer's streamed read)
            last = min(r2, ws.max_row)
            rows = list(ws.iter_rows(min_row=r1, max_row=last, min_col=c1, max_col=c2))
        except (ValueError, TypeError) as e:
            raise Failed(f"Invalid cell range '{ref}': {e!r}") from None
        cut = (max_rows is not None and len(rows) > max_rows) or (
            max_cols is not None and c2 - c1 + 1 > max_cols
        )
        rows = [r[:max_cols] if max_cols is not None else r for r in rows[:max_rows]]
        vals, formulas = _grid(wb, cached, ws.title, rows, _written(world, p))
        table = _table(
            vals,
            ref,
            formulas=formulas if include_formulas else None,
            compact=compact,
            first_row=r1,
            first_col=c1,
        )
        return _truncated(table, cut and not compact, vals)
    try:
        c = ws[ref]
    except (ValueError, KeyError, IndexError) as e:
        raise Failed(f"Invalid cell reference '{ref}': {e!r}") from None
    (vals,), formulas = _grid(wb, cached, ws.title, [[c]], _written(world, p))
    if compact:
        return "" if vals[0] is None else str(vals[0])
    out = f"{{'cell': '{ref}', 'value': {vals[0]!r}"
    if include_formulas and formulas:
        out += f", 'formula': {next(iter(formulas.values()))!r}"
    return out + "}"


@SERVER.tool
def read_csv(
    world: World,
    file_path: Annotated[str, Field(description="Path of the .csv file.")],
    delimiter: str = ",",
    encoding: str = "utf-8",
    has_header: bool = True,
    row_limit: int | None = 1000,
    compact: bool = False,
) -> str:
    """Read a CSV file: header and data rows (at most row_limit data rows)."""
    problem = path_problem(file_path, ".csv")
    if problem:
        return problem
    p = world.fs_path(file_path)
    if not p.is_file():
        return f"File not found: {file_path}"
    delim = "\t" if delimiter in ("\\t", "tab") else delimiter
    blob = p.read_bytes()
    try:
        text = blob.decode(encoding)
        rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff")), delimiter=delim))
    except UnicodeDecodeError as e:
        return f"Failed to decode file with encoding '{encoding}': {e!r}."
    except Exception as e:
        return f"Unexpected error reading CSV: {e!r}"
    if not rows:
        return f"File: {file_path}\nTable: (empty)"
    header = rows[0] if (has_header and rows) else None
    data = rows[1:] if header is not None else rows
    total = len(data)
    if row_limit is not None:
        data = data[: max(0, row_limit)]
    if compact:  # the rows as CSV, nothing else
        buf = io.StringIO()
        csv.writer(buf).writerows(([header] if header else []) + data)
        return buf.getvalue().removesuffix("\r\n")
    width = max((len(r) for r in ([header] if header else []) + data), default=0)
    out = [f"File: {file_path}"]
    if len(data) < total:
        out.append(f"\n[truncated to {len(data)} of {total} rows]\n")
    out.append(f"Rows: {len(data)}, Columns: {width}")
    from openpyxl.utils.cell import get_column_letter

    out.append("Table:")
    out.append("\t" + "\t".join(get_column_letter(1 + i) for i in range(width)))
    first = 2 if header is not None else 1
    labelled = ([("H", header)] if header is not None else []) + [
        (str(first + n), r) for n, r in enumerate(data)
    ]
    for name, r in labelled:
        out.append("\t".join([name, *(r[k] if k < len(r) else "" for k in range(width))]))
    return "\n".join(out)


@SERVER.tool
def list_tabs_in_spreadsheet(world: World, file_path: XlsxPath) -> str:
    """List the worksheet tabs of a workbook: name, index (0-based), rows and columns."""
    wb = _sheets._load(_open_xlsx(world, file_path))
    tabs = [
        {"name": ws.title, "index": i, "row_count": ws.max_row, "column_count": ws.max_column}
        for i, ws in enumerate(wb.worksheets)
    ]
    return repr({"worksheets": tabs})


@SERVER.tool
def add_tab(
    world: World,
    file_path: XlsxPath,
    tab_name: Annotated[str, Field(max_length=31, description="Name of the new tab.")],
    sheet_data: SheetData | None = None,
) -> str:
    """Add a worksheet tab to an existing workbook, optionally with headers and rows."""
    p = _xlsx(world, file_path)
    with world.lock:
        wb = _sheets._load(p)
        if tab_name in wb.sheetnames:
            raise ApexError(f"tab {tab_name!r} already exists")
        ws = wb.create_sheet(tab_name)
        _fill(ws, sheet_data)
        _save(world, wb, p)
    n = (1 if sheet_data and sheet_data.headers else 0) + len(sheet_data.rows if sheet_data else [])
    return _record(tab_name=tab_name, file_path=file_path, rows_added=n)


@SERVER.tool
def delete_tab(world: World, file_path: XlsxPath, tab_index: TabIndex) -> str:
    """Remove a worksheet tab (not the last remaining one)."""
    p = _xlsx(world, file_path)
    with world.lock:
        wb = _sheets._load(p)
        ws = _tab(wb, tab_index)
        if len(wb.worksheets) == 1:
            raise ApexError("cannot delete the only tab of a workbook")
        wb.remove(ws)
        _save(world, wb, p)
    return _record(tab_name=ws.title, tab_index=tab_index, file_path=file_path)


@SERVER.tool
def edit_spreadsheet(
    world: World,
    file_path: XlsxPath,
    operations: Annotated[
        list[Operation],
        Field(
            description="Edits, each with a 'type': set_cell, append_rows, rename_sheet, "
            "format_cells, set_number_format, merge_cells, set_column_width, freeze_panes"
        ),
    ],
) -> str:
    """Apply a batch of edits to one workbook, all or nothing."""
    from openpyxl.styles import Font, PatternFill

    if not operations:
        raise ApexError("operations must not be empty")
    p = _xlsx(world, file_path)
    with world.lock:
        wb = _sheets._load(p)
        for i, op in enumerate(operations):
            try:
                if isinstance(op, SetCell):
                    _by_name(wb, op.sheet)[_cell(op.cell)] = _coerce(op.value)
                elif isinstance(op, AppendRows):
                    ws = wb[op.sheet] if op.sheet in wb.sheetnames else wb.create_sheet(op.sheet)
                    for r in op.rows:
                        ws.append([_coerce(v) for v in r])
                elif isinstance(op, RenameSheet):
                    ws = _by_name(wb, op.sheet)
                    if op.new_name in wb.sheetnames:
                        raise ApexError(f"tab {op.new_name!r} already exists")
                    ws.title = op.new_name
                elif isinstance(op, FormatCells):
                    for row in _by_name(wb, op.sheet)[op.range]:
                        for c in row if isinstance(row, tuple) else (row,):
                            old = c.font
                            c.font = Font(
                                name=old.name,
                                size=old.size,
                                underline=old.underline,
                                bold=old.bold if op.font_bold is None else op.font_bold,
                                italic=old.italic if op.font_italic is None else op.font_italic,
                                color=op.font_color or old.color,
                            )
                            if op.fill_color:
                                c.fill = PatternFill("solid", fgColor=op.fill_color)
                elif isinstance(op, SetNumberFormat):
                    for row in _by_name(wb, op.sheet)[op.range]:
                        for c in row if isinstance(row, tuple) else (row,):
                            c.number_format = op.format
                elif isinstance(op, MergeCells):
                    _by_name(wb, op.sheet).merge_cells(op.range)
                elif isinstance(op, SetColumnWidth):
                    _by_name(wb, op.sheet).column_dimensions[op.column.upper()].width = op.width
                elif isinstance(op, FreezePanes):
                    _by_name(wb, op.sheet).freeze_panes = op.cell
            except ApexError as e:
                raise ApexError(f"operations[{i}] ({op.type}): {e.message}") from None
            except (ValueError, KeyError, TypeError) as e:
                raise ApexError(f"operations[{i}] ({op.type}): {e}") from None
        _save(world, wb, p)
    return _record(file_path=file_path, operations_applied=len(operations))


@SERVER.tool
def add_content_text(
    world: World,
    file_path: XlsxPath,
    tab_index: TabIndex,
    cell: Annotated[str, Field(description="Cell in A1 notation; it must be empty.")],
    value: Annotated[
        str | int | float | bool, Field(description="Value, or a formula starting with '='.")
    ],
) -> str:
    """Put a value or formula into an empty cell (never overwrites)."""
    p = _xlsx(world, file_path)
    with world.lock:
        wb = _sheets._load(p)
        ws = _tab(wb, tab_index)
        ref = _cell(cell)
        if ws[ref].value is not None:
            raise ApexError(f"{ref} is not empty ({ws[ref].value!r}); use edit_spreadsheet")
        ws[ref] = _coerce(value)
        _save(world, wb, p)
    return _record(cell=ref, tab_index=tab_index, file_path=file_path)


@SERVER.tool
def delete_content_cell(world: World, file_path: XlsxPath, tab_index: TabIndex, cell: str) -> str:
    """Clear one cell."""
    p = _xlsx(world, file_path)
    with world.lock:
        wb = _sheets._load(p)
        ws = _tab(wb, tab_index)
        ref = _cell(cell)
        old = ws[ref].value
        ws[ref] = None
        _save(world, wb, p)
    return _record(cell=ref, tab_index=tab_index, file_path=file_path, old_value=old)


@SERVER.tool
def create_chart(
    world: World,
    file_path: XlsxPath,
    sheet: Annotated[str, Field(description="Tab holding the data.")],
    data_range: Annotated[
        str, Field(description="Data in A1:B9 notation; first column = categories.")
    ],
    chart_type: Literal["bar", "line", "pie"] = "bar",
    title: str | None = None,
    position: Annotated[str, Field(description="Top-left cell of the chart.")] = "E2",
    categories_column: int | None = None,
    include_header: Annotated[bool, Field(description="First row names the series.")] = True,
) -> str:
    """Add a bar, line or pie chart of a data range to a tab."""
    from openpyxl.chart import BarChart, LineChart, PieChart, Reference
    from openpyxl.utils import range_boundaries

    p = _xlsx(world, file_path)
    with world.lock:
        wb = _sheets._load(p)
        ws = _by_name(wb, sheet)
        try:
            c1, r1, c2, r2 = range_boundaries(data_range)
        except ValueError:
            raise ApexError(f"data_range {data_range!r} is not A1 notation") from None
        if None in (c1, r1, c2, r2) or (c1, r1) == (c2, r2):
            raise ApexError("data_range must be a bounded range of several cells, e.g. 'A1:C10'")
        cat = categories_column if categories_column is not None else 1
        chart = {"bar": BarChart, "line": LineChart, "pie": PieChart}[chart_type]()
        chart.title = title or f"{chart_type.title()} chart"
        data_c1 = c1 + cat if cat else c1
        if data_c1 > c2:
            raise ApexError("data_range has no value columns besides the categories")
        chart.add_data(
            Reference(ws, min_col=data_c1, min_row=r1, max_col=c2, max_row=r2),
            titles_from_data=include_header,
        )
        if cat:
            chart.set_categories(
                Reference(
                    ws,
                    min_col=c1 + cat - 1,
                    min_row=r1 + (1 if include_header else 0),
                    max_row=r2,
                )
            )
        ws.add_chart(chart, _cell(position))
        _save(world, wb, p)
    return f"Chart '{chart_type}' created in {sheet} at position {_cell(position)}"


@SERVER.tool
def filter_tab(
    world: World,
    file_path: XlsxPath,
    tab_index: TabIndex,
    filters: Annotated[list[FilterCondition], Field(description="Conditions on columns.")],
    cell_range: str | None = None,
    match_all: Annotated[bool, Field(description="AND (true) or OR (false).")] = True,
    use_headers: Annotated[bool, Field(description="First row is headers.")] = True,
    include_diagnostics: bool = False,
    compact: bool = False,
) -> str:
    """Rows of a tab whose columns meet the filter conditions (equals, greater_than,
    contains, is_empty, ...; text matching is case-insensitive)."""
    from openpyxl.utils import range_boundaries
    from openpyxl.utils.cell import column_index_from_string

    if not filters:
        raise ApexError("filters must contain at least one condition")
    p, wb, cached, ws = _read_tab(world, file_path, tab_index)
    if cell_range and ":" not in cell_range:
        raise ApexError("cell_range must be a range like 'A1:D100', not a single cell")
    c1, r1, c2, r2 = range_boundaries(cell_range.upper() if cell_range else ws.dimensions)
    c1, r1 = c1 or 1, r1 or 1
    rows_in = ws.iter_rows(
        min_row=r1, max_row=r2 or ws.max_row, min_col=c1, max_col=c2 or ws.max_column
    )
    vals, _ = _grid(wb, cached, ws.title, rows_in, _written(world, p))
    vals = _trim(vals) if not cell_range else vals
    header = vals[0] if (use_headers and vals) else None
    rows = vals[1:] if header is not None else vals
    first_data_row = r1 + (1 if header is not None else 0)
    cols: list[int] = []
    for f in filters:
        idx = None
        if header is not None:
            names = [str(h).strip().lower() if h is not None else "" for h in header]
            if f.column.strip().lower() in names:
                idx = names.index(f.column.strip().lower())
        if idx is None:
            try:
                idx = column_index_from_string(f.column.strip().upper()) - c1
            except ValueError:
                idx = -1
        if not 0 <= idx < len(vals[0] if vals else []):
            raise ApexError(
                f"unknown column {f.column!r}"
                + (f"; headers are {header}" if header is not None else "")
            )
        cols.append(idx)
    hits = []
    for i, r in enumerate(rows):
        res = [
            _match(r[c] if c < len(r) else None, f.operator, f.value)
            for f, c in zip(filters, cols, strict=True)
        ]
        if all(res) if match_all else any(res):
            hits.append((first_data_row + i, r))
    diagnostics = _diagnostics(filters, cols, header, rows) if include_diagnostics and rows else ""
    return _filtered(
        cell_range.upper() if cell_range else "all",
        len(filters),
        header,
        hits,
        len(rows),
        first_col=c1,
        compact=compact,
        diagnostics=diagnostics if not hits else "",
    )


def _cell(ref: str) -> str:
    from openpyxl.utils.cell import coordinate_from_string

    try:
        coordinate_from_string(ref.strip().upper())
    except ValueError:
        raise ApexError(f"{ref!r} is not a cell reference like 'B5'") from None
    return ref.strip().upper()


def _fill(ws, data: SheetData | None) -> None:
    if data is None:
        return
    width = len(data.headers) if data.headers else None
    if data.headers:
        ws.append([_coerce(v) for v in data.headers])
        ws.freeze_panes = "A2"
    for i, r in enumerate(data.rows):
        if width is not None and len(r) != width:
            raise ApexError(f"rows[{i}] has {len(r)} values but there are {width} headers")
        ws.append([_coerce(v) for v in r])


def probe(world: World) -> str:
    return _sheets.probe(world)

"""archipelago `excel` server: .xlsx workbooks (openpyxl) addressed by 0-based tab index,
plus CSV reading. Formula cells show their value: the one the spreadsheet app cached, or
recomputed (`apexrl.worlds.formulas`) when the file has none."""

from __future__ import annotations

import csv
import io
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from apexrl.errors import ApexError
from apexrl.worlds.formulas import Evaluator
from apexrl.worlds.servers import sheets as _sheets
from apexrl.worlds.servers.archipelago import file_arg, new_file, vpath
from apexrl.worlds.world import World

_XLSX = (".xlsx", ".xlsm")
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


def _values(p, ws_title: str, wb, cached, rng: tuple[int, int, int, int]):
    """Grid of computed values (and formulas) over (min_col, min_row, max_col, max_row)."""
    ev = Evaluator(wb)
    ws, cws = wb[ws_title], cached[ws_title]
    c1, r1, c2, r2 = rng
    grid, formulas = [], {}
    for row in ws.iter_rows(min_row=r1, max_row=r2, min_col=c1, max_col=c2):
        out = []
        for c in row:
            v = c.value
            if isinstance(v, str) and v.startswith("="):
                formulas[c.coordinate] = v
                cv = cws[c.coordinate].value
                v = ev.value(ws_title, c.coordinate) if cv is None else cv
            out.append(_sheets._plain(v))
        grid.append(out)
    return grid, formulas


def _table(values: list[list[Any]], compact: bool, first_row: int, first_col: int) -> str:
    from openpyxl.utils.cell import get_column_letter

    def s(v: Any) -> str:
        return "" if v is None else str(v)

    if compact:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([[s(v) for v in r] for r in values])
        return buf.getvalue()
    width = max((len(r) for r in values), default=0)
    head = ["Row"] + [get_column_letter(first_col + i) for i in range(width)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, r in enumerate(values):
        lines.append("| " + " | ".join([str(first_row + i)] + [s(v) for v in r]) + " |")
    return "\n".join(lines)


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


def tools(world: World) -> list:
    def list_tabs_in_spreadsheet(file_path: XlsxPath) -> dict[str, Any]:
        """List the worksheet tabs of a workbook: index (0-based), name, rows and columns."""
        wb = _sheets._load(_xlsx(world, file_path))
        return {
            "file_path": file_path,
            "tabs": [
                {
                    "index": i,
                    "name": ws.title,
                    "rows": ws.max_row,
                    "columns": ws.max_column,
                    "dimensions": ws.dimensions,
                }
                for i, ws in enumerate(wb.worksheets)
            ],
        }

    def read_tab(
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
        """Read the computed values of a worksheet tab (or a range / one cell of it). Formula
        cells show their values; include_formulas also lists the formulas."""
        from openpyxl.utils import range_boundaries

        p = _xlsx(world, file_path)
        wb = _sheets._load(p)
        cached = _sheets._load(p, data_only=True)
        ws = _tab(wb, tab_index)
        try:
            c1, r1, c2, r2 = range_boundaries(cell_range or ws.dimensions)
        except ValueError:
            raise ApexError(
                f"cell_range {cell_range!r} is not A1 notation (e.g. 'A1:C5')"
            ) from None
        c1, r1 = c1 or 1, r1 or 1
        c2, r2 = c2 or ws.max_column, r2 or ws.max_row
        if cell_range and ":" not in cell_range:
            vals, formulas = _values(p, ws.title, wb, cached, (c1, r1, c1, r1))
            out = f"{ws.title}!{cell_range.upper()} = {vals[0][0]!r}"
            if include_formulas and formulas:
                out += f"\nformula: {next(iter(formulas.values()))}"
            return out
        truncated = []
        if max_rows is not None and r2 - r1 + 1 > max_rows:
            r2, _ = r1 + max_rows - 1, truncated.append(f"rows cut at {max_rows}")
        if max_cols is not None and c2 - c1 + 1 > max_cols:
            c2, _ = c1 + max_cols - 1, truncated.append(f"columns cut at {max_cols}")
        vals, formulas = _values(p, ws.title, wb, cached, (c1, r1, c2, r2))
        head = f"Tab {tab_index} '{ws.title}' ({ws.max_row} rows x {ws.max_column} columns)"
        out = [head, _table(vals, compact, r1, c1)]
        if truncated:
            out.append("[" + "; ".join(truncated) + ": read a cell_range to see more]")
        if include_formulas and formulas:
            out.append("Formulas:\n" + "\n".join(f"{k}: {v}" for k, v in formulas.items()))
        return "\n".join(out)

    def read_csv(
        file_path: Annotated[str, Field(description="Path of the .csv file.")],
        delimiter: str = ",",
        encoding: str = "utf-8",
        has_header: bool = True,
        row_limit: int | None = 1000,
        compact: bool = False,
    ) -> str:
        """Read a CSV file: header and data rows (at most row_limit data rows)."""
        p = file_arg(world, file_path, (".csv", ".tsv", ".txt"))
        delim = "\t" if delimiter in ("\\t", "tab") else delimiter
        if len(delim) != 1:
            raise ApexError("delimiter must be one character")
        try:
            text = p.read_bytes().decode(encoding)
        except LookupError:
            raise ApexError(f"unknown encoding {encoding!r}") from None
        except UnicodeDecodeError as e:
            raise ApexError(f"cannot decode {file_path} as {encoding}: {e.reason}") from None
        rows = list(csv.reader(io.StringIO(text.lstrip("\ufeff")), delimiter=delim))
        header = rows[0] if (has_header and rows) else None
        data = rows[1:] if header is not None else rows
        total = len(data)
        if row_limit is not None:
            data = data[: max(0, row_limit)]
        body = ([header] if header else []) + data
        out = [f"{vpath(world, p)}: {total} data rows" + (" (header row first)" if header else "")]
        if compact:
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerows(body)
            out.append(buf.getvalue())
        else:
            out.append(_table(body, False, 1, 1))
        if len(data) < total:
            out.append(f"[showing {len(data)} of {total} rows: raise row_limit to see more]")
        return "\n".join(out)

    def filter_tab(
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
        p = _xlsx(world, file_path)
        wb = _sheets._load(p)
        cached = _sheets._load(p, data_only=True)
        ws = _tab(wb, tab_index)
        if cell_range and ":" not in cell_range:
            raise ApexError("cell_range must be a range like 'A1:D100', not a single cell")
        c1, r1, c2, r2 = range_boundaries(cell_range or ws.dimensions)
        vals, _ = _values(
            p, ws.title, wb, cached, (c1 or 1, r1 or 1, c2 or ws.max_column, r2 or ws.max_row)
        )
        header = vals[0] if (use_headers and vals) else None
        rows = vals[1:] if header is not None else vals
        first_data_row = (r1 or 1) + (1 if header is not None else 0)
        cols: list[int] = []
        for f in filters:
            idx = None
            if header is not None:
                names = [str(h).strip().lower() if h is not None else "" for h in header]
                if f.column.strip().lower() in names:
                    idx = names.index(f.column.strip().lower())
            if idx is None:
                try:
                    idx = column_index_from_string(f.column.strip().upper()) - (c1 or 1)
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
        out = [f"Tab {tab_index} '{ws.title}': {len(hits)} of {len(rows)} rows match"]
        body = ([header] if header is not None else []) + [r for _, r in hits]
        if body:
            out.append(_table(body, compact, (r1 or 1), (c1 or 1)))
        if hits:
            out.append("Matching sheet rows: " + ", ".join(str(n) for n, _ in hits[:200]))
        elif include_diagnostics:
            sample = [rows[0][c] if rows and c < len(rows[0]) else None for c in cols]
            out.append(f"No matches. First data row values in the filtered columns: {sample}")
        return "\n".join(out)

    def add_tab(
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
            wb.save(str(p))
        return f"Added tab '{tab_name}' at index {len(wb.worksheets) - 1} to {vpath(world, p)}"

    def delete_tab(file_path: XlsxPath, tab_index: TabIndex) -> str:
        """Remove a worksheet tab (not the last remaining one)."""
        p = _xlsx(world, file_path)
        with world.lock:
            wb = _sheets._load(p)
            ws = _tab(wb, tab_index)
            if len(wb.worksheets) == 1:
                raise ApexError("cannot delete the only tab of a workbook")
            wb.remove(ws)
            wb.save(str(p))
        return f"Deleted tab '{ws.title}' from {vpath(world, p)}"

    def create_spreadsheet(
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
            wb.save(str(p))
        return f"Created {vpath(world, p)} with {len(sheets)} tab(s): {names}"

    def delete_spreadsheet(file_path: XlsxPath) -> str:
        """Delete a workbook file."""
        p = (
            _xlsx(
                world,
                file_path,
            )
            if world.fs_path(file_path).exists()
            else None
        )
        if p is None:
            return f"{file_path} does not exist (nothing deleted)"
        with world.lock:
            p.unlink()
        return f"Deleted {vpath(world, p)}"

    def add_content_text(
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
            wb.save(str(p))
        return f"Set {ws.title}!{ref} = {value!r}"

    def delete_content_cell(file_path: XlsxPath, tab_index: TabIndex, cell: str) -> str:
        """Clear one cell."""
        p = _xlsx(world, file_path)
        with world.lock:
            wb = _sheets._load(p)
            ws = _tab(wb, tab_index)
            ref = _cell(cell)
            old = ws[ref].value
            ws[ref] = None
            wb.save(str(p))
        return f"Cleared {ws.title}!{ref} (was {old!r})"

    def edit_spreadsheet(
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
                        ws = (
                            wb[op.sheet] if op.sheet in wb.sheetnames else wb.create_sheet(op.sheet)
                        )
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
            wb.save(str(p))
        return f"Applied {len(operations)} operation(s) to {vpath(world, p)}"

    def create_chart(
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
                raise ApexError(
                    "data_range must be a bounded range of several cells, e.g. 'A1:C10'"
                )
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
            wb.save(str(p))
        return (
            f"Added {chart_type} chart of {sheet}!{data_range} at {position} in {vpath(world, p)}"
        )

    return [
        create_spreadsheet,
        delete_spreadsheet,
        read_tab,
        read_csv,
        list_tabs_in_spreadsheet,
        add_tab,
        delete_tab,
        edit_spreadsheet,
        add_content_text,
        delete_content_cell,
        create_chart,
        filter_tab,
    ]


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

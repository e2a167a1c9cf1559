"""Spreadsheets (.xlsx via openpyxl, .csv via the csv module): list tabs, read a range
(values and formulas), edit cells, add a tab, create a workbook.

Formula cells show the value the spreadsheet app cached; when there is none (files
written by openpyxl, or edited here) the value is recomputed by `formulas.Evaluator`."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from apexrl.errors import ApexError
from apexrl.worlds.formulas import Evaluator
from apexrl.worlds.world import World

MAX_CELLS = 5000
_XLSX = (".xlsx", ".xlsm")


class CellEdit(BaseModel):
    cell: str  # A1 notation, e.g. "B7"
    value: str | float | int | bool | None = None  # a string starting with '=' is a formula


def _kind(path: str) -> str:
    low = path.lower()
    if low.endswith(_XLSX):
        return "xlsx"
    if low.endswith(".csv"):
        return "csv"
    raise ApexError(f"{path!r} is not a .xlsx or .csv file")


def _load(p: Path, *, data_only: bool = False):
    import openpyxl

    try:
        return openpyxl.load_workbook(str(p), data_only=data_only)
    except Exception as e:
        raise ApexError(f"cannot open {p.name} as a workbook: {e}") from e


def _sheet(wb, name: str | None):
    if name is None:
        return wb.worksheets[0]
    if name not in wb.sheetnames:
        raise ApexError(f"no tab {name!r}; tabs are {wb.sheetnames}")
    return wb[name]


def _read_csv(p: Path) -> list[list[str]]:
    with open(p, newline="", encoding="utf-8-sig", errors="replace") as f:
        return list(csv.reader(f))


def _write_csv(p: Path, rows: list[list[Any]]) -> None:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    p.write_text(buf.getvalue(), encoding="utf-8")


def _coerce(v: Any) -> Any:
    if isinstance(v, str) and not v.startswith("="):
        s = v.strip()
        try:
            return int(s) if s.lstrip("-").isdigit() else float(s)
        except ValueError:
            return v
    return v


def workbook_text(p: Path) -> str:
    wb = _load(p, data_only=False)
    cached = _load(p, data_only=True)
    ev = Evaluator(wb)
    out = []
    for ws in wb.worksheets:
        out.append(f"[tab {ws.title}] {ws.max_row} rows x {ws.max_column} columns")
        cws = cached[ws.title]
        for row in ws.iter_rows(max_row=min(ws.max_row, 500)):
            cells = []
            for c in row:
                if c.value is None:
                    cells.append("")
                elif isinstance(c.value, str) and c.value.startswith("="):
                    v = cws[c.coordinate].value
                    if v is None:
                        v = ev.value(ws.title, c.coordinate)
                    cells.append(f"{c.value} -> {v}")
                else:
                    cells.append(str(c.value))
            out.append(" | ".join(cells).rstrip(" |"))
    return "\n".join(out)


def tools(world: World) -> list:
    def list_tabs(path: str) -> list[dict[str, Any]]:
        """List the tabs (worksheets) of a .xlsx with their used size; a .csv has one tab."""
        p = world.fs_path(path, must_exist=True)
        if _kind(path) == "csv":
            rows = _read_csv(p)
            return [
                {
                    "tab": p.stem,
                    "rows": len(rows),
                    "columns": max((len(r) for r in rows), default=0),
                }
            ]
        wb = _load(p)
        return [
            {
                "tab": ws.title,
                "rows": ws.max_row,
                "columns": ws.max_column,
                "dimensions": ws.dimensions,
            }
            for ws in wb.worksheets
        ]

    def read_range(path: str, tab: str | None = None, range: str | None = None) -> dict[str, Any]:  # noqa: A002
        """Read cells of a .xlsx/.csv tab (default: the first tab, whole used range).
        `range` is A1 notation, e.g. 'A1:D20'. For each non-empty cell returns its value and,
        for formula cells, the formula and its value (recomputed when the file has none cached)."""
        from openpyxl.utils import range_boundaries
        from openpyxl.utils.cell import get_column_letter

        p = world.fs_path(path, must_exist=True)
        if _kind(path) == "csv":
            rows = _read_csv(p)
            ncols = max((len(r) for r in rows), default=0)
            min_col, min_row, max_col, max_row = (
                range_boundaries(range) if range else (1, 1, max(ncols, 1), max(len(rows), 1))
            )
            cells = []
            for r in range_(min_row, max_row):
                for c in range_(min_col, max_col):
                    if r - 1 < len(rows) and c - 1 < len(rows[r - 1]) and rows[r - 1][c - 1] != "":
                        cells.append(
                            {"cell": f"{get_column_letter(c)}{r}", "value": rows[r - 1][c - 1]}
                        )
            return {
                "tab": p.stem,
                "range": range or f"A1:{get_column_letter(max(ncols, 1))}{len(rows)}",
                "cells": cells[:MAX_CELLS],
            }
        wb = _load(p)
        cached = _load(p, data_only=True)
        ws = _sheet(wb, tab)
        cws = cached[ws.title]
        ev = Evaluator(wb)
        rng = range or ws.dimensions
        min_col, min_row, max_col, max_row = range_boundaries(rng)
        cells = []
        truncated = False
        for row in ws.iter_rows(min_row=min_row, max_row=max_row, min_col=min_col, max_col=max_col):
            for c in row:
                if c.value is None:
                    continue
                if len(cells) >= MAX_CELLS:
                    truncated = True
                    break
                entry: dict[str, Any] = {"cell": c.coordinate}
                if isinstance(c.value, str) and c.value.startswith("="):
                    entry["formula"] = c.value
                    v = cws[c.coordinate].value
                    if v is None:  # never computed by a spreadsheet app: compute it here
                        v = ev.value(ws.title, c.coordinate)
                    entry["value"] = _plain(v)
                else:
                    entry["value"] = _plain(c.value)
                cells.append(entry)
        out: dict[str, Any] = {"tab": ws.title, "range": rng, "cells": cells}
        if truncated:
            out["truncated"] = f"only the first {MAX_CELLS} cells; read a smaller range"
        return out

    def edit_cells(path: str, edits: list[CellEdit], tab: str | None = None) -> str:
        """Set cells of a .xlsx/.csv tab. Each edit is {cell: 'B7', value: ...}; a string
        value starting with '=' is stored as a formula; null clears the cell."""
        from openpyxl.utils.cell import column_index_from_string, coordinate_from_string

        p = world.fs_path(path, must_exist=True)
        with world.lock:
            if _kind(path) == "csv":
                rows = _read_csv(p)
                for e in edits:
                    col, row = coordinate_from_string(e.cell)
                    ci = column_index_from_string(col) - 1
                    while len(rows) < row:
                        rows.append([])
                    while len(rows[row - 1]) <= ci:
                        rows[row - 1].append("")
                    rows[row - 1][ci] = "" if e.value is None else str(e.value)
                _write_csv(p, rows)
                return f"set {len(edits)} cells in {world.rel(p)}"
            wb = _load(p)
            ws = _sheet(wb, tab)
            for e in edits:
                coordinate_from_string(e.cell)  # validates
                ws[e.cell] = _coerce(e.value)
            wb.save(str(p))
        return f"set {len(edits)} cells in {world.rel(p)} tab {ws.title!r}"

    def add_tab(
        path: str, tab: str, rows: list[list[str | float | int | bool | None]] | None = None
    ) -> str:
        """Add a tab (worksheet) named `tab` to a .xlsx, optionally filled with rows."""
        if _kind(path) != "xlsx":
            raise ApexError("a .csv has a single tab; create a .xlsx to have several")
        p = world.fs_path(path, must_exist=True)
        with world.lock:
            wb = _load(p)
            if tab in wb.sheetnames:
                raise ApexError(f"tab {tab!r} already exists")
            ws = wb.create_sheet(tab)
            for r in rows or []:
                ws.append([_coerce(v) for v in r])
            wb.save(str(p))
        return f"added tab {tab!r} to {world.rel(p)}"

    def create(
        path: str,
        rows: list[list[str | float | int | bool | None]] | None = None,
        tab: str = "Sheet1",
    ) -> str:
        """Create a new .xlsx (or .csv) at `path` with optional rows (first row = header).
        Refuses to overwrite an existing file."""
        import openpyxl

        kind = _kind(path)
        p = world.fs_path(path)
        if p.exists():
            raise ApexError(f"{path!r} already exists; edit it instead")
        with world.lock:
            p.parent.mkdir(parents=True, exist_ok=True)
            if kind == "csv":
                _write_csv(p, [["" if v is None else v for v in r] for r in rows or []])
            else:
                wb = openpyxl.Workbook()
                ws = wb.active
                ws.title = tab
                for r in rows or []:
                    ws.append([_coerce(v) for v in r])
                wb.save(str(p))
        return f"created {world.rel(p)} with {len(rows or [])} rows"

    return [list_tabs, read_range, edit_cells, add_tab, create]


def range_(a: int, b: int) -> range:
    return range(a, b + 1)


def _plain(v: Any) -> Any:
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return str(v)


def probe(world: World) -> str:
    import openpyxl  # noqa: F401

    n = sum(1 for _ in world.fs_root.rglob("*.xlsx")) if world.fs_root.is_dir() else 0
    return f"{n} .xlsx files"

"""Spreadsheets (.xlsx via openpyxl): loading a workbook, plain cell values, and the
readiness check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from apexrl.errors import ApexError
from apexrl.worlds.apps import count_files
from apexrl.worlds.world import World

_XLSX = (".xlsx", ".xlsm")


def _load(p: Path, *, data_only: bool = False):
    import openpyxl

    try:
        return openpyxl.load_workbook(str(p), data_only=data_only)
    except Exception as e:
        raise ApexError(f"cannot open {p.name} as a workbook: {e}") from e


def _coerce(v: Any) -> Any:
    if isinstance(v, str) and not v.startswith("="):
        s = v.strip()
        try:
            return int(s) if s.lstrip("-").isdigit() else float(s)
        except ValueError:
            return v
    return v


def probe(world: World) -> str:
    return count_files(world, "openpyxl", ".xlsx")

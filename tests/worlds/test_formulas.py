"""The formula evaluator behind `read_range` values for never-computed formulas."""

from __future__ import annotations

import openpyxl
import pytest

from apexrl.worlds.formulas import Evaluator


@pytest.fixture
def ev() -> Evaluator:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Data"
    for row in (["k", "v", "w"], ["a", 10, 2], ["b", 20, 3], ["a", 30, 4], ["c", None, "x"]):
        ws.append(row)
    other = wb.create_sheet("My Sheet")
    other["A1"] = 7
    other["A2"] = "=A1*2"
    ws["E1"] = "=E2+1"
    ws["E2"] = "=E1+1"
    return Evaluator(wb)


@pytest.mark.parametrize(
    ("formula", "expected"),
    [
        ("=SUM(B2:B5)", 60),
        ("=SUM(B2:B4)/COUNT(B2:B5)", 20),
        ("=AVERAGE(B2:B4)", 20),
        ("=B2*C2+B3^2-(B4/3)", 410),
        ("=-B2+5%*200", 0),
        ("=ROUND(B3/B4, 2)", 0.67),
        ('=IF(B2>B3, "big", "small")', "small"),
        ('=A2&"-"&B2', "a-10"),
        ('=SUMIF(A2:A5, "a", B2:B5)', 40),
        ('=COUNTIF(B2:B5, ">15")', 2),
        ("=SUMPRODUCT(B2:B4, C2:C4)", 200),
        ('=VLOOKUP("b", A2:C5, 3, FALSE)', 3),
        ("='My Sheet'!A2+1", 15),
        ("=MAX(B2:B5)-MIN(B2:B5)", 20),
        ("=IFERROR(B2/0, -1)", -1),
        ("=B2/0", "#DIV/0!"),
        ("=C5*2", "#VALUE!"),
        ("=NOSUCH(1)", "#NAME?"),
        ("=Missing!A1", "#REF!"),
        ("=AND(B2>1, NOT(B3<1))", True),
        ("=COUNTA(A1:C5)", 14),
    ],
)
def test_formulas(ev, formula, expected):
    assert ev.evaluate(formula, "Data") == expected


def test_cycles_do_not_hang(ev):
    assert ev.value("Data", "E1") in ("#CIRC!", "#VALUE!")

"""A small spreadsheet formula evaluator, so `read_range` can show values for formula
cells that no spreadsheet app has computed yet (openpyxl writes no cached values).

Covers arithmetic (+ - * / ^ %, unary minus), comparisons, '&', cell and range
references (A1, $A$1, Sheet!A1, 'My sheet'!A1:B9) and common functions. Anything
else evaluates to an Excel error string ('#NAME?' for an unknown function), never
an exception.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from typing import Any

from openpyxl.utils.cell import column_index_from_string, get_column_letter


class FormulaError(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


_TOKEN = re.compile(
    r"""\s*(?:
    (?P<str>"(?:[^"]|"")*")
  | (?P<ref>(?:(?:'(?:[^']|'')+'|[A-Za-z_][\w.]*)!)?
        \$?[A-Za-z]{1,3}\$?\d+(?::\$?[A-Za-z]{1,3}\$?\d+)?)
  | (?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
  | (?P<func>[A-Za-z_][\w.]*)\s*\(
  | (?P<bool>TRUE|FALSE)\b
  | (?P<op><>|<=|>=|[-+*/^&=<>%(),:])
    )""",
    re.VERBOSE | re.IGNORECASE,
)


def _tokens(src: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    src = src.strip()
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if not m or m.end() == pos:
            raise FormulaError("#NAME?")
        pos = m.end()
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
    return out


class _Range:
    def __init__(self, sheet: str, c1: int, r1: int, c2: int, r2: int) -> None:
        self.sheet, self.c1, self.r1, self.c2, self.r2 = sheet, c1, r1, c2, r2


def _flat(args: list[Any], ev: Evaluator) -> list[Any]:
    out: list[Any] = []
    for a in args:
        if isinstance(a, _Range):
            out.extend(ev.range_values(a))
        elif isinstance(a, list):
            out.extend(a)
        else:
            out.append(a)
    return out


def _nums(args: list[Any], ev: Evaluator) -> list[float]:
    out = []
    for a in args:
        if isinstance(a, _Range):
            out.extend(
                v
                for v in ev.range_values(a)
                if isinstance(v, int | float) and not isinstance(v, bool)
            )
        else:
            out.append(_num(a))
    return out


def _num(v: Any) -> float:
    if isinstance(v, str) and v.startswith("#"):
        raise FormulaError(v)
    if v is None or v == "":
        return 0
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int | float):
        return v
    try:
        return float(v)
    except (TypeError, ValueError):
        raise FormulaError("#VALUE!") from None


def _truthy(v: Any) -> bool:
    if isinstance(v, str):
        if v.upper() in ("TRUE", "FALSE"):
            return v.upper() == "TRUE"
        raise FormulaError("#VALUE!")
    return bool(_num(v))


def _criteria(crit: Any) -> Callable[[Any], bool]:
    if isinstance(crit, str):
        m = re.match(r"^(<=|>=|<>|<|>|=)?(.*)$", crit)
        op, rhs = (m.group(1) or "="), m.group(2)
        try:
            rv: Any = float(rhs)
        except ValueError:
            rv = rhs.lower()
    else:
        op, rv = "=", crit

    def test(v: Any) -> bool:
        lv = v.lower() if isinstance(v, str) else v
        if isinstance(rv, float) and not isinstance(lv, int | float):
            return op == "<>"
        if isinstance(rv, str) and not isinstance(lv, str):
            return op == "<>"
        return {
            "=": lv == rv,
            "<>": lv != rv,
            "<": lv < rv,
            ">": lv > rv,
            "<=": lv <= rv,
            ">=": lv >= rv,
        }[op]

    return test


def _round(x: float, n: float, mode: str) -> float:
    f = 10 ** int(n)
    if mode == "up":
        r = math.ceil(abs(x) * f) / f
    elif mode == "down":
        r = math.floor(abs(x) * f) / f
    else:
        r = math.floor(abs(x) * f + 0.5) / f
    return math.copysign(r, x)


class Evaluator:
    """Evaluates formulas of one workbook (openpyxl, formulas kept), memoising cells."""

    def __init__(self, wb: Any) -> None:
        self.wb = wb
        self.memo: dict[tuple[str, str], Any] = {}
        self.active: set[tuple[str, str]] = set()

    def value(self, sheet: str, coord: str) -> Any:
        key = (sheet, coord.upper())
        if key in self.memo:
            return self.memo[key]
        if key in self.active:
            return "#CIRC!"
        if sheet not in self.wb.sheetnames:
            return "#REF!"
        raw = self.wb[sheet][coord].value
        if isinstance(raw, str) and raw.startswith("="):
            self.active.add(key)
            try:
                v = self.evaluate(raw, sheet)
            finally:
                self.active.discard(key)
        else:
            v = raw
        self.memo[key] = v
        return v

    def range_values(self, r: _Range) -> list[Any]:
        out = []
        for row in range(r.r1, r.r2 + 1):
            for col in range(r.c1, r.c2 + 1):
                out.append(self.value(r.sheet, f"{get_column_letter(col)}{row}"))
        return out

    def evaluate(self, formula: str, sheet: str) -> Any:
        try:
            toks = _tokens(formula.lstrip("="))
            p = _Parser(toks, self, sheet)
            v = p.expr()
            if p.i != len(toks):
                raise FormulaError("#NAME?")
            if isinstance(v, _Range):
                vals = self.range_values(v)
                v = vals[0] if len(vals) == 1 else "#VALUE!"
            if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
                v = int(v)
            return v
        except FormulaError as e:
            return e.code
        except ZeroDivisionError:
            return "#DIV/0!"
        except (ValueError, TypeError, OverflowError, RecursionError):
            return "#VALUE!"


def _divide(x: float, y: float) -> float:
    if y == 0:
        raise FormulaError("#DIV/0!")
    return x / y


# Excel's arithmetic precedence, loosest first: + -, then * /, then ^.
_ARITH: tuple[dict[str, Callable[[Any, Any], Any]], ...] = (
    {"+": operator.add, "-": operator.sub},
    {"*": operator.mul, "/": _divide},
    {"^": operator.pow},
)


class _Parser:
    def __init__(self, toks: list[tuple[str, str]], ev: Evaluator, sheet: str) -> None:
        self.t, self.i, self.ev, self.sheet = toks, 0, ev, sheet

    def peek(self) -> tuple[str, str] | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self, op: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (op is not None and tok[1] != op):
            raise FormulaError("#NAME?")
        self.i += 1
        return tok

    def _is(self, *ops: str) -> bool:
        tok = self.peek()
        return tok is not None and tok[0] == "op" and tok[1] in ops

    def expr(self) -> Any:
        a = self.concat()
        while self._is("=", "<>", "<", ">", "<=", ">="):
            op = self.take()[1]
            b = self.concat()
            a, b = self.scalar(a), self.scalar(b)
            if isinstance(a, str) and isinstance(b, str):
                a, b = a.lower(), b.lower()
            elif isinstance(a, str) or isinstance(b, str):
                a, b = str(a), str(b)
            a = {"=": a == b, "<>": a != b, "<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]
        return a

    def concat(self) -> Any:
        a = self.arith()
        while self._is("&"):
            self.take()
            b = self.arith()
            a = _text(self.scalar(a)) + _text(self.scalar(b))
        return a

    def arith(self, level: int = 0) -> Any:
        """The arithmetic operators of _ARITH from `level` on, each level left-associative
        and binding tighter than the one before it."""
        if level == len(_ARITH):
            return self.unary()
        ops = _ARITH[level]
        a = self.arith(level + 1)
        while self._is(*ops):
            op = self.take()[1]
            b = self.arith(level + 1)
            a = ops[op](_num(self.scalar(a)), _num(self.scalar(b)))
        return a

    def unary(self) -> Any:
        if self._is("-"):
            self.take()
            return -_num(self.scalar(self.unary()))
        if self._is("+"):
            self.take()
            return self.unary()
        v = self.atom()
        while self._is("%"):
            self.take()
            v = _num(self.scalar(v)) / 100
        return v

    def scalar(self, v: Any) -> Any:
        if isinstance(v, _Range):
            vals = self.ev.range_values(v)
            if len(vals) != 1:
                raise FormulaError("#VALUE!")
            v = vals[0]
        if isinstance(v, str) and v.startswith("#") and v.endswith(("!", "?", "A")):
            raise FormulaError(v)
        return v

    def atom(self) -> Any:
        kind, text = self.take()
        if kind == "num":
            return float(text) if any(c in text for c in ".eE") else int(text)
        if kind == "str":
            return text[1:-1].replace('""', '"')
        if kind == "bool":
            return text.upper() == "TRUE"
        if kind == "ref":
            return self.ref(text)
        if kind == "func":
            args: list[Any] = []
            if not self._is(")"):
                args.append(self.arg())
                while self._is(","):
                    self.take()
                    args.append(self.arg())
            self.take(")")
            return self.call(text.upper(), args)
        if kind == "op" and text == "(":
            v = self.expr()
            self.take(")")
            return v
        raise FormulaError("#NAME?")

    def arg(self) -> Any:
        """One function argument; an error inside it becomes an error value (so IFERROR
        and untaken IF branches work) and parsing resumes at the next ',' or ')'."""
        start = self.i
        try:
            return self.expr()
        except (FormulaError, ZeroDivisionError) as e:
            code = e.code if isinstance(e, FormulaError) else "#DIV/0!"
            depth, i = 0, start
            while i < len(self.t):
                kind, text = self.t[i]
                if kind == "func" or (kind == "op" and text == "("):
                    depth += 1
                elif kind == "op" and text in (",", ")"):
                    if depth == 0:
                        break
                    if text == ")":
                        depth -= 1
                i += 1
            self.i = i
            return code

    def ref(self, text: str) -> Any:
        sheet = self.sheet
        if "!" in text:
            sname, text = text.rsplit("!", 1)
            sheet = sname[1:-1].replace("''", "'") if sname.startswith("'") else sname
        text = text.replace("$", "")
        a, _, b = text.partition(":")
        b = b or a
        ma = re.match(r"([A-Za-z]+)(\d+)", a)
        mb = re.match(r"([A-Za-z]+)(\d+)", b)
        if not ma or not mb:
            raise FormulaError("#REF!")
        c1, r1 = column_index_from_string(ma.group(1).upper()), int(ma.group(2))
        c2, r2 = column_index_from_string(mb.group(1).upper()), int(mb.group(2))
        if sheet not in self.ev.wb.sheetnames:
            raise FormulaError("#REF!")
        return _Range(sheet, min(c1, c2), min(r1, r2), max(c1, c2), max(r1, r2))

    def call(self, name: str, args: list[Any]) -> Any:
        ev = self.ev
        s = self.scalar
        if name == "SUM":
            return sum(_nums(args, ev))
        if name == "PRODUCT":
            return math.prod(_nums(args, ev))
        if name in ("AVERAGE", "MEDIAN"):
            ns = _nums(args, ev)
            if not ns:
                raise FormulaError("#DIV/0!")
            if name == "AVERAGE":
                return sum(ns) / len(ns)
            ns.sort()
            mid = len(ns) // 2
            return ns[mid] if len(ns) % 2 else (ns[mid - 1] + ns[mid]) / 2
        if name in ("MIN", "MAX"):
            ns = _nums(args, ev)
            return (min if name == "MIN" else max)(ns) if ns else 0
        if name == "COUNT":
            return sum(
                1 for v in _flat(args, ev) if isinstance(v, int | float) and not isinstance(v, bool)
            )
        if name == "COUNTA":
            return sum(1 for v in _flat(args, ev) if v not in (None, ""))
        if name in ("ROUND", "ROUNDUP", "ROUNDDOWN"):
            x = _num(s(args[0]))
            n = _num(s(args[1])) if len(args) > 1 else 0
            return _round(x, n, {"ROUND": "half", "ROUNDUP": "up", "ROUNDDOWN": "down"}[name])
        if name == "ABS":
            return abs(_num(s(args[0])))
        if name == "INT":
            return math.floor(_num(s(args[0])))
        if name == "MOD":
            d = _num(s(args[1]))
            if d == 0:
                raise FormulaError("#DIV/0!")
            return _num(s(args[0])) % d
        if name == "POWER":
            return _num(s(args[0])) ** _num(s(args[1]))
        if name == "SQRT":
            return math.sqrt(_num(s(args[0])))
        if name == "IF":
            cond = _truthy(s(args[0]))
            if cond:
                return s(args[1]) if len(args) > 1 else True
            return s(args[2]) if len(args) > 2 else False
        if name == "IFERROR":
            try:
                return s(args[0])
            except FormulaError:
                return s(args[1])
        if name == "AND":
            return all(_truthy(v) for v in _flat(args, ev) if v is not None)
        if name == "OR":
            return any(_truthy(v) for v in _flat(args, ev) if v is not None)
        if name == "NOT":
            return not _truthy(s(args[0]))
        if name in ("CONCAT", "CONCATENATE"):
            return "".join(_text(v) for v in _flat(args, ev))
        if name == "LEN":
            return len(_text(s(args[0])))
        if name == "UPPER":
            return _text(s(args[0])).upper()
        if name == "LOWER":
            return _text(s(args[0])).lower()
        if name in ("SUMIF", "COUNTIF", "AVERAGEIF"):
            rng = args[0]
            if not isinstance(rng, _Range):
                raise FormulaError("#VALUE!")
            test = _criteria(s(args[1]))
            keys = ev.range_values(rng)
            if name == "COUNTIF":
                return sum(1 for k in keys if test(k))
            vals = (
                ev.range_values(args[2]) if len(args) > 2 and isinstance(args[2], _Range) else keys
            )
            picked = [
                _num(v) for k, v in zip(keys, vals, strict=False) if test(k) and v is not None
            ]
            if name == "SUMIF":
                return sum(picked)
            if not picked:
                raise FormulaError("#DIV/0!")
            return sum(picked) / len(picked)
        if name == "SUMPRODUCT":
            cols = [ev.range_values(a) if isinstance(a, _Range) else [a] for a in args]
            if len({len(c) for c in cols}) != 1:
                raise FormulaError("#VALUE!")
            return sum(math.prod(_num(v) for v in vals) for vals in zip(*cols, strict=True))
        if name in ("VLOOKUP", "HLOOKUP"):
            return self._lookup(name, args)
        raise FormulaError("#NAME?")

    def _lookup(self, name: str, args: list[Any]) -> Any:
        key = self.scalar(args[0])
        table = args[1]
        if not isinstance(table, _Range):
            raise FormulaError("#VALUE!")
        idx = int(_num(self.scalar(args[2])))
        exact = len(args) > 3 and not _truthy(self.scalar(args[3]))
        lines = (
            range(table.r1, table.r2 + 1) if name == "VLOOKUP" else range(table.c1, table.c2 + 1)
        )
        best = None
        for line in lines:
            if name == "VLOOKUP":
                k = self.ev.value(table.sheet, f"{get_column_letter(table.c1)}{line}")
                target = f"{get_column_letter(table.c1 + idx - 1)}{line}"
            else:
                k = self.ev.value(table.sheet, f"{get_column_letter(line)}{table.r1}")
                target = f"{get_column_letter(line)}{table.r1 + idx - 1}"
            kl = k.lower() if isinstance(k, str) else k
            keyl = key.lower() if isinstance(key, str) else key
            if kl == keyl:
                return self.ev.value(table.sheet, target)
            if (
                not exact
                and isinstance(k, int | float)
                and isinstance(key, int | float)
                and k <= key
            ):
                best = target
        if best is not None:
            return self.ev.value(table.sheet, best)
        raise FormulaError("#N/A")


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)

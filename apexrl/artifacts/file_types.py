"""The `expected_file_type` labels of APEX rubric criteria -> (evaluation scope, file
suffixes), one table for the converter and validator (which refuse a label not in it,
naming the record) and the grader (which shows the judge the files of those types).

The labels are archipelago's grading-target spellings; the older ones its grader also
accepts (without the OpenDocument suffixes) filter the same way, and "any" / "Any File
Type" mean all output. A label outside the table is refused everywhere: widening it to
"all output" would let a criterion meant for one file type be met by any text the agent
wrote (a reward-hack vector), so it is never done silently.
"""

from __future__ import annotations

FileScope = tuple[str, tuple[str, ...]]  # (answer | files | both, suffixes; () = all)

FILE_TYPES: dict[str, FileScope] = {
    "Final Answer Only (No Files)": ("answer", ()),
    "All output (modified files and final message in console)": ("both", ()),
    "Any File Type": ("both", ()),
    "any": ("both", ()),
    "Word Documents (.docx, .doc, .odt)": ("files", (".docx", ".doc", ".odt")),
    "Text Files (.txt)": ("files", (".txt",)),
    "PDF Documents (.pdf)": ("files", (".pdf",)),
    "Spreadsheets (.xlsx, .xls, .xlsm, .ods)": ("files", (".xlsx", ".xls", ".xlsm", ".ods")),
    "Presentations (.pptx, .ppt, .odp)": ("files", (".pptx", ".ppt", ".odp")),
    "Python Files (.py)": ("files", (".py",)),
    "JavaScript/TypeScript (.js, .ts, .jsx, .tsx)": ("files", (".js", ".ts", ".jsx", ".tsx")),
    "Markdown (.md)": ("files", (".md",)),
    "JSON/YAML (.json, .yaml, .yml)": ("files", (".json", ".yaml", ".yml")),
    "Images (.png, .jpg, .jpeg, .webp)": ("files", (".png", ".jpg", ".jpeg", ".webp")),
    "Database Files (.db)": ("files", (".db",)),  # judged with tools (grading/db_judge.py)
    # older spellings (before the OpenDocument suffixes were added): the same filters
    "Word Documents (.docx, .doc)": ("files", (".docx", ".doc")),
    "Spreadsheets (.xlsx, .xls, .xlsm)": ("files", (".xlsx", ".xls", ".xlsm")),
    "Presentations (.pptx, .ppt)": ("files", (".pptx", ".ppt")),
}
_LOWER = {k.lower(): v for k, v in FILE_TYPES.items()}
# the older spellings as archipelago's grader at the pinned commit spells them (it widens
# the older ones to all output; handing it these keeps its filter)
CURRENT_SPELLING = {
    "Word Documents (.docx, .doc)": "Word Documents (.docx, .doc, .odt)",
    "Spreadsheets (.xlsx, .xls, .xlsm)": "Spreadsheets (.xlsx, .xls, .xlsm, .ods)",
    "Presentations (.pptx, .ppt)": "Presentations (.pptx, .ppt, .odp)",
}


class UnknownFileType(ValueError):
    """A criterion names an expected_file_type the table does not hold."""


def criterion_label(criterion: dict) -> str | None:
    """The criterion's expected_file_type: flat (apexrl's) or in verifier_values
    (archipelago's); None when it names none."""
    kind = criterion.get("expected_file_type")
    values = criterion.get("verifier_values")
    if not kind and isinstance(values, dict):
        kind = values.get("expected_file_type")
    return str(kind) if kind not in (None, "") else None


def file_scope(label: str, *, lenient: bool = False) -> FileScope:
    """(scope, suffixes) of a label (`lenient`: whatever its case and outer spaces);
    UnknownFileType for any other."""
    found = _LOWER.get(label.strip().lower()) if lenient else FILE_TYPES.get(label)
    if found is None:
        raise UnknownFileType(
            f"unknown expected_file_type {label!r} (it would widen the criterion to all "
            "output): use one of " + "; ".join(repr(k) for k in FILE_TYPES)
        )
    return found


def label_problem(criterion: dict) -> str | None:
    """Why a criterion's expected_file_type is refused (None: none named, or known)."""
    label = criterion_label(criterion)
    if label is None:
        return None
    try:
        file_scope(label)
    except UnknownFileType as e:
        return str(e)
    return None

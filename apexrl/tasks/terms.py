"""The licence and terms of use that travel with task data.

`tasks convert` reads them from the source's dataset card (README.md: the YAML front
matter's `license`, and sentences of the card that restrict the data to evaluation) or
takes them from flags, and records them in each task's [metadata]; `tasks pack` carries
them into _dataset.json; `apexrl train` refuses data marked evaluation-only unless the
user states their right to train on it (`--training-rights TEXT`, recorded in the run's
manifest). Known evaluation-only sources (APEX-Agents) are marked so by default.
"""

from __future__ import annotations

import re
from pathlib import Path

from apexrl.artifacts.models import DataTerms
from apexrl.errors import UsageError

CARD = "README.md"
RIGHTS_FLAG = "--training-rights"

# Sources whose published terms allow evaluation only: (pattern over the card's title /
# dataset id or the source path, name, terms in apexrl's words).
KNOWN_EVAL_ONLY = [
    (
        re.compile(r"apex[-_ ]?agents", re.I),
        "APEX-Agents (mercor/apex-agents, mercor/apex-agents-v1.1)",
        "the dataset card allows use for model evaluation only: training, fine-tuning or "
        "otherwise fitting model parameters on it is not permitted",
    ),
]
# Card sentences that restrict use to evaluation / forbid training on the data.
_EVAL_ONLY = re.compile(
    r"(evaluation[- ]only|only (?:be used )?for (?:model )?evaluation|"
    r"(?:must|may|should) not be used (?:for|to) (?:train|fine-tun)|"
    r"not (?:be )?used for (?:model )?training|"
    r"(?:no|prohibit\w*|forbid\w*|not permitted)[^.\n]{0,60}(?:training|fine-tuning))",
    re.I,
)
_SENTENCE = re.compile(r"[^.\n]*(?:\.|$)")


def _front_matter(text: str) -> tuple[dict, str]:
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end < 0:
        return {}, text
    import yaml

    try:
        meta = yaml.safe_load(text[3:end]) or {}
    except yaml.YAMLError:
        meta = {}
    return (meta if isinstance(meta, dict) else {}), text[end + 4 :]


def card_terms(src: Path) -> DataTerms | None:
    """Terms read from the source's dataset card, and recognised sources; None: neither."""
    card = Path(src) / CARD
    text = card.read_text("utf-8", "replace") if card.is_file() else ""
    meta, body = _front_matter(text)
    license = meta.get("license") or meta.get("license_name")
    if isinstance(license, list):
        license = ", ".join(str(x) for x in license)
    sentences = [
        m.group(0).strip() for m in _SENTENCE.finditer(body) if _EVAL_ONLY.search(m.group(0))
    ]
    named = " ".join(str(meta.get(k) or "") for k in ("pretty_name", "dataset_id", "title"))
    heading = next((x for x in body.splitlines() if x.startswith("# ")), "")
    # the card's title, the folder's own name, or a Hub cache folder (datasets--ORG--NAME)
    where = Path(src).resolve()
    cache = " ".join(p for p in where.parts if p.startswith("datasets--"))
    for pattern, name, terms in KNOWN_EVAL_ONLY:
        if pattern.search(f"{named} {heading} {where.name} {cache}"):
            return DataTerms(
                license=str(license) if license else None,
                terms=f"{name}: {terms}",
                evaluation_only=True,
                origin=f"recognised source: {name}",
            )
    if not license and not sentences:
        return None
    return DataTerms(
        license=str(license) if license else None,
        terms=" ".join(sentences)[:1000] or None,
        evaluation_only=bool(sentences),
        origin=f"dataset card {CARD}",
    )


def with_flags(
    found: DataTerms | None, *, license: str | None, terms: str | None, evaluation_only: bool
) -> DataTerms | None:
    """Flags over what the card said: a flag sets a field; evaluation-only is never unset
    here (the data's terms say so; `train` takes the user's statement instead)."""
    if found is None and not (license or terms or evaluation_only):
        return None
    base = found or DataTerms(origin="flags")
    return DataTerms(
        license=license or base.license,
        terms=terms or base.terms,
        evaluation_only=base.evaluation_only or evaluation_only,
        origin=base.origin if not (license or terms or evaluation_only) else
        f"{base.origin}; flags" if found else "flags",
    )  # fmt: skip


def merge(all_terms: list[DataTerms | None]) -> DataTerms | None:
    """The terms of a set of tasks: every licence and terms text, evaluation-only if any is."""
    found = [t for t in all_terms if t is not None]
    if not found:
        return None

    def joined(values) -> str | None:
        out = list(dict.fromkeys(v for v in values if v))
        return "; ".join(out) if out else None

    return DataTerms(
        license=joined(t.license for t in found),
        terms=joined(t.terms for t in found),
        evaluation_only=any(t.evaluation_only for t in found),
        origin=joined(t.origin for t in found),
    )


def source_terms(source: str) -> DataTerms | None:
    """The terms recorded in a dataset `train` reads: task dirs (each task's metadata), a
    packed dataset (_dataset.json), or a remote source recognised by its name."""
    import json

    from apexrl.tasks.dataset import MANIFEST
    from apexrl.tasks.meta import find_task_meta
    from apexrl.tasks.pack import find_task_dirs

    text = str(source)
    if "://" in text:
        for pattern, name, terms in KNOWN_EVAL_ONLY:
            if pattern.search(text):
                return DataTerms(terms=f"{name}: {terms}", evaluation_only=True,
                                 origin=f"recognised source: {name}")  # fmt: skip
        return None
    path = Path(text).expanduser()
    folder = path if path.is_dir() else path.parent
    # a dataset card or a recognised name at the dataset's root (Harbor tasks downloaded as
    # published, e.g. APEX-Agents v1.1, carry no apexrl metadata)
    found: list[DataTerms | None] = [card_terms(folder)] if folder.is_dir() else []
    manifest = folder / MANIFEST
    if manifest.is_file():
        raw = json.loads(manifest.read_text("utf-8")).get("data_terms")
        found.append(DataTerms.model_validate(raw) if raw else None)
    elif path.is_dir():
        metas = [find_task_meta(d, require_world=False) for d in find_task_dirs(path)]
        found += [m.data_terms if m else None for m in metas]
    return merge(found)


def check_training_rights(sources: list[str | None], statement: str | None) -> list[dict]:
    """UsageError (exit 2) naming the terms when a dataset is evaluation-only and no
    statement of the right to train on it was given; the terms met, to record."""
    found = []
    for src in sources:
        if not src:
            continue
        terms = source_terms(src)
        if terms is None:
            continue
        found.append({"dataset": str(src), **terms.model_dump(mode="json")})
        if terms.evaluation_only and not (statement and statement.strip()):
            raise UsageError(
                f"{src} is marked evaluation-only: {terms.terms or 'its terms forbid training'}"
                f" (licence {terms.license or 'unstated'}; {terms.origin})",
                hint=f"train on data whose terms allow it; if you hold the right to train on "
                f"this data (e.g. a separate licence), say so with {RIGHTS_FLAG} "
                '"<your statement>" (recorded in the run manifest)',
            )
    return found

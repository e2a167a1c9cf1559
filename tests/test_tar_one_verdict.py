"""Issue 29, finding 4: one dataset row, one verdict. A row crafted to read as two
different task trees (one for the C extractor, one for the Python parser) is refused by
every reader of a task binary: unpack (C and APEXRL_NATIVE_TAR=0), validate, ls, split,
the publish secret scan and the judge-needs check."""

from __future__ import annotations

import json

import pytest

from apexrl.artifacts import archive_extract, archive_write
from apexrl.artifacts.models import DatasetRow
from apexrl.cli.app import app
from apexrl.errors import BadRecordError
from apexrl.tasks.dataset import PackedTask, write_dataset
from tests.tar_craft import END, GNU, header, member, pad, pax, task_tar, two_tree_row
from tests.test_tasks_recipe_format import recipe_task

TOKEN = "hf_" + "Q" * 34  # a Hub token shape, planted in the tree the scan must not miss


@pytest.fixture
def crafted(tmp_path):
    """A dataset of two rows: a plain task, and the two-tree row (its C tree holds a
    planted token and the real task; its Python tree a clean decoy task)."""
    real = recipe_task(tmp_path / "real", "acme-corp", 1)
    (real / "instruction.md").write_text(f"Use the key {TOKEN} to fetch the data.\n")
    decoy = recipe_task(tmp_path / "decoy", "decoy-corp", 2)
    slug = real.name
    raw = two_tree_row(task_tar(real, slug), task_tar(decoy, slug), f"{slug}/notes".encode())
    other = recipe_task(tmp_path / "other", "beta-corp", 3)
    plain = archive_write.gzip_bytes(task_tar(other, other.name) + END)
    rows = [
        PackedTask(DatasetRow(path=slug), archive_write.gzip_bytes(raw)),
        PackedTask(DatasetRow(path=other.name), plain),
    ]
    write_dataset(rows, tmp_path / "ds")
    ids = {
        name: json.loads((d / "archipelago.json").read_text())["task_id"]
        for name, d in (("real", real), ("decoy", decoy))
    }
    return tmp_path / "ds", slug, other.name, ids


@pytest.mark.parametrize("native", ["1", "0"])
def test_unpack_refuses_the_two_tree_row_with_or_without_c(
    runner, tmp_path, monkeypatch, crafted, native
):
    ds, slug, other, _ = crafted
    monkeypatch.setenv("APEXRL_NATIVE_TAR", native)
    out = tmp_path / f"out{native}"
    res = runner.invoke(app, ["tasks", "unpack", str(ds), "-o", str(out)])
    assert res.exit_code == 5, res.output  # the plain row written, the crafted one refused
    assert "#0: refused" in res.output and "tar readers disagree" in res.output
    assert not (out / slug).exists()
    assert (out / other / "task.toml").is_file()


def test_validate_ls_split_refuse_or_see_no_task(runner, tmp_path, crafted):
    ds, slug, _other, ids = crafted
    res = runner.invoke(app, ["tasks", "validate", str(ds)])
    assert res.exit_code == 1 and "#0" in res.output, res.output
    assert "refused" in res.output and "tar readers disagree" in res.output
    res = runner.invoke(app, ["tasks", "ls", str(ds), "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["path"]: r for r in map(json.loads, res.stdout.splitlines())}
    assert rows[slug]["task_id"] is None  # neither tree: the binary is unreadable
    assert ids["decoy"] not in res.stdout and ids["real"] not in res.stdout
    res = runner.invoke(app, ["tasks", "split", str(ds), "-o", str(tmp_path / "split")])
    assert ids["decoy"] not in res.output


def test_publish_scan_and_judge_needs_refuse_the_row(runner, tmp_path, crafted):
    from apexrl.grading.requirements import dataset_judge_needs

    ds, slug, _other, _ids = crafted
    res = runner.invoke(
        app,
        ["publish", "dataset", str(ds), "--repo", "acme/d", "--dry-run", "--strict"],
    )
    assert res.exit_code == 1, res.output  # not a clean plan that carries the token
    assert f"({slug}): refused" in res.output and "tar readers disagree" in res.output
    with pytest.raises(BadRecordError, match="tar readers disagree"):
        dataset_judge_needs(str(ds))


def _variants(real: bytes, decoy: bytes) -> dict[str, bytes]:
    """The issue's row and its relatives: each reads as one tree to one reader and as
    another to a second (tarfile, GNU tar, or apexrl's own parsers before the fix)."""
    inner = decoy + END
    return {
        "issue": two_tree_row(real, decoy, b"t/notes"),
        # no GNU magic or prefix: the folder-with-data alone (tarfile reads the decoy)
        "ustar-folder-data": header(b"t/notes/", len(inner), b"\0") + pad(inner) + real + END,
        "typeflag-5-data": member(b"t/notes", inner, b"5") + real + END,
        "pax-size-on-folder": pax([("size", b"%d" % len(inner))])
        + header(b"t/notes", 0, b"5")
        + pad(inner)
        + real
        + END,
        "link-data": member(b"t/l", inner, b"2", linkname=b"x") + real + END,
        # typeflag NUL: a file by its header name, a folder by its PAX path (or back)
        "pax-path-slash": pax([("path", b"t/notes/")]) + member(b"t/x", b"", b"\0") + real + END,
        "pax-path-no-slash": pax([("path", b"t/notes")]) + member(b"t/x/", b"", b"\0") + real + END,
        # GNU magic, a prefix: tarfile joins it to the name, GNU tar reads times there
        "gnu-prefix": member(b"instruction.md", b"other", magic=GNU, prefix=b"t") + real + END,
        # a header tarfile cannot read mid-archive: it stops there, others go on
        "bad-header-mid": real
        + header(b"t/x", 0, chksum=b"0000000\0")
        + member(b"t/instruction.md", b"late")
        + END,
    }


def test_every_reader_refuses_each_two_tree_variant(tmp_path):
    """Each variant straight to the parsers: C declines with nothing written, the lean
    parser and tarfile's fallback refuse, naming the disagreement."""
    from apexrl.artifacts import _fasttar

    real = task_tar_files({"t/instruction.md": b"REAL", "t/task.toml": b"[metadata]\n"})
    decoy = task_tar_files({"t/instruction.md": b"DECOY"})
    for name, raw in _variants(real, decoy).items():
        assert _fasttar.members(raw, "t") is None, name
        dest = tmp_path / name
        dest.mkdir()
        lim = archive_extract.native_limits(archive_extract.Limits())
        assert _fasttar.extract(raw, str(dest), "t", lim, 0) is None, name
        assert list(dest.iterdir()) == [], name
        with pytest.raises(BadRecordError, match="tar readers disagree"):
            archive_extract.tar_members(raw, name)
        with pytest.raises(BadRecordError, match="tar readers disagree"):
            archive_extract.extract_tar(raw, tmp_path / f"{name}.py", where=name, strip="t")


def task_tar_files(files: dict[str, bytes]) -> bytes:
    return archive_write.tar_bytes([archive_write.bytes_entry(n, d) for n, d in files.items()])[
        :-1024
    ]

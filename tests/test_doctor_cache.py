"""`apexrl doctor` reuses the import checks that passed while the environment is unchanged
(issue 32.13: it took 5-9 s importing torch & co. on every run), re-imports after an
install, never caches a failure, and `--no-cache` imports everything again."""

from __future__ import annotations

import json
import os
import time

import pytest

from apexrl import doctor
from apexrl.cli.app import app


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """Real import checks in child interpreters, counted; a cache under tmp_path."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    calls: list[tuple[str, ...]] = []
    real = doctor.import_check

    def import_check(modules, timeout_s=doctor.IMPORT_TIMEOUT_S):
        calls.append(modules)
        return real(modules, timeout_s)

    monkeypatch.setattr(doctor, "import_check", import_check)
    monkeypatch.setattr(doctor, "EXTRAS", {"json": ("json",), "gone": ("no_such_module_x",)})
    return calls, site


def _extras(rows):
    return {r["name"]: (r["ok"], r["detail"]) for r in rows if r["section"] == "extra"}


def test_second_doctor_imports_nothing_that_passed(counted):
    calls, _ = counted
    first = _extras(doctor.collect_checks())
    assert first["json"] == (True, "importable")
    assert first["gone"][0] is False
    assert calls == [("json",), ("no_such_module_x",)]
    calls.clear()
    again = _extras(doctor.collect_checks())
    assert again == first
    assert calls == [("no_such_module_x",)]  # the failure is checked again, the pass is not


def test_an_install_invalidates_the_cache(counted):
    calls, site = counted
    doctor.collect_checks()
    calls.clear()
    time.sleep(0.01)
    (site / "newpkg-1.0.dist-info").mkdir()  # what pip does to a folder on the path
    os.utime(site, None)
    doctor.collect_checks()
    assert ("json",) in calls


def test_no_cache_imports_again_and_cache_is_plain_json(counted, tmp_path):
    from typer.testing import CliRunner

    calls, _ = counted
    doctor.collect_checks()
    cached = json.loads((tmp_path / "cache" / "apexrl" / "doctor-imports.json").read_text())
    assert cached["passed"] == ["json"] and len(cached["key"]) == 64
    calls.clear()
    res = CliRunner().invoke(app, ["doctor", "--json", "--no-cache"])
    assert res.exit_code == 0, res.output
    assert ("json",) in calls


def test_a_corrupt_cache_file_is_ignored(counted, tmp_path):
    calls, _ = counted
    path = tmp_path / "cache" / "apexrl" / "doctor-imports.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert _extras(doctor.collect_checks())["json"] == (True, "importable")
    assert ("json",) in calls
    assert json.loads(path.read_text())["passed"] == ["json"]

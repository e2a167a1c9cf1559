"""`apexrl doctor` checks an extra by importing what apexrl imports, not by package presence."""

from __future__ import annotations

from apexrl.doctor import EXTRAS, import_check


def test_an_installed_package_that_cannot_import_is_reported(tmp_path, monkeypatch):
    pkg = tmp_path / "halfinstalled"
    (pkg / "train").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "train" / "__init__.py").write_text("import omegaconf_missing_dep\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))  # find_spec here sees the top package
    ok, detail = import_check(("halfinstalled.train",))
    assert not ok
    assert detail == (
        "import halfinstalled.train: ModuleNotFoundError: No module named 'omegaconf_missing_dep'"
    )
    assert import_check(("json", "email.message")) == (True, "importable")
    assert import_check(("no_such_pkg_xyz.sub",)) == (
        False,
        "not installed (no module 'no_such_pkg_xyz')",
    )


def test_the_train_extra_names_what_dry_run_and_the_entrypoint_import():
    mods = EXTRAS["train"]
    assert "skyrl.train.utils.utils" in mods  # validate_cfg
    assert "skyrl.train.entrypoints.main_base" in mods and "ray.job_submission" in mods

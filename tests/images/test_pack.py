"""`world pack`: reproducible OCI archives that independent tools (skopeo, umoci) accept."""

from __future__ import annotations

import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from apexrl.images import oci
from tests.images.conftest import apexrl, make_world, records, run, zip_dir

pytestmark = pytest.mark.integration  # a real registry, skopeo/umoci or podman


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    from apexrl.tasks.example import write_example

    out = tmp_path_factory.mktemp("example") / "ds"
    write_example(out, seed=0)
    return out


@pytest.fixture(autouse=True)
def _frozen_runtime(runtime_pkg, monkeypatch):
    monkeypatch.setitem(_RUNTIME, "pkg", str(runtime_pkg))


_RUNTIME: dict[str, str] = {}


def _pack(*args: str, env: dict | None = None) -> list[dict]:
    p = apexrl("world", "pack", *args, "--runtime", _RUNTIME["pkg"], env=env)
    assert p.returncode == 0, p.stderr
    return records(p.stdout)


def test_example_worlds_pack_byte_identical_and_skopeo_accepts(example, tmp_path):
    a = _pack(str(example), "-o", str(tmp_path / "a"))
    b = _pack(str(example), "-o", str(tmp_path / "b"))
    worlds = json.loads((example / "world_descriptions.json").read_text())
    assert sorted(r["world_id"] for r in a) == sorted(w["world_id"] for w in worlds)
    for ra, rb in zip(a, b, strict=True):
        assert ra["digest"] == rb["digest"]
        assert Path(ra["archive"]).read_bytes() == Path(rb["archive"]).read_bytes()
        assert Path(ra["archive"]).stat().st_size == ra["size_bytes"]
        info = json.loads(run(["skopeo", "inspect", f"oci-archive:{ra['archive']}"]).stdout)
        assert info["Digest"] == ra["digest"]
        assert info["Os"] == "linux" and info["Architecture"] == "amd64"
        assert info["Labels"]["io.apexrl.world.id"] == ra["world_id"]
    # the runtime layer is shared (byte-identical) across worlds; world layers differ
    layers = [oci.open_image(Path(r["archive"])).manifest["layers"] for r in a]
    assert len({ls[0]["digest"] for ls in layers}) == 1
    assert len({ls[-1]["digest"] for ls in layers}) == len(a)


def test_config_entrypoint_port_healthcheck_and_world_metadata(example, tmp_path):
    (rec,) = _pack(
        str(
            example
            / "world_files_zipped"
            / sorted((example / "world_files_zipped").iterdir())[0].name
        ),
        "-o",
        str(tmp_path),
        "--port",
        "9090",
    )
    src = oci.open_image(Path(rec["archive"]))
    cfg = src.config()
    c = cfg["config"]
    assert c["Entrypoint"] == ["/usr/local/bin/apexrl-world-entrypoint"]
    assert c["ExposedPorts"] == {"9090/tcp": {}}
    assert c["Healthcheck"]["Test"][:2] == ["CMD", "/usr/local/bin/apexrl-world-entrypoint"]
    env = dict(e.split("=", 1) for e in c["Env"])
    assert env["APEXRL_PORT"] == "9090" and env["APEXRL_WORLD"] == "/world"
    assert env["APEXRL_WORLD_ID"] == rec["world_id"]
    assert cfg["created"] == "2000-01-01T00:00:00Z"
    assert len(cfg["rootfs"]["diff_ids"]) == len(src.manifest["layers"])
    assert src.world_id == rec["world_id"]


def test_folder_and_zip_of_the_same_world_give_the_same_image(tmp_path):
    w = make_world(tmp_path / "src" / "acme")
    z = tmp_path / "zips"
    z.mkdir()
    zip_dir(w, z / "acme.zip", prefix="acme/")  # zipped with an enclosing folder
    (r1,) = _pack(str(w), "-o", str(tmp_path / "o1"))
    (r2,) = _pack(str(z / "acme.zip"), "-o", str(tmp_path / "o2"))
    assert r1["world_id"] == r2["world_id"] == "acme"
    assert r1["digest"] == r2["digest"]
    # entries: sorted, 0:0, fixed mtime, normalised modes
    src = oci.open_image(Path(r1["archive"]))
    layer = src.manifest["layers"][-1]["digest"]
    with src._open(layer) as fh, tarfile.open(fileobj=fh, mode="r|gz") as tar:
        members = list(tar)
    names = [m.name.rstrip("/") for m in members]
    assert names == sorted(names)
    assert {(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in members} == {
        (0, 0, "", "", 946684800)
    }
    assert "world/filesystem/budget.csv" in names and "world/.apps_data/mail/inbox.mbox" in names


def test_base_from_umoci_layout_and_unpack(base_layout, world, tmp_path):
    (rec,) = _pack(str(world), "-o", str(tmp_path / "out"), "--base", f"oci:{base_layout}:base")
    src = oci.open_image(Path(rec["archive"]))
    base = oci.open_image(base_layout, "base")
    n_base = len(base.manifest["layers"])
    assert [x["digest"] for x in src.manifest["layers"][:n_base]] == [
        x["digest"] for x in base.manifest["layers"]
    ]
    env = dict(e.split("=", 1) for e in src.config()["config"]["Env"])
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"  # base config kept
    # umoci (independent) unpacks it
    layout = tmp_path / "layout"
    run(["skopeo", "copy", f"oci-archive:{rec['archive']}", f"oci:{layout}:img"])
    bundle = tmp_path / "bundle"
    run(["umoci", "unpack", "--rootless", "--image", f"{layout}:img", str(bundle)])
    rootfs = bundle / "rootfs"
    assert (rootfs / "etc" / "os-release").read_text().startswith("ID=apexrl-test-base")
    assert (rootfs / "world" / "filesystem" / "budget.csv").is_file()
    assert (rootfs / "world" / "world.json").is_file()
    assert (rootfs / "opt" / "apexrl" / "apexrl" / "__main__.py").is_file()
    ep = rootfs / "usr" / "local" / "bin" / "apexrl-world-entrypoint"
    assert ep.stat().st_mode & 0o111
    spec = json.loads((bundle / "config.json").read_text())
    assert spec["process"]["args"] == ["/usr/local/bin/apexrl-world-entrypoint"]
    assert spec["process"]["cwd"] == "/world"


def test_base_pulled_from_registry_gives_the_same_image(base_layout, world, registry, tmp_path):
    run(
        [
            "skopeo",
            "copy",
            "--dest-tls-verify=false",
            f"oci:{base_layout}:base",
            f"docker://{registry.host}/base:1",
        ]
    )
    (local,) = _pack(str(world), "-o", str(tmp_path / "a"), "--base", f"oci:{base_layout}:base")
    (pulled,) = _pack(
        str(world),
        "-o",
        str(tmp_path / "b"),
        "--base",
        f"{registry.host}/base:1",
        env={"APEXRL_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert pulled["digest"] == local["digest"]
    assert Path(pulled["archive"]).read_bytes() == Path(local["archive"]).read_bytes()


@pytest.mark.parametrize(
    "name, what",
    [
        ("../evil.txt", "escapes"),
        ("filesystem/../../evil.txt", "escapes"),
        ("/etc/evil", "absolute"),
    ],
)
def test_zip_with_path_traversal_is_refused(tmp_path, name, what):
    z = tmp_path / "bad.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("filesystem/ok.txt", "ok")
        zf.writestr(name, "pwned")
    p = apexrl("world", "pack", str(z), "-o", str(tmp_path / "out"))
    assert p.returncode == 1
    assert what in p.stderr and "refusing" in p.stderr
    assert not list((tmp_path / "out").glob("*.tar")) if (tmp_path / "out").exists() else True


def test_zip_symlink_and_folder_symlink_out_are_refused(tmp_path):
    z = tmp_path / "link.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zi = zipfile.ZipInfo("filesystem/passwd")
        zi.external_attr = 0o120777 << 16
        zf.writestr(zi, "/etc/passwd")
    p = apexrl("world", "pack", str(z), "-o", str(tmp_path / "out"))
    assert p.returncode == 1 and "symlink" in p.stderr
    w = make_world(tmp_path / "w")
    (w / "filesystem" / "escape").symlink_to("/etc/passwd")
    p = apexrl("world", "pack", str(w), "-o", str(tmp_path / "out2"))
    assert p.returncode == 1 and "outside the world" in p.stderr


def test_bad_inputs_name_the_problem(tmp_path):
    (tmp_path / "empty").mkdir()
    p = apexrl("world", "pack", str(tmp_path / "empty"), "-o", str(tmp_path / "o"))
    assert p.returncode == 2 and "not a world folder" in p.stderr
    p = apexrl("world", "pack", str(tmp_path / "missing"), "-o", str(tmp_path / "o"))
    assert p.returncode == 2
    p = apexrl(
        "world", "pack", str(tmp_path / "empty"), "-o", str(tmp_path / "o"), "--base", "./nope"
    )
    assert p.returncode == 2


def test_deps_layer_is_shared_and_on_pythonpath(world, tmp_path):
    deps = tmp_path / "deps"
    (deps / "fakepkg").mkdir(parents=True)
    (deps / "fakepkg" / "__init__.py").write_text("VALUE = 1\n")
    (deps / "fakepkg" / "__pycache__").mkdir()
    (deps / "fakepkg" / "__pycache__" / "x.pyc").write_bytes(b"junk")
    w2 = make_world(tmp_path / "other", n_files=1)
    recs = _pack(str(world), str(w2), "-o", str(tmp_path / "o"), "--deps", str(deps))
    srcs = [oci.open_image(Path(r["archive"])) for r in recs]
    assert srcs[0].manifest["layers"][:2] == srcs[1].manifest["layers"][:2]  # runtime + deps
    env = dict(e.split("=", 1) for e in srcs[0].config()["config"]["Env"])
    assert env["PYTHONPATH"] == "/opt/apexrl:/opt/apexrl/deps"
    with (
        srcs[0]._open(srcs[0].manifest["layers"][1]["digest"]) as fh,
        tarfile.open(fileobj=fh, mode="r|gz") as tar,
    ):
        names = [m.name.rstrip("/") for m in tar]
    assert "opt/apexrl/deps/fakepkg/__init__.py" in names
    assert not any("__pycache__" in n for n in names)


def test_dataset_with_one_bad_world_packs_the_rest_and_exits_5(example, tmp_path):
    import shutil

    ds = tmp_path / "ds"
    shutil.copytree(example, ds)
    zips = sorted((ds / "world_files_zipped").iterdir())
    with zipfile.ZipFile(zips[0], "a") as zf:
        zf.writestr("../../escape.txt", "x")
    p = apexrl("world", "pack", str(ds), "-o", str(tmp_path / "o"), "--runtime", _RUNTIME["pkg"])
    assert p.returncode == 5, p.stderr
    assert zips[0].stem in p.stderr and "escapes" in p.stderr
    assert sorted(r["world_id"] for r in records(p.stdout)) == sorted(z.stem for z in zips[1:])

"""`image push` against a real registry (docker-registry) and the ECR path (moto + registry)."""

from __future__ import annotations

import base64
import contextlib
import json
from pathlib import Path

import pytest

from apexrl.images import oci
from apexrl.images.refs import parse_reference
from apexrl.images.registry_client import RegistryClient, push_image
from tests.images.conftest import ECR_HOST, apexrl, make_world, records, run

pytestmark = pytest.mark.integration  # a real registry, skopeo/umoci or podman


@pytest.fixture(scope="module")
def archives(tmp_path_factory, runtime_pkg) -> list[Path]:
    root = tmp_path_factory.mktemp("worlds")
    srcs = [make_world(root / f"w{i}", n_files=i + 1, seed=i) for i in range(2)]
    out = root / "out"
    p = apexrl("world", "pack", *map(str, srcs), "-o", str(out), "--runtime", str(runtime_pkg))
    assert p.returncode == 0, p.stderr
    return [Path(r["archive"]) for r in records(p.stdout)]


def test_push_then_skopeo_inspect_and_pull_back(archives, registry, tmp_path):
    p = apexrl("image", "push", *map(str, archives), "--to", f"{registry.host}/worlds", "-n", "3")
    assert p.returncode == 0, p.stderr
    recs = records(p.stdout)
    assert [r["world_id"] for r in recs] == ["w0", "w1"]
    for rec, arc in zip(recs, archives, strict=True):
        assert rec["ref"] == f"{registry.host}/worlds:{rec['world_id']}"
        assert rec["digest"] == oci.open_image(arc).manifest_digest
        info = json.loads(
            run(["skopeo", "inspect", "--tls-verify=false", f"docker://{rec['ref']}"]).stdout
        )
        assert info["Digest"] == rec["digest"]
        back = tmp_path / f"{rec['world_id']}.tar"
        run(
            [
                "skopeo",
                "copy",
                "--src-tls-verify=false",
                f"docker://{rec['ref']}",
                f"oci-archive:{back}",
            ]
        )
        again = oci.open_image(back)
        assert again.manifest_digest == rec["digest"]
        for b in again.blob_refs():  # every blob came back intact
            assert len(again.read_blob(b.digest)) == b.size


def test_second_world_reuses_shared_layers_and_repush_uploads_nothing(archives, registry):
    ref = parse_reference(f"{registry.host}/worlds")
    with RegistryClient(ref) as c:
        first = push_image(c, oci.open_image(archives[0]), "w0")
        second = push_image(c, oci.open_image(archives[1]), "w1")
        again = push_image(c, oci.open_image(archives[0]), "w0")
    assert first.uploaded_blobs == 3  # runtime + world layer + config
    assert second.uploaded_blobs == 2 and second.skipped_blobs == 1  # runtime layer shared
    assert again.uploaded_blobs == 0 and again.uploaded_bytes == 0
    # a new tag for an image already there: blobs are all skipped, only the tag is written
    with RegistryClient(ref) as c:
        retag = push_image(c, oci.open_image(archives[0]), "w0-copy")
    assert retag.uploaded_blobs == 0 and retag.skipped_blobs == 3


def test_push_reads_pack_records_from_stdin_and_tag_template(archives, registry):
    lines = "".join(
        json.dumps({"world_id": f"x{i}", "archive": str(a), "digest": "sha256:" + "0" * 64}) + "\n"
        for i, a in enumerate(archives)
    )
    p = apexrl(
        "image",
        "push",
        "-",
        "--to",
        f"{registry.host}/team/worlds",
        "--tag",
        "v1-{world_id}",
        input=lines,
    )
    assert p.returncode == 0, p.stderr
    assert [r["ref"].rsplit(":", 1)[1] for r in records(p.stdout)] == ["v1-x0", "v1-x1"]


def test_ecr_reference_uses_moto_token_creates_repo_and_pushes(archives, ecr):
    import boto3

    ref = f"{ECR_HOST}/apex/worlds"
    p = apexrl("image", "push", str(archives[0]), "--to", ref, env=ecr["env"])
    assert p.returncode == 0, p.stderr
    (rec,) = records(p.stdout)
    assert rec["ref"] == f"{ref}:w0"  # the record keeps the ECR reference
    client = boto3.client("ecr", region_name="us-east-1", endpoint_url=ecr["moto_url"])
    repos = client.describe_repositories()["repositories"]
    assert [r["repositoryName"] for r in repos] == ["apex/worlds"]
    # the registry only accepts moto's token as Basic auth: check with skopeo
    token = client.get_authorization_token()["authorizationData"][0]["authorizationToken"]
    user, password = base64.b64decode(token).decode().split(":", 1)
    reg = ecr["registry"]
    info = json.loads(
        run(
            [
                "skopeo",
                "inspect",
                "--tls-verify=false",
                "--creds",
                f"{user}:{password}",
                f"docker://{reg.host}/apex/worlds:w0",
            ]
        ).stdout
    )
    assert info["Digest"] == rec["digest"]
    # re-push: the repository exists, nothing is uploaded
    p = apexrl("image", "push", str(archives[0]), "--to", ref, env=ecr["env"])
    assert p.returncode == 0 and "0 blobs uploaded" in p.stderr


def test_basic_auth_from_docker_config_and_missing_credentials(archives, tmp_path):
    from tests.images.conftest import Registry

    reg = Registry(tmp_path / "auth-reg", htpasswd=("alice", "s3cret-pass"))
    reg.start()
    try:
        p = apexrl(
            "image",
            "push",
            str(archives[0]),
            "--to",
            f"{reg.host}/w",
            env={"DOCKER_CONFIG": str(tmp_path / "nothing")},
        )
        assert p.returncode == 3, p.stderr
        assert "credentials" in p.stderr
        cfg = tmp_path / "docker"
        cfg.mkdir()
        auth = base64.b64encode(b"alice:s3cret-pass").decode()
        (cfg / "config.json").write_text(json.dumps({"auths": {reg.host: {"auth": auth}}}))
        p = apexrl(
            "image",
            "push",
            str(archives[0]),
            "--to",
            f"{reg.host}/w",
            env={"DOCKER_CONFIG": str(cfg)},
        )
        assert p.returncode == 0, p.stderr
        assert "s3cret-pass" not in p.stderr + p.stdout
        p = apexrl(
            "image",
            "push",
            str(archives[0]),
            "--to",
            f"{reg.host}/w",
            env={
                "DOCKER_CONFIG": str(tmp_path / "nothing"),
                "APEXRL_REGISTRY_USERNAME": "alice",
                "APEXRL_REGISTRY_PASSWORD": "wrong",
            },
        )
        assert p.returncode == 3
    finally:
        reg.stop()


def test_dry_run_contacts_nothing(archives):
    p = apexrl("image", "push", str(archives[0]), "--to", "127.0.0.1:9/w", "--dry-run")
    assert p.returncode == 0 and "would push" in p.stderr and p.stdout == ""


def test_push_images_is_a_library_call(archives, registry):
    """`image push` is apexrl.images.push.push_images: records and the exit code come
    back, and what the command prints is told to callbacks (nothing printed here)."""
    from apexrl.images.push import plan_pushes, push_images

    dest = parse_reference(f"{registry.host}/lib")
    plans = plan_pushes([(archives[0], None)], "{world_id}")
    told: dict[str, list] = {"info": [], "record": [], "progress": []}

    def progress(label: str, total: int):
        told["progress"].append((label, total))
        return contextlib.nullcontext(lambda n=1: None)

    def push():
        return push_images(
            dest, plans, endpoint=None, concurrency=2, retries=1, timeout=30.0,
            progress=progress, on_info=told["info"].append, on_record=told["record"].append,
        )  # fmt: skip

    records, code = push()
    assert code == 0 and records == told["record"] and len(records) == 1
    assert records[0]["ref"] == f"{registry.host}/lib:w0"
    assert records[0]["digest"] == oci.open_image(archives[0]).manifest_digest
    assert "3 blobs uploaded" in told["info"][0] and told["progress"][0][0] == "push w0"
    again, code = push()  # unchanged: answered from one HEAD, the same record
    assert code == 0 and again == records and "0 blobs uploaded (0 bytes)" in told["info"][-1]

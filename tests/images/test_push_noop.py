"""`image push` imports no other command group, and an unchanged re-push answers from one
light HEAD per image (no httpx): the same output and exit codes as a push through the
full client."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest

from apexrl.images import oci
from apexrl.images.push import image_record
from apexrl.images.refs import parse_reference
from apexrl.images.registry_probe import probe_manifest_digests
from tests.images.conftest import PY, REPO_ROOT, Registry, apexrl, make_world, records

# the full client, forced: the light probe never answers with a proxy configured, and
# httpx (trust_env) goes around the dead proxy for loopback
FULL_PATH_ENV = {"HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1"}


def full_push(*args: str):
    return apexrl("--debug", "image", "push", *args, env=FULL_PATH_ENV)


@pytest.fixture(scope="module")
def archives(tmp_path_factory, runtime_pkg) -> list[Path]:
    root = tmp_path_factory.mktemp("noop-worlds")
    srcs = [make_world(root / f"n{i}", n_files=i + 1, seed=10 + i) for i in range(2)]
    out = root / "out"
    p = apexrl("world", "pack", *map(str, srcs), "-o", str(out), "--runtime", str(runtime_pkg))
    assert p.returncode == 0, p.stderr
    return [Path(r["archive"]) for r in records(p.stdout)]


def test_image_record_is_the_model_dump():
    from apexrl.artifacts.models import ImageRecord

    args = ("w1", "127.0.0.1:5000/worlds:w1", "sha256:" + "a" * 64, 1234)
    want = ImageRecord(world_id=args[0], ref=args[1], digest=args[2], size_bytes=args[3])
    got = image_record(*args)
    assert got == want.model_dump(mode="json")
    assert list(got) == list(want.model_dump(mode="json"))  # same key order in NDJSON


def test_plain_info_is_what_rich_prints():
    from rich.console import Console

    from apexrl.cli.output import _is_literal

    for msg in (
        "127.0.0.1:5000/worlds:bench: 0 blobs uploaded (0 bytes), 3 already there",
        "reg.example/worlds:w1: 2 blobs uploaded (10 bytes), 1 already there",
        "no colons here",
    ):
        assert _is_literal(msg)
        buf = io.StringIO()
        Console(file=buf, no_color=True, highlight=False, soft_wrap=True).print(msg)
        assert buf.getvalue() == msg + "\n"
    # Rich would change these: they go through Rich
    assert not _is_literal("reg.example/worlds:smile: 0 blobs uploaded")
    assert not _is_literal("[bold]x[/bold]")
    assert not _is_literal("tab\there")


def _push(archive: Path, to: str, *extra: str, env: dict | None = None):
    p = apexrl("image", "push", str(archive), "--to", to, *extra, env=env)
    assert p.returncode == 0, p.stderr
    return p


def test_unchanged_repush_prints_what_the_full_push_prints(archives, registry):
    to = f"{registry.host}/worlds"
    first = _push(archives[0], to)
    assert "0 blobs uploaded" not in first.stderr
    light = _push(archives[0], to)
    full = full_push(str(archives[0]), "--to", to)
    assert "0 blobs uploaded (0 bytes), 3 already there" in light.stderr
    assert (light.stdout, light.stderr) == (full.stdout, full.stderr)
    assert records(light.stdout)[0]["digest"] == oci.open_image(archives[0]).manifest_digest
    # the same with --json and a tag template, two images at once
    both = [str(a) for a in archives]
    _push(Path(both[0]), to, "--tag", "{world_id}-{digest12}")  # first image's tag
    _push(Path(both[1]), to, "--tag", "{world_id}-{digest12}")
    argv = ["image", "push", *both, "--to", to, "--tag", "{world_id}-{digest12}", "--json"]
    light = apexrl(*argv)
    full = full_push(*argv[2:])
    assert light.returncode == full.returncode == 0, light.stderr + full.stderr
    assert (light.stdout, light.stderr) == (full.stdout, full.stderr)
    assert len(records(light.stdout)) == 2


def test_push_loads_no_other_command_and_noop_no_httpx(archives, registry):
    to = f"{registry.host}/worlds"
    code = (
        "import sys\n"
        "from apexrl.cli.app import COMMANDS\n"
        "from apexrl.cli.entry import main\n"
        "sys.argv[0] = 'apexrl'\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as e:\n"
        "    code = e.code or 0\n"
        "else:\n"
        "    code = 0\n"
        "groups = {e.target.split(':')[0] for e in COMMANDS.values()}\n"
        "heavy = sorted(m for m in ('httpx', *groups) if m in sys.modules)\n"
        "print('RESULT', code, heavy, file=sys.stderr)\n"
    )

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [PY, "-c", code, *argv], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT
        )

    # a new push: the full client (httpx), no other command group
    p = run("image", "push", str(archives[0]), "--to", to, "--tag", "fast")
    assert "RESULT 0 ['apexrl.cli.image', 'httpx']" in p.stderr, p.stderr
    assert "3 blobs uploaded" in p.stderr
    assert records(p.stdout)[0]["ref"] == f"{to}:fast"
    # unchanged: one light HEAD, no httpx
    p = run("image", "push", str(archives[0]), "--to", to, "--tag", "fast")
    assert "RESULT 0 ['apexrl.cli.image']" in p.stderr, p.stderr
    assert "0 blobs uploaded (0 bytes), 3 already there" in p.stderr
    # the tag moves to another image: pushed as always (the shared runtime layer skipped)
    p = run("image", "push", str(archives[1]), "--to", to, "--tag", "fast")
    assert "RESULT 0" in p.stderr and "1 already there" in p.stderr, p.stderr
    assert records(p.stdout)[0]["digest"] == oci.open_image(archives[1]).manifest_digest


def test_push_failures_are_reported_with_and_without_debug(archives, tmp_path):
    gone = Registry(tmp_path / "gone")  # never started: connection refused
    args = (str(archives[0]), "--to", f"{gone.host}/w", "--retries", "1")
    plain = apexrl("image", "push", *args)
    full = apexrl("--debug", "image", "push", *args, env={"APEXRL_DEBUG": ""})
    assert plain.returncode == full.returncode == 4, plain.stderr + full.stderr
    assert plain.stdout == full.stdout == ""
    assert plain.stderr.startswith("error: ") and "gave up after 1 attempts" in plain.stderr


def test_probe_answers_basic_challenges_and_hands_over_otherwise(archives, tmp_path, monkeypatch):
    reg = Registry(tmp_path / "auth-reg", htpasswd=("alice", "s3cret-pass"))
    reg.start()
    try:
        src = oci.open_image(archives[0])
        env = {"APEXRL_REGISTRY_USERNAME": "alice", "APEXRL_REGISTRY_PASSWORD": "s3cret-pass"}
        _push(archives[0], f"{reg.host}/w", "--tag", "t", env=env)
        ref = parse_reference(f"{reg.host}/w")
        wanted = [("t", src.manifest_media_type), ("nope", src.manifest_media_type)]
        monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "nothing"))
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        assert probe_manifest_digests(ref, wanted) == [src.manifest_digest, None]
        monkeypatch.setenv("APEXRL_REGISTRY_PASSWORD", "wrong")
        assert probe_manifest_digests(ref, wanted) is None
        monkeypatch.delenv("APEXRL_REGISTRY_USERNAME")
        monkeypatch.delenv("APEXRL_REGISTRY_PASSWORD")
        assert probe_manifest_digests(ref, wanted) is None
    finally:
        reg.stop()
    # nobody listening, an ECR host, a proxy: no answer (the full client decides)
    assert probe_manifest_digests(ref, wanted) is None
    ecr = parse_reference("123456789012.dkr.ecr.us-east-1.amazonaws.com/w")
    assert probe_manifest_digests(ecr, wanted, endpoint=reg.url) is None
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    assert probe_manifest_digests(ref, wanted) is None


def test_help_still_goes_to_typer():
    p = subprocess.run(
        [PY, "-m", "apexrl", "image", "push", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert p.returncode == 0 and "--registry-endpoint" in p.stdout


def test_installed_command_starts_at_the_entry_point():
    import tomllib

    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["apexrl"] == "apexrl.cli.entry:main"
    p = subprocess.run(
        [
            PY,
            "-c",
            "import sys; from apexrl.cli.entry import main; sys.argv[0] = 'apexrl'; main()",
            "--version",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert p.returncode == 0 and p.stdout.startswith("apexrl "), p.stderr

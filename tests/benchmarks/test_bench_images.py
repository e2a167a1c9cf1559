"""World images: `image push` of a >= 200 MB world image against `skopeo copy` of the
same archive to the same kind of local registry, the no-op re-push, and `world pack`
against `tar czf` of the same world folder.

Measures only (no timing assertions); writes bench/results.json key "images": the
median of RUNS interleaved rounds with min/max and the load average.
Targets: push/skopeo <= 0.8 and no-op re-push from the CLI < 0.5 s (issue 21),
pack/tar czf <= 1.5 (issue 3).
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.benchmarks.results import RUNS, interleaved, load_average, ratio, record, stats
from tests.images.conftest import Registry, apexrl, make_world, records

WORLD_BYTES = 224 << 20


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _ok(p: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert p.returncode == 0, p.stderr[-3000:]
    return p


@pytest.mark.timeout(1800)  # a busy shared disk makes one round take minutes
def test_bench_images(tmp_path):
    load_at_start = load_average()
    # mostly incompressible, like a world of office documents and PDFs: the image is > 200 MB
    world = make_world(tmp_path / "bigworld", extra_bytes=WORLD_BYTES, random_share=0.95)
    world_bytes = sum(p.stat().st_size for p in world.rglob("*") if p.is_file())

    # a frozen runtime: others may edit the working tree while this runs
    runtime = tmp_path / "runtime" / "apexrl"
    shutil.copytree(
        Path(__file__).resolve().parents[2] / "apexrl",
        runtime,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )

    # pack vs tar czf, interleaved rounds
    recs: list[dict] = []

    def pack(out: Path) -> None:
        p = _ok(apexrl("world", "pack", str(world), "-o", str(out), "--runtime", str(runtime)))
        recs.extend(records(p.stdout))

    def tar(dest: Path) -> None:
        subprocess.run(
            ["tar", "czf", str(dest), "-C", str(world.parent), world.name], check=True, timeout=600
        )

    rounds = itertools.count()  # a fresh output folder each time: nothing to reuse
    packing = interleaved(
        RUNS,
        {
            "pack": lambda: pack(tmp_path / f"pack{next(rounds)}"),
            "tar": lambda: tar(tmp_path / "world.tar.gz"),
        },
    )
    assert len({r["digest"] for r in recs}) == 1, "world pack must be reproducible"
    archive = Path(recs[0]["archive"])
    image_bytes = archive.stat().st_size

    # the CLI's bytecode, as an installed apexrl has it (pip compiles at install; an editable
    # install compiles on first import, never where PYTHONDONTWRITEBYTECODE is set)
    pkg = Path(__file__).resolve().parents[2] / "apexrl"
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(pkg)], check=True, timeout=300)

    # push vs skopeo copy, each into a fresh registry
    push_t, skopeo_t, noop_cli, noop_api = [], [], [], []
    for i in range(RUNS):
        ra = Registry(tmp_path / f"reg-apexrl-{i}")
        rb = Registry(tmp_path / f"reg-skopeo-{i}")
        ra.start()
        rb.start()
        try:

            def ours(ra=ra) -> None:
                push_t.append(
                    _timed(
                        lambda r=ra: _ok(
                            apexrl(
                                "image",
                                "push",
                                str(archive),
                                "--to",
                                f"{r.host}/worlds",
                                "--tag",
                                "bench",
                            )
                        )
                    )
                )

            def peer(rb=rb) -> None:
                skopeo_t.append(
                    _timed(
                        lambda r=rb: subprocess.run(
                            [
                                "skopeo",
                                "copy",
                                "--quiet",
                                "--dest-tls-verify=false",
                                f"oci-archive:{archive}",
                                f"docker://{r.host}/worlds:bench",
                            ],
                            check=True,
                            timeout=600,
                            capture_output=True,
                        )
                    )
                )

            # the order alternates per round: a disk that slows down over the rounds
            # must not always fall on the same contender
            for run in (ours, peer) if i % 2 == 0 else (peer, ours):
                run()
            p = None

            def again(r=ra):
                nonlocal p
                p = _ok(
                    apexrl(
                        "image", "push", str(archive), "--to", f"{r.host}/worlds", "--tag", "bench"
                    )
                )

            noop_cli.append(_timed(again))
            assert "0 blobs uploaded (0 bytes)" in p.stderr
            noop_api.append(_noop_in_process(archive, ra.host))
        finally:
            ra.stop()
            rb.stop()
        shutil.rmtree(tmp_path / f"reg-apexrl-{i}", ignore_errors=True)
        shutil.rmtree(tmp_path / f"reg-skopeo-{i}", ignore_errors=True)

    data = {
        "runs": RUNS,
        "world_bytes": world_bytes,
        "image_archive_bytes": image_bytes,
        "pack": stats(packing["pack"]),
        "tar_czf": stats(packing["tar"]),
        "pack_over_tar_czf": ratio(packing["pack"], packing["tar"]),
        "push": stats(push_t),
        "skopeo_copy": stats(skopeo_t),
        "push_over_skopeo": ratio(push_t, skopeo_t),
        "noop_repush_cli": stats(noop_cli),
        "noop_repush_in_process": stats(noop_api, digits=4),
        "targets": {"pack_over_tar_czf": 1.5, "push_over_skopeo": 0.8, "noop_repush_cli_s": 0.5},
        "command": "pytest tests/benchmarks/test_bench_images.py",
        "peers": {
            "pack": "tar czf of the same world folder (gzip -6)",
            "push": "skopeo copy oci-archive:ARCHIVE docker://127.0.0.1:PORT/worlds:bench "
            "(fresh docker-registry each; in each round one goes first, alternating)",
        },
        "python": sys.version.split()[0],
    }
    record("images", data, load_at_start=load_at_start)
    print(data)


def _noop_in_process(archive: Path, host: str) -> float:
    from apexrl.images import oci
    from apexrl.images.refs import parse_reference
    from apexrl.images.registry_client import RegistryClient, push_image

    t0 = time.perf_counter()
    with RegistryClient(parse_reference(f"{host}/worlds")) as c:
        res = push_image(c, oci.open_image(archive), "bench")
    dt = time.perf_counter() - t0
    assert res.uploaded_blobs == 0
    return dt

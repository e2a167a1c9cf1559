"""Reading a LoRA adapter archive (apexrl.engine.lora): tar.gz as SkyRL's JAX backend
writes it, plain tar and a folder give the same deltas; an archive with a link, a name
leaving the folder or a member over the size limit is refused by apexrl's one extractor
(apexrl.artifacts.archive_extract), before any weight is read."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from apexrl.engine.lora import read_lora_deltas
from apexrl.errors import BadRecordError

PREFIX = "base_model.model.model.layers.0.self_attn.q_proj"


def write_adapter(folder: Path) -> dict:
    """A PEFT adapter of one linear layer (A: r x in, B: out x r), r=2, alpha=4."""
    import torch
    from safetensors.torch import save_file

    g = torch.Generator().manual_seed(3)
    t = {
        f"{PREFIX}.lora_A.weight": torch.randn(2, 5, generator=g),
        f"{PREFIX}.lora_B.weight": torch.randn(4, 2, generator=g),
    }
    folder.mkdir(parents=True)
    save_file(t, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(json.dumps({"r": 2, "lora_alpha": 4}))
    return t


def pack(folder: Path, out: Path, mode: str, extra=None, **kw) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, mode, **kw) as tar:
        tar.add(folder, arcname="")  # SkyRL's pack_and_upload: the folder's root as ""
        if extra:
            extra(tar)
    return out


def add_symlink(name: str, target: str):
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.type, info.linkname = tarfile.SYMTYPE, target
        tar.addfile(info)

    return add


def add_file(name: str, data: bytes):
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))

    return add


def test_tar_gz_tar_and_folder_give_the_same_deltas(tmp_path):
    import torch

    t = write_adapter(tmp_path / "ad")
    want = 2.0 * (t[f"{PREFIX}.lora_B.weight"] @ t[f"{PREFIX}.lora_A.weight"])  # alpha / r = 2
    name = "model.layers.0.self_attn.q_proj.weight"
    for src in (
        pack(tmp_path / "ad", tmp_path / "adapter.tar.gz", "w:gz"),
        # as SkyRL's pack_and_upload writes it: gzip at level 0 (stored blocks)
        pack(tmp_path / "ad", tmp_path / "skyrl.tar.gz", "w:gz", compresslevel=0),
        pack(tmp_path / "ad", tmp_path / "adapter.tar", "w"),
        tmp_path / "ad",
    ):
        deltas = read_lora_deltas(src)
        assert list(deltas) == [name], src
        assert torch.allclose(deltas[name], want), src


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (add_symlink("adapter_model.safetensors.lnk", "/etc/passwd"), "links are not allowed"),
        (add_symlink("inner", "adapter_config.json"), "links are not allowed"),
        (add_file("../escaped.txt", b"out"), "path traversal"),
        (add_file("/abs.txt", b"out"), "absolute path"),
    ],
)
def test_a_hostile_adapter_archive_is_refused(tmp_path, extra, why):
    write_adapter(tmp_path / "ad")
    tgz = pack(tmp_path / "ad", tmp_path / "work" / "adapter.tar.gz", "w:gz", extra)
    with pytest.raises(BadRecordError, match=why) as e:
        read_lora_deltas(tgz)
    assert "adapter" in str(e.value) and str(tgz) in str(e.value)
    assert not (tmp_path / "escaped.txt").exists()
    assert not (tmp_path / "work" / "escaped.txt").exists()


def test_the_archive_limits_hold_for_adapters(tmp_path, monkeypatch):
    write_adapter(tmp_path / "ad")
    tgz = pack(tmp_path / "ad", tmp_path / "adapter.tar.gz", "w:gz")
    monkeypatch.setenv("APEXRL_ARCHIVE_MAX_MEMBER_BYTES", "64")  # the weights are larger
    with pytest.raises(BadRecordError, match="limit"):
        read_lora_deltas(tgz)

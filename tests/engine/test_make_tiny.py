"""`apexrl engine make-tiny --untied`: separate input and output embeddings (the acting
miniature trains a LoRA adapter of the output layer; tied ones leave it none)."""

from __future__ import annotations

import json

from apexrl.cli.app import app


def test_make_tiny_untied_writes_separate_embeddings(runner, tmp_path):
    from safetensors import safe_open

    for name, extra in (("tied", []), ("untied", ["--untied"])):
        out = tmp_path / name
        args = ["engine", "make-tiny", str(out), "--layers", "1", "--window", "256", *extra]
        r = runner.invoke(app, args)
        assert r.exit_code == 0, r.output
        cfg = json.loads((out / "config.json").read_text())
        assert cfg["tie_word_embeddings"] is (name == "tied")
        with safe_open(str(out / "model.safetensors"), "pt") as f:
            names = set(f.keys())
        assert ("lm_head.weight" in names) is (name == "untied")

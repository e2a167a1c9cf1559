"""Fixtures for TITO tests: the real Qwen3 tokenizer (offline) and its templates."""

from __future__ import annotations

import pytest

from apexrl.tito.template import resolve_template
from apexrl.tito.tokenizer import bundled_qwen3_dir, load_tokenizer


@pytest.fixture(scope="session")
def tok():
    return load_tokenizer("qwen3")


@pytest.fixture(scope="session")
def stock(tok) -> str:
    return resolve_template(None, tok.chat_template)[1]


@pytest.fixture(scope="session")
def verbatim(tok) -> str:
    return resolve_template("qwen3-verbatim", tok.chat_template)[1]


@pytest.fixture(scope="session")
def qwen3_dir():
    return bundled_qwen3_dir()


@pytest.fixture(scope="session")
def tiny_engine(tmp_path_factory):
    """A real HTTP engine on 127.0.0.1 serving a random-weight Qwen3 checkpoint."""
    from apexrl.engine.cpu import EngineServer, LocalEngine
    from apexrl.engine.tiny import make_tiny_checkpoint

    d = make_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny-qwen3", seed=0)
    server = EngineServer(LocalEngine(d, served_model_name="tiny-qwen3")).start()
    try:
        yield server
    finally:
        server.stop(timeout_s=10)

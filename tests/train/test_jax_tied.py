"""An output-layer adapter on a model that ties its embeddings is refused with a usage
error that names the fix (SkyRL's JAX backend would fail deep inside with a ValueError)."""

import json

import pytest

from apexrl.errors import UsageError
from apexrl.train.jaxrl.trainer import refuse_unembed_on_tied


def _model(tmp_path, tied: bool):
    (tmp_path / "config.json").write_text(json.dumps({"tie_word_embeddings": tied}))
    return tmp_path


def test_train_unembed_on_a_tied_model_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError) as e:
        refuse_unembed_on_tied(_model(tmp_path, True), True)
    assert "untied" in str(e.value) and "train_unembed=false" in e.value.hint


@pytest.mark.parametrize(("tied", "unembed"), [(False, True), (True, False), (False, False)])
def test_other_combinations_pass(tmp_path, tied, unembed):
    refuse_unembed_on_tied(_model(tmp_path, tied), unembed)

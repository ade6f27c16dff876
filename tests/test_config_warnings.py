"""transformers' warnings about its own default sub-configs are dropped when a checkpoint loads or
saves; warnings about the checkpoint's own special-token ids still show."""

import json
import logging

import pytest
from transformers.utils import logging as hf_logging

import platonic_sdk as ps


@pytest.fixture
def warnings():
    """Warning messages reaching transformers' config logger's handlers (warn-once cache cleared)."""
    seen = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler, verbosity = Collect(level=logging.WARNING), hf_logging.get_verbosity()
    hf_logging.set_verbosity_warning()
    logging.Logger.warning_once.cache_clear()  # transformers warns once per message and process
    logger = logging.getLogger("transformers")
    logger.addHandler(handler)
    yield seen
    logger.removeHandler(handler)
    hf_logging.set_verbosity(verbosity)


def _saved_siglip(tmp_path, **text):
    ps.from_config("siglip").save(str(tmp_path))
    config = json.loads((tmp_path / "config.json").read_text())
    config["text_config"].update(text)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return config["text_config"]["vocab_size"]


def test_siglip_load_and_save_warn_nothing_about_default_token_ids(tmp_path, warnings):
    _saved_siglip(tmp_path)
    ps.load("siglip", str(tmp_path))
    assert not [w for w in warnings if "token_id must be" in w]
    logging.Logger.warning_once.cache_clear()
    from transformers import SiglipConfig

    repr(SiglipConfig())  # the same call outside our loaders still warns (only our paths are filtered)
    assert any("got 49406" in w for w in warnings)


def test_a_bad_token_id_of_the_checkpoint_itself_still_warns(tmp_path, warnings):
    vocab = _saved_siglip(tmp_path, bos_token_id=987_654)
    ps.load("siglip", str(tmp_path))
    expected = f"bos_token_id must be `None` or an integer within the vocabulary (between 0 and {vocab - 1}), got 987654"
    assert any(expected in w for w in warnings)

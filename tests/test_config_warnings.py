"""transformers' warnings about its own default sub-configs are dropped when a checkpoint loads;
warnings about the checkpoint's own special-token ids still show."""

import json

import platonic_sdk as ps


def _saved_siglip(tmp_path, **text):
    enc = ps.from_config("siglip")
    enc.save(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["text_config"].update(text)
    (tmp_path / "config.json").write_text(json.dumps(config))
    return config["text_config"]["vocab_size"]


def test_a_siglip_load_prints_no_default_token_id_warning(tmp_path, capfd):
    _saved_siglip(tmp_path)
    ps.load("siglip", str(tmp_path))
    assert "token_id must be" not in capfd.readouterr().err


def test_a_bad_token_id_of_the_checkpoint_itself_still_warns(tmp_path, capfd):
    vocab = _saved_siglip(tmp_path, bos_token_id=987_654)
    ps.load("siglip", str(tmp_path))
    err = capfd.readouterr().err
    assert f"bos_token_id must be `None` or an integer within the vocabulary (between 0 and {vocab - 1}), got 987654" in err

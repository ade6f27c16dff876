"""The feature cache serves a second run folder: the same small grid into a new folder encodes nothing
unedited again, on every world, and the dry run between them counts every set as cached."""

import re

import pytest

from platonic_sdk.cli.main import main
from platonic_sdk.encoding import features

SMALL = {
    "image": ["--families", "clip", "siglip", "--task", "amber_shapes", "--task", "teal_shapes"],
    "audio": ["--families", "clap-general", "clap-music", "--task", "bright_noises", "--task", "raised_notes"],
    "real": ["--families", "lit_s", "lit_m", "--task", "fashion_rotated_left", "--task", "card_suits"],
}
TINY = ["--train-per-class", "2", "--test-per-class", "3", "--per-class", "2", "--methods", "closed_form", "--sweep-cells", "1",
        "--no-similarity", "--quiet"]


@pytest.mark.parametrize("world", list(SMALL))
def test_a_second_grid_into_a_new_folder_reads_every_unedited_encoding_from_the_cache(world, tmp_path, monkeypatch, capsys):
    if world == "real":
        pytest.importorskip("timm", reason="the real world's trunks need the [real] extra")
    grid = ["grid", "--world", world, *SMALL[world], *TINY, "--cache-dir", str(tmp_path / "cache")]
    encoded = []
    original = features._encode

    def counting(encoder, items, *args):  # every forward pass over a set goes through here
        encoded.append((encoder.family, len(items)))
        return original(encoder, items, *args)

    monkeypatch.setattr(features, "_encode", counting)
    assert main([*grid, "--out", str(tmp_path / "a")]) == 0
    first = list(encoded)
    assert first  # the first run encodes
    capsys.readouterr()
    assert main([*grid, "--out", str(tmp_path / "b"), "--dry-run"]) == 0
    counts = re.findall(r"(\d+) items to encode .*?, (\d+) of them in the feature cache \((\d+) of (\d+) sets\)", capsys.readouterr().out)
    assert len(counts) == 2 and all(items == cached and held == sets for items, cached, held, sets in counts)
    encoded.clear()
    assert main([*grid, "--out", str(tmp_path / "b")]) == 0
    assert encoded == []  # closed form and its studies: no edited model is encoded, every unedited set is read back

"""Datasets are checked when they are loaded: each bad layout is refused by name, and the data is left as it was."""

from __future__ import annotations

import csv
import hashlib
import struct
import wave
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from platonic_sdk.data.audio import Waveform, folder_task, manifest_task, read_audio, write_audio
from platonic_sdk.data.images import image_folder_task, read_image
from platonic_sdk.errors import PlatonicError
from platonic_sdk.tasks import Split, Task


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under `root` (symlinks not followed) with a digest of its bytes or link target."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "-> " + str(path.readlink())
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[rel] = "dir"
    return out


def refused(root: Path, call, words: str) -> PlatonicError:
    """`call()` raises PlatonicError containing `words`, and nothing under `root` changed."""
    before = snapshot(root)
    with pytest.raises(PlatonicError) as info:
        call()
    assert words in str(info.value), str(info.value)
    assert snapshot(root) == before
    return info.value


def images(folder: Path, count: int, rgb=(200, 40, 40)) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        Image.new("RGB", (8, 8), tuple(max(0, c - 9 * i) for c in rgb)).save(folder / f"{i}.png")


def clips(folder: Path, count: int, rate: int = 8000) -> None:
    for i in range(count):
        write_audio(folder / f"{i}.wav", Waveform(0.3 * np.sin(np.arange(800) * (0.05 + 0.01 * i)), rate))


def test_class_names_that_collide_once_normalised_are_refused(tmp_path):
    images(tmp_path / "zoo" / "sea_lion", 3)
    images(tmp_path / "zoo" / "sea-lion", 3)
    message = refused(tmp_path, lambda: image_folder_task(tmp_path / "zoo"), "same name 'sea lion'")
    assert "'sea-lion'" in str(message) and "'sea_lion'" in str(message)
    clips(tmp_path / "sounds" / "Dog_Bark", 3)
    clips(tmp_path / "sounds" / "dog bark", 3)
    refused(tmp_path, lambda: folder_task(tmp_path / "sounds"), "same name")


def test_duplicate_and_empty_class_names_are_refused(tmp_path):
    split = Split([np.zeros((4, 4, 3), np.uint8)] * 2, [0, 1])
    with pytest.raises(PlatonicError, match="coincide"):
        Task("t", ["cat", "Cat "], split, split)
    with pytest.raises(PlatonicError, match="empty name"):
        Task("t", ["cat", "  "], split, split)
    images(tmp_path / "zoo" / "cat", 3)
    images(tmp_path / "zoo" / "__", 3)
    refused(tmp_path, lambda: image_folder_task(tmp_path / "zoo"), "'__' has an empty name")
    manifest = tmp_path / "meta.csv"
    clips(tmp_path / "audio", 4)
    manifest.write_text("path,label,fold\n0.wav,dog,1\n1.wav,Dog,1\n2.wav,cat,2\n3.wav,cat,2\n")
    refused(tmp_path, lambda: manifest_task(manifest, root=tmp_path / "audio"), "same name")
    manifest.write_text("path,label,fold\n0.wav,dog,1\n1.wav,,1\n2.wav,cat,2\n3.wav,cat,2\n")
    refused(tmp_path, lambda: manifest_task(manifest, root=tmp_path / "audio"), "empty name")


def test_hidden_folders_and_files_are_skipped(tmp_path):
    root = tmp_path / "zoo"
    for name in ("cat", "dog", ".ipynb_checkpoints", "__pycache__", ".git"):
        images(root / name, 3)
    images(root / "cat" / ".thumbs", 2)  # a hidden folder inside a class holds no items of it
    Image.new("RGB", (8, 8)).save(root / "dog" / ".hidden.png")
    (root / "dog" / ".DS_Store").write_bytes(b"\0\1")
    before = snapshot(tmp_path)
    task = image_folder_task(root, test_fraction=0.34)
    assert task.classnames == ("cat", "dog")
    assert len(task.train) + len(task.test) == 6
    assert snapshot(tmp_path) == before
    for name in ("rain", ".ipynb_checkpoints", "__pycache__"):
        clips(tmp_path / "sounds" / name, 3)
    write_audio(tmp_path / "sounds" / "rain" / ".x.wav", Waveform(np.ones(8) * 0.1, 8000))
    clips(tmp_path / "sounds" / "wind", 3)
    audio = folder_task(tmp_path / "sounds", test_fraction=0.34)
    assert audio.classnames == ("rain", "wind") and len(audio.train) + len(audio.test) == 6


def test_an_empty_class_folder_is_refused_by_name(tmp_path):
    images(tmp_path / "zoo" / "cat", 3)
    (tmp_path / "zoo" / "dog").mkdir()
    (tmp_path / "zoo" / "dog" / "notes.txt").write_text("no images here")
    refused(tmp_path, lambda: image_folder_task(tmp_path / "zoo"), f"class folder {str(tmp_path / 'zoo' / 'dog')!r} holds no")
    clips(tmp_path / "sounds" / "rain", 3)
    (tmp_path / "sounds" / "wind").mkdir()
    refused(tmp_path, lambda: folder_task(tmp_path / "sounds"), str(tmp_path / "sounds" / "wind"))


def test_a_one_item_class_is_named_by_its_folder(tmp_path):
    images(tmp_path / "zoo" / "cat", 3)
    images(tmp_path / "zoo" / "dog", 1)
    refused(tmp_path, lambda: image_folder_task(tmp_path / "zoo"), f"class {str(tmp_path / 'zoo' / 'dog')!r} has 1 item(s)")
    clips(tmp_path / "sounds" / "rain", 3)
    clips(tmp_path / "sounds" / "wind", 1)
    refused(tmp_path, lambda: folder_task(tmp_path / "sounds"), f"class {str(tmp_path / 'sounds' / 'wind')!r} has 1 item(s)")


def test_symlinks_that_leave_the_data_root_are_refused(tmp_path):
    root = tmp_path / "zoo"
    images(root / "cat", 3)
    images(root / "dog", 3)
    images(tmp_path / "elsewhere" / "bird", 3)
    (root / "bird").symlink_to(tmp_path / "elsewhere" / "bird", target_is_directory=True)
    refused(tmp_path, lambda: image_folder_task(root), "outside the data root")
    (root / "bird").unlink()
    (root / "cat" / "stray.png").symlink_to(tmp_path / "elsewhere" / "bird" / "0.png")
    refused(tmp_path, lambda: image_folder_task(root), f"file {str(root / 'cat' / 'stray.png')!r} leads to")
    (root / "cat" / "stray.png").unlink()
    (root / "cat" / "twin.png").symlink_to(root / "dog" / "0.png")  # inside the root: fine
    inner = image_folder_task(root, test_fraction=0.34)
    assert len(inner.train) + len(inner.test) == 7


def bomb_png(path: Path, side: int = 30000) -> None:
    """A valid PNG header for a side x side 1-bit image (900 Mpixel) with a tiny body: a decompression bomb."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))


@pytest.fixture(scope="module")
def zoo_clip():
    from platonic_sdk.worlds.zoo import load_models

    return load_models(names=["clip"])["clip"]


def test_a_decompression_bomb_is_refused_naming_the_file(tmp_path, zoo_clip):
    from platonic_sdk.encoding.features import encode_items

    root = tmp_path / "zoo"
    for split in ("train", "test"):
        images(root / split / "cat", 2)
        images(root / split / "dog", 2, (40, 40, 200))
    bomb = root / "test" / "dog" / "9.png"
    bomb_png(bomb)
    refused(tmp_path, lambda: read_image(bomb), f"image {str(bomb)!r} looks like a decompression bomb")
    refused(tmp_path, lambda: image_folder_task(root), str(bomb))  # its header is read at load
    unverified = image_folder_task(root, verify=False)
    for workers in (0, 1):  # else decoding refuses it, in this process or in a worker
        refused(tmp_path, lambda: encode_items(zoo_clip, unverified.test.items, workers=workers), f"image {str(bomb)!r} looks like")


def truncated_wav(path: Path, frames: int = 4000, keep: float = 0.5) -> None:
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(8000)
        handle.writeframes((np.sin(np.arange(frames) / 7) * 20000).astype("<i2").tobytes())
    data = path.read_bytes()
    path.write_bytes(data[: 44 + int((len(data) - 44) * keep)])


@pytest.mark.parametrize("subtype", ["PCM_16", "FLOAT"])
def test_a_truncated_wav_is_refused_not_read_as_half_a_clip(tmp_path, subtype):
    whole = tmp_path / "whole.wav"
    write_audio(whole, Waveform(0.5 * np.sin(np.arange(4000) / 7), 8000), subtype=subtype)
    assert read_audio(whole).num_samples == 4000
    cut = tmp_path / "cut.wav"
    cut.write_bytes(whole.read_bytes()[: len(whole.read_bytes()) // 2])
    refused(tmp_path, lambda: read_audio(cut), "is truncated: its header promises 4000 frames")
    truncated_wav(tmp_path / "stdlib.wav")
    refused(tmp_path, lambda: read_audio(tmp_path / "stdlib.wav"), "promises 4000 frames, it holds 2000")


def test_a_manifest_that_is_not_utf8_is_refused_naming_file_and_line(tmp_path):
    clips(tmp_path / "audio", 4)
    manifest = tmp_path / "meta.csv"
    manifest.write_bytes("path,label,fold\n0.wav,dog,1\n1.wav,dog,1\n2.wav,caf\u00e9,2\n3.wav,caf\u00e9,2\n".encode("latin-1"))
    refused(tmp_path, lambda: manifest_task(manifest, root=tmp_path / "audio"), f"manifest {str(manifest)!r} is not UTF-8 text: line 4")
    manifest.write_bytes("\ufeffpath,label,fold\n0.wav,dog,1\n1.wav,dog,1\n2.wav,caf\u00e9,2\n3.wav,caf\u00e9,2\n".encode("utf-8"))
    assert manifest_task(manifest, root=tmp_path / "audio").classnames == ("café", "dog")
    manifest.write_text("path,label,fold\n0.wav,dog,1\n1.wav,dog\n")
    refused(tmp_path, lambda: manifest_task(manifest, root=tmp_path / "audio"), "line 3: 2 fields where the header has 3")


@pytest.mark.parametrize("escape", ["../outside.wav", "sub/../../outside.wav", "ABSOLUTE"])
def test_manifest_paths_that_escape_the_data_root_are_refused(tmp_path, escape):
    clips(tmp_path / "data" / "audio", 4)
    write_audio(tmp_path / "data" / "outside.wav", Waveform(np.ones(80) * 0.1, 8000))
    escape = str(tmp_path / "data" / "outside.wav") if escape == "ABSOLUTE" else escape
    manifest = tmp_path / "data" / "meta.csv"
    with manifest.open("w", newline="") as handle:
        csv.writer(handle).writerows([("path", "label", "fold"), ("0.wav", "a", 1), (escape, "a", 1), ("2.wav", "b", 2), ("3.wav", "b", 2)])
    refused(tmp_path, lambda: manifest_task(manifest, root=tmp_path / "data" / "audio"), "line 3: path")


def test_the_cli_names_a_bomb_in_one_line(tmp_path, capsys, zoo_clip):
    from platonic_sdk.cli import main as cli
    from platonic_sdk.worlds.zoo import ZOO_DIR

    images(tmp_path / "zoo" / "cat", 3)
    images(tmp_path / "zoo" / "dog", 3, (40, 40, 200))
    bomb_png(tmp_path / "zoo" / "dog" / "bomb.png")
    before = snapshot(tmp_path)
    status = cli.main(["evaluate", "--family", "clip", "--checkpoint", str(ZOO_DIR / "clip"), "--task", f"images:{tmp_path / 'zoo'}", "--quiet"])
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err
    assert err.startswith("platonic evaluate: error:") and "bomb.png' looks like a decompression bomb" in err
    assert err.count("\n") == 1  # one line
    assert snapshot(tmp_path) == before

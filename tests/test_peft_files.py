"""LoRA edits as peft adapter folders, checked against peft itself on the native transformers models.

The native side never goes through the SDK: the model is written with transformers' `save_pretrained`,
read back with the native class, wrapped by `peft.PeftModel.from_pretrained`, and run with its own forward
(unit `image_embeds` / `audio_embeds`). Both sides get the same preprocessed batch (preprocessing parity is
tested elsewhere), so a difference can only come from the adapter weights.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model

import platonic_sdk as ps
from platonic_sdk.cli import main as cli
from platonic_sdk.data.audio import Waveform
from platonic_sdk.descriptor import UTD
from platonic_sdk.errors import CheckpointError, PlatonicError, ShapeError
from platonic_sdk.finetune import FineTuned
from platonic_sdk.transfer import Edit
from platonic_sdk.transfer.lora import LoraEdit, LoraRouteConfig, fit_lora, media_prefix
from platonic_sdk.worlds.image import ImageWorld

# the transformers-backed families (open_clip's native attention is a fused in_proj: no peft folder there)
NATIVE = ("clip", "metaclip", "siglip", "siglip2", "clap-htsat-unfused", "clap-htsat-fused", "clap-general", "clap-music")
WORLD = ["--train-per-class", "4", "--test-per-class", "3", "--per-class", "2", "--quiet"]


def _items(encoder, n: int = 3) -> list:
    rng = np.random.default_rng(0)
    if encoder.modality == "image":  # portrait, landscape and square, smaller and larger than the input size
        return [rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8) for h, w in ((40, 24), (20, 52), (64, 64))[:n]]
    return [Waveform(rng.standard_normal(8000).astype(np.float32) * 0.1, 16000) for _ in range(n)]


def _random_factors(encoder, rank: int = 2, scale: float = 0.3, seed: int = 1) -> dict:
    """(A, B) for every LoRA target of the media tower, large enough to move embeddings visibly."""
    gen = torch.Generator().manual_seed(seed)
    return {
        name: (scale * torch.randn(rank, m.in_features, generator=gen), scale * torch.randn(m.out_features, rank, generator=gen))
        for name, m in encoder.media_encoder.named_modules()
        if any(name.endswith(t) for t in encoder.lora_targets)
    }


def _native(encoder, folder: Path):
    """The encoder's model as the native library saves and loads it, without the SDK."""
    encoder.model.save_pretrained(folder)
    return type(encoder.model).from_pretrained(folder).eval()


@torch.no_grad()
def _native_embeddings(model, encoder, batch) -> torch.Tensor:
    """Unit media embeddings from the native model's own forward (text ids from the checkpoint's tokenizer)."""
    ids = encoder.tokenizer(["a photo"], return_tensors="pt")["input_ids"]
    out = model(input_ids=ids, **(batch if isinstance(batch, dict) else {"pixel_values": batch}))
    emb = out.audio_embeds if encoder.modality == "audio" else out.image_embeds
    return torch.nn.functional.normalize(emb, dim=-1)


@torch.no_grad()
def _sdk_and_peft(encoder, edit: LoraEdit, tmp_path: Path) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Unit embeddings: unedited and edited through the SDK, and from peft's load of tmp_path/adapter on the native model."""
    native = PeftModel.from_pretrained(_native(encoder, tmp_path / "native"), str(tmp_path / "adapter")).eval()
    batch = encoder.preprocess(_items(encoder))
    before = encoder.encode_media(batch)
    with edit.applied_to(encoder):
        edited = encoder.encode_media(batch)
    return before, edited, _native_embeddings(native, encoder, batch)


def _state(encoder) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in encoder.model.state_dict().items()}


def _unchanged(encoder, state: dict[str, torch.Tensor]) -> bool:
    live = encoder.model.state_dict()
    return live.keys() == state.keys() and all(torch.equal(live[k], v) for k, v in state.items())


@pytest.fixture(scope="module")
def clip():
    torch.manual_seed(0)
    return ps.from_config("clip")


@pytest.mark.parametrize("family", NATIVE)
def test_save_pretrained_loads_in_peft_on_the_native_model(family, tmp_path):
    """save_pretrained, then PeftModel.from_pretrained on the native class: the edit's embeddings (1e-5), at a
    negative strength (which the folder must carry), where the edit moves unit embeddings by > 0.05."""
    torch.manual_seed(0)
    encoder = ps.from_config(family)
    edit = LoraEdit(_random_factors(encoder), rank=2, lora_alpha=4.0, strength=-1.5)
    edit.save_pretrained(tmp_path / "adapter", encoder)
    assert {p.name for p in (tmp_path / "adapter").iterdir()} >= {"adapter_config.json", "adapter_model.safetensors"}

    before, edited, peft_side = _sdk_and_peft(encoder, edit, tmp_path)
    assert float((edited - before).abs().max()) > 0.05
    assert float((peft_side - edited).abs().max()) < 1e-5


def test_a_fitted_edit_round_trips_through_peft_and_back(clip, tmp_path):
    """The LoRA route's own output: save_pretrained needs no encoder (the fit records the tower's path);
    peft gives the same change of the embeddings; from_pretrained gives back the same edit bit for bit."""
    grid = ps.Task("t", ("red", "blue"), ps.Split(_items(clip), [0, 1, 0]), ps.Split(_items(clip), [0, 1, 0])).grid(per_class=1)
    target = UTD(0.1 * torch.randn(grid.shape, generator=torch.Generator().manual_seed(2)), grid.identity, grid.task)
    edit = fit_lora(clip, target, [grid], LoraRouteConfig(lr=3e-2, max_steps=2, batch_size=2), progress=False).scaled(0.7)
    edit.save_pretrained(tmp_path / "adapter")

    before, edited, peft_side = _sdk_and_peft(clip, edit, tmp_path)
    moved = edited - before
    assert float(moved.abs().max()) > 1e-4
    assert float((peft_side - before - moved).abs().max()) < 1e-6

    back = LoraEdit.from_pretrained(tmp_path / "adapter")
    assert (back.rank, back.lora_alpha, back.strength, back.losses) == (edit.rank, edit.lora_alpha, 0.7, edit.losses)
    assert back.meta == edit.meta and back.factors.keys() == edit.factors.keys()
    assert all(torch.equal(back.factors[n][i], edit.factors[n][i]) for n in edit.factors for i in (0, 1))


def _peft_folder(encoder, folder: Path, native=None, **config) -> PeftModel:
    """A LoRA adapter trained "elsewhere": made and saved by peft itself on the native model (random B);
    peft records the folder the native model was loaded from as the base model."""
    targets = rf"{media_prefix(encoder)}\..*\.({'|'.join(map(re.escape, encoder.lora_targets))})"  # media tower q, v
    defaults = dict(r=2, lora_alpha=3.0, target_modules=targets, init_lora_weights=False)
    native = _native(encoder, folder / "native") if native is None else native
    model = get_peft_model(native, LoraConfig(**{**defaults, **config}))
    torch.manual_seed(3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.3)
    model.save_pretrained(str(folder / "adapter"))
    return model.eval()


@pytest.mark.parametrize("family, config", [
    ("clip", {}),
    ("clip", {"use_rslora": True, "rank_pattern": {"layers.0.self_attn.q_proj": 3}, "alpha_pattern": {"v_proj": 5.0}}),
    ("siglip", {}),
    ("clap-htsat-unfused", {}),
])
def test_a_folder_written_by_peft_is_the_same_edit(family, config, tmp_path):
    """From a folder or a live PeftModel, the SDK's edit is peft's model (1e-5); per-module ranks and alphas
    and rsLoRA scales are folded into B."""
    torch.manual_seed(0)
    encoder = ps.from_config(family)
    peft_model = _peft_folder(encoder, tmp_path, **config)
    batch = encoder.preprocess(_items(encoder))
    native = _native_embeddings(peft_model, encoder, batch)
    with torch.no_grad():
        assert float((encoder.encode_media(batch) - native).abs().max()) > 0.05  # the adapter moves embeddings
    for source in (tmp_path / "adapter", peft_model):
        edit = LoraEdit.from_pretrained(source, encoder)
        with torch.no_grad(), edit.applied_to(encoder):
            edited = encoder.encode_media(batch)
        assert float((edited - native).abs().max()) < 1e-5


def test_utd_compute_takes_an_adapter_as_the_fine_tuned_side(clip, tmp_path):
    """A folder, a PeftModel and an Edit give the UTD of the encoder with the edit folded into a copy."""
    peft_model = _peft_folder(clip, tmp_path)
    grid = ImageWorld(train_per_class=4, test_per_class=3).task("small_shapes").grid(2, 0)
    state = _state(clip)
    folded = copy.deepcopy(clip)
    LoraEdit.from_pretrained(tmp_path / "adapter", clip).apply(folded)
    expected = UTD.compute(clip, folded, grid)
    assert float(expected.matrix.abs().max()) > 1e-3
    for ft in (str(tmp_path / "adapter"), peft_model, LoraEdit.from_pretrained(peft_model, clip)):
        assert torch.allclose(UTD.compute(clip, ft, grid).matrix, expected.matrix, atol=1e-5)
    assert _unchanged(clip, state)


def test_adapters_of_other_models_or_modules_are_refused_and_change_nothing(clip, tmp_path):
    state = _state(clip)
    both_towers = _peft_folder(clip, tmp_path / "both", target_modules=["q_proj", "v_proj"])
    with pytest.raises(PlatonicError, match="outside the media tower 'vision_model'"):
        LoraEdit.from_pretrained(tmp_path / "both" / "adapter", clip)
    with pytest.raises(PlatonicError, match="outside the media tower"):
        UTD.compute(clip, both_towers, ImageWorld(train_per_class=4, test_per_class=3).task("small_shapes").grid(2, 0))

    mlp = tmp_path / "mlp"
    _peft_folder(clip, mlp, target_modules=r".*vision_model.*\.fc1")
    wide = ps.from_config("clip", {"vision_config": {"hidden_size": 48, "intermediate_size": 96}})
    shallow = ps.from_config("clip", {"vision_config": {"num_hidden_layers": 1}})
    states = [_state(wide), _state(shallow)]
    with pytest.raises(ShapeError, match="does not match the LoRA product"):
        LoraEdit.from_pretrained(mlp / "adapter", wide)
    with pytest.raises(PlatonicError, match="has no module 'encoder.layers.1.mlp.fc1'"):
        LoraEdit.from_pretrained(mlp / "adapter", shallow)
    assert _unchanged(clip, state) and _unchanged(wide, states[0]) and _unchanged(shallow, states[1])


def test_an_adapter_for_another_base_checkpoint_is_refused(tmp_path):
    torch.manual_seed(0)
    ps.from_config("clip").save(str(tmp_path / "clip"))
    encoder = ps.load("clip", str(tmp_path / "clip"))
    state = _state(encoder)
    _peft_folder(encoder, tmp_path / "other")
    config_file = tmp_path / "other" / "adapter" / "adapter_config.json"
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), "base_model_name_or_path": "org/other-model"}))
    with pytest.raises(CheckpointError, match="adapter of 'org/other-model'.*allow_other_base"):
        LoraEdit.from_pretrained(config_file.parent, encoder)
    assert LoraEdit.from_pretrained(config_file.parent, encoder, allow_other_base=True).factors
    assert _unchanged(encoder, state)


def test_a_saved_edit_is_refused_by_another_family_and_by_a_misfitting_apply(clip, tmp_path):
    edit = LoraEdit(_random_factors(clip), rank=2, lora_alpha=4.0)
    edit.save_pretrained(tmp_path / "adapter", clip)
    torch.manual_seed(0)
    metaclip = ps.from_config("metaclip")
    with pytest.raises(PlatonicError, match="adapter of a 'clip' model, not of 'metaclip'"):
        LoraEdit.from_pretrained(tmp_path / "adapter", metaclip)

    wide = ps.from_config("clip", {"vision_config": {"hidden_size": 48, "intermediate_size": 96}})
    state = _state(wide)
    loaded = LoraEdit.from_pretrained(tmp_path / "adapter")  # no encoder: the folder records the tower's path
    with pytest.raises(ShapeError):
        loaded.apply(wide)
    assert not loaded.applied and _unchanged(wide, state)


def test_unsupported_peft_features_are_refused(clip, tmp_path):
    _peft_folder(clip, tmp_path, use_dora=True)
    with pytest.raises(PlatonicError, match="use_dora"):
        LoraEdit.from_pretrained(tmp_path / "adapter", clip)
    os.remove(tmp_path / "adapter" / "adapter_model.safetensors")
    with pytest.raises(CheckpointError, match="no adapter_model.safetensors"):
        LoraEdit.from_pretrained(tmp_path / "adapter", clip)
    with pytest.raises(CheckpointError, match="not a peft adapter folder"):
        LoraEdit.from_pretrained(tmp_path, clip)


# ---------------------------------------------------------------------------- the command line
def _run(work: Path, *args: str) -> int:
    old = Path.cwd()
    os.chdir(work)
    try:
        return cli.main([*args])
    finally:
        os.chdir(old)


def test_cli_utd_reads_an_adapter_and_its_own_saved_finetune(tmp_path, capsys):
    torch.manual_seed(0)
    ps.from_config("clip").save(str(tmp_path / "pre"))
    pre = ps.load("clip", str(tmp_path / "pre"))
    _peft_folder(pre, tmp_path / "elsewhere", native=type(pre.model).from_pretrained(tmp_path / "pre"))
    grid = ImageWorld(train_per_class=4, test_per_class=3).task("small_shapes").grid(2, 0)
    common = ["--family", "clip", "--checkpoint", "pre", "--task", "small_shapes", *WORLD]

    assert _run(tmp_path, "utd", *common, "--ft-adapter", "elsewhere/adapter", "-o", "a.safetensors") == 0
    expected = UTD.compute(pre, str(tmp_path / "elsewhere" / "adapter"), grid)
    assert torch.allclose(UTD.load(tmp_path / "a.safetensors").matrix, expected.matrix, atol=1e-6)

    assert _run(tmp_path, "utd", *common, "--finetune", "--max-steps", "2", "--lr", "1e-2",
                "--save-finetune", "ft.safetensors", "-o", "b.safetensors") == 0
    assert _run(tmp_path, "utd", *common, "--ft-checkpoint", "ft.safetensors", "-o", "c.safetensors") == 0
    b, c = UTD.load(tmp_path / "b.safetensors"), UTD.load(tmp_path / "c.safetensors")
    assert float(b.matrix.abs().max()) > 1e-4 and torch.allclose(b.matrix, c.matrix, atol=1e-6)

    capsys.readouterr()
    assert _run(tmp_path, "utd", *common, "--ft-checkpoint", "elsewhere/adapter", "-o", "x.safetensors") == 2
    assert "pass it as --ft-adapter" in capsys.readouterr().err
    assert _run(tmp_path, "utd", *common, "--ft-adapter", "elsewhere/adapter", "--finetune", "-o", "x.safetensors") == 2
    assert "exactly one of" in capsys.readouterr().err
    assert not (tmp_path / "x.safetensors").exists()


def test_cli_uses_the_shipped_zoo_finetunes(tmp_path):
    """`--ft-checkpoint` of a zoo fine-tune (a task vector) on the zoo member gives FineTuned.utd's descriptor."""
    zoo = Path(ps.worlds.__file__).parent / "zoo"
    member, vector = zoo / "clip", zoo / "finetunes" / "clip" / "amber_shapes.safetensors"
    assert _run(tmp_path, "utd", "--family", "clip", "--checkpoint", str(member), "--ft-checkpoint", str(vector),
                "--task", "amber_shapes", *WORLD, "-o", "zoo.safetensors") == 0
    pre = ps.load("clip", str(member))
    grid = ImageWorld(train_per_class=4, test_per_class=3).task("amber_shapes").grid(2, 0)
    expected = FineTuned.load(vector, pre).utd(grid)
    got = UTD.load(tmp_path / "zoo.safetensors")
    assert float(expected.matrix.abs().max()) > 1e-3 and torch.allclose(got.matrix, expected.matrix, atol=1e-6)


def test_cli_save_model_takes_the_target_from_the_bank(tmp_path):
    """edit --bank ... --save-model without --family/--checkpoint: the bank's target, edited."""
    torch.manual_seed(0)
    ps.from_config("clip").save(str(tmp_path / "pre"))
    pre = ps.load("clip", str(tmp_path / "pre"))
    _peft_folder(pre, tmp_path / "elsewhere", native=type(pre.model).from_pretrained(tmp_path / "pre"))
    common = ["--task", "small_shapes", *WORLD]
    assert _run(tmp_path, "utd", "--family", "clip", "--checkpoint", "pre", "--ft-adapter", "elsewhere/adapter", *common, "-o", "a.safetensors") == 0
    assert _run(tmp_path, "bank", "--family", "clip", "--checkpoint", str(tmp_path / "pre"), "--descriptor", "a.safetensors", *common, "-o", "bank.safetensors") == 0
    assert _run(tmp_path, "edit", "--bank", "bank.safetensors", "--add", "a", "--strength", "0.5", "-o", "e.safetensors", "--save-model", "edited", "--quiet") == 0
    saved = ps.load("clip", str(tmp_path / "edited"))
    edit = Edit.load(tmp_path / "e.safetensors")
    batch = pre.preprocess(_items(pre))
    with torch.no_grad(), edit.applied_to(pre):
        expected = pre.encode_media(batch)
    with torch.no_grad():
        assert float((saved.encode_media(batch) - expected).abs().max()) < 1e-6

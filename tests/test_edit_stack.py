"""Edit stacks and binding: operator edits, LoRA edits and task vectors applied and removed in any order.

Every expected state is a *fresh application* of the remaining edits, in order, to an untouched copy of
the base model (a new stack that never saw a removal), compared bit for bit with the whole state dict.
"""

from __future__ import annotations

import copy
import gc
import json
import random
import weakref

import pytest
import torch

import platonic_sdk as ps
from platonic_sdk.cli import main as cli
from platonic_sdk.errors import PlatonicError, ShapeError, TargetMismatchError
from platonic_sdk.finetune import TaskVector
from platonic_sdk.finetune.weightspace import named_tensors
from platonic_sdk.io import load_tensors
from platonic_sdk.protocol import stack
from platonic_sdk.protocol.binding import Target
from platonic_sdk.protocol.stack import WeightsChangedError
from platonic_sdk.transfer import Edit, OperatorEdit
from platonic_sdk.transfer.lora import LoraEdit, LoraRouteConfig, fit_lora
from platonic_sdk.worlds.image import ImageWorld

SMALL = {"vision_config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2}}


def _encoder(seed: int = 0, family: str = "clip"):
    return ps.from_config(family, SMALL, seed=seed).eval()


def _state(encoder) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in encoder.model.state_dict().items()}


def _same(encoder, state) -> bool:
    now = encoder.model.state_dict()
    return set(now) == set(state) and all(torch.equal(now[k], v) for k, v in state.items())


def _lora_names(encoder) -> list[str]:
    return [n for n, _ in encoder.media_encoder.named_modules() if n.endswith(tuple(encoder.lora_targets))]


# -- edit recipes: each builds a fresh, equivalent edit object, so one edit can be applied to many copies
class Recipe:
    """One edit: `apply(model)` gives a handle (applied), `remove(handle)` takes it out."""

    def __init__(self, kind: str, seed: int, encoder):
        gen = torch.Generator().manual_seed(seed)
        self.kind = kind
        site = encoder.last_affine()
        if kind == "operator":
            self.A = 0.3 * torch.randn(site.out_dim, site.in_dim, generator=gen)
            self.alpha = float(torch.rand(1, generator=gen)) + 0.2
            self.site_kind = site.kind
        elif kind == "lora":
            factors = {}
            for name in _lora_names(encoder)[: 1 + seed % 3]:
                w = encoder.media_encoder.get_submodule(name).weight
                factors[name] = (torch.randn(2, w.shape[1], generator=gen), 0.1 * torch.randn(w.shape[0], 2, generator=gen))
            self.factors = factors
            self.strength = float(torch.rand(1, generator=gen)) + 0.5
        else:  # a task vector on the whole model, touching the projection site and LoRA-adapted weights too
            live = named_tensors(encoder.model)
            site_names = [n for n, t in live.items() if any(t is s for s in site.tensors().values())]
            names = site_names + [n for n in live if any(f"{m}.weight" in n for m in _lora_names(encoder)[:2])]
            self.deltas = {n: 0.01 * torch.randn(live[n].shape, generator=gen) for n in names}
            self.strength = float(torch.rand(1, generator=gen)) + 0.1

    def apply(self, encoder):
        if self.kind == "operator":
            return OperatorEdit(self.A, self.alpha, self.site_kind).apply(encoder)
        if self.kind == "lora":
            return LoraEdit(self.factors, 2, 4.0, self.strength).apply(encoder)
        return TaskVector(self.deltas).apply_to(encoder.model, self.strength)

    @staticmethod
    def remove(handle) -> None:
        handle.undo() if hasattr(handle, "undo") else handle.remove()


def _fresh(pristine, recipes: list[Recipe]) -> dict[str, torch.Tensor]:
    """State dict of an untouched copy of the base with `recipes` applied in order."""
    model = copy.deepcopy(pristine)
    for r in recipes:
        r.apply(model)
    return _state(model)


@pytest.fixture(scope="module")
def pristine():
    return _encoder(0)


def test_every_edit_kind_changes_the_weights(pristine):
    model = copy.deepcopy(pristine)
    base = _state(model)
    for i, kind in enumerate(("operator", "lora", "task_vector")):
        handle = Recipe(kind, i, model).apply(model)
        assert not _same(model, base), kind
        Recipe.remove(handle)
        assert _same(model, base), kind


def test_out_of_order_removal_matches_a_fresh_application(pristine):
    """The bug of issue 12: apply A, apply B, remove A used to restore A's snapshot and wipe B."""
    model = copy.deepcopy(pristine)
    base = _state(model)
    a, b = Recipe("operator", 1, model), Recipe("task_vector", 2, model)
    ha, hb = a.apply(model), b.apply(model)
    ha.remove()
    assert not ha.applied and hb.active
    assert _same(model, _fresh(pristine, [b]))
    assert not _same(model, base)  # B is still there
    hb.undo()
    assert _same(model, base)


def test_hand_computed_stack_of_task_vector_then_operator(pristine):
    """W_p after tau (strength c) then operator A (alpha): (I + alpha A)(W + c tau), by hand in float64."""
    model = copy.deepcopy(pristine)
    W = model.last_affine().weight.detach().clone()
    op, tv = Recipe("operator", 3, model), Recipe("task_vector", 4, model)
    name = next(n for n, t in named_tensors(model.model).items() if t is model.last_affine().weight)
    tv.apply(model)
    op.apply(model)
    step = (W.double() + tv.strength * tv.deltas[name].double()).float()
    expected = (step.double() + (op.alpha * op.A.double()) @ step.double()).float()
    assert torch.equal(model.last_affine().weight, expected)


@pytest.mark.parametrize("seed", range(6))
def test_random_mixed_stacks_always_equal_base_plus_the_rest(pristine, seed):
    """Seeded property test: random applies and removals of 2-5 mixed edits, checked after every step."""
    _random_stack(pristine, seed)


@pytest.mark.parametrize("family", ["siglip", "openclip"])  # a residual-head site; an in_out projection
def test_random_mixed_stacks_on_other_sites(family):
    model = ps.from_config(family, seed=0).eval()
    for seed in range(2):
        _random_stack(model, 50 + seed)


def _random_stack(pristine, seed: int) -> None:
    rng = random.Random(seed)
    model = copy.deepcopy(pristine)
    base = _state(model)
    n = rng.randint(2, 5)
    recipes = [Recipe(rng.choice(("operator", "lora", "task_vector")), 100 * seed + i, model) for i in range(n)]
    live: list[tuple[Recipe, object]] = []
    for recipe in recipes:  # apply all, with a random removal now and then
        live.append((recipe, recipe.apply(model)))
        if len(live) > 1 and rng.random() < 0.3:
            recipe_out, handle = live.pop(rng.randrange(len(live)))
            Recipe.remove(handle)
        assert _same(model, _fresh(pristine, [r for r, _ in live]))
    while live:  # then remove the rest in a random order
        _, handle = live.pop(rng.randrange(len(live)))
        Recipe.remove(handle)
        assert _same(model, _fresh(pristine, [r for r, _ in live]))
    assert _same(model, base)
    assert stack.applied(model.model) == []


def test_applied_to_contexts_nest_and_interleave(pristine):
    model = copy.deepcopy(pristine)
    base = _state(model)
    a, b = Recipe("operator", 5, model), Recipe("lora", 6, model)
    ea, eb = OperatorEdit(a.A, a.alpha), LoraEdit(b.factors, 2, 4.0, b.strength)
    with ea.applied_to(model):
        with eb.applied_to(model):
            assert _same(model, _fresh(pristine, [a, b]))
        assert _same(model, _fresh(pristine, [a]))
    assert _same(model, base)
    with ea.applied_to(model):
        eb.apply(model)  # outlives the context: leaving it takes out a, which sits below b
    assert eb.applied and not ea.applied
    assert _same(model, _fresh(pristine, [b]))
    assert eb.remove() is model
    assert _same(model, base)


def test_weights_changed_behind_the_stack_are_refused(pristine):
    model = copy.deepcopy(pristine)
    a, b = Recipe("operator", 7, model), Recipe("lora", 8, model)
    ha = a.apply(model)
    with torch.no_grad():
        model.last_affine().weight[0, 0] += 1.0  # e.g. an optimizer step or load_state_dict
    tampered = _state(model)
    with pytest.raises(WeightsChangedError, match="changed outside the SDK"):
        b.apply(model)
    assert _same(model, tampered)
    with pytest.raises(WeightsChangedError, match="changed outside the SDK"):
        ha.remove()
    assert _same(model, tampered) and ha.applied
    stack.forget(model.model)  # the way out: today's weights become the base
    assert not ha.applied
    hb = b.apply(model)
    hb.remove()
    assert _same(model, tampered)


def test_a_model_with_applied_edits_is_freed(pristine):
    model = copy.deepcopy(pristine)
    handle = Recipe("task_vector", 9, model).apply(model)
    edit = Recipe("operator", 10, model).apply(model)
    ref = weakref.ref(model.model)
    del model
    gc.collect()
    assert ref() is None
    assert handle.active and edit.applied  # their stack outlives the model, harmlessly
    assert edit.remove() is None


def test_an_update_that_fails_changes_nothing(pristine):
    """Whatever goes wrong inside an apply (here: a shape the site cannot take), the stack is as before."""
    model = copy.deepcopy(pristine)
    a = Recipe("operator", 11, model)
    a.apply(model)
    before = _state(model)
    with pytest.raises(ShapeError):
        OperatorEdit(a.A[:, :-1], 0.5).apply(model)
    with pytest.raises(PlatonicError, match="already applied"):
        edit = OperatorEdit(a.A, 0.1).apply(model, allow_twice=True)  # a's operator again, at another strength
        edit.apply(model)
    edit.remove()
    assert _same(model, before)


@pytest.mark.parametrize("when", ["apply", "remove"])
def test_an_interrupt_halfway_through_a_write_changes_nothing(pristine, monkeypatch, when):
    """Ctrl-C after some tensors were written: the stack rewrites base + its edits, and stays usable."""
    model = copy.deepcopy(pristine)
    a, b = Recipe("task_vector", 14, model), Recipe("operator", 15, model)
    ha = a.apply(model)
    hb = b.apply(model) if when == "remove" else None
    before = _state(model)
    tracked = len(stack.stack_of(named_tensors(model.model).values())._tracked)
    real_digest, calls, midway = stack.digest, [], []

    def interrupted(tensor):
        calls.append(1)
        if len(calls) == tracked + 1:  # verify() digested every tracked tensor; the copies are done
            midway.append(not _same(model, before))
            raise KeyboardInterrupt
        return real_digest(tensor)

    monkeypatch.setattr(stack, "digest", interrupted)
    with pytest.raises(KeyboardInterrupt):
        b.apply(model) if when == "apply" else ha.undo()
    monkeypatch.undo()
    assert midway == [True]  # the interrupt came with new values already in the weights
    assert _same(model, before)
    assert ha.active and (hb is None or hb.applied)
    ha.undo()
    assert _same(model, _fresh(pristine, [b] if hb else []))


# -- binding ---------------------------------------------------------------------------------------
def _bank_edit(encoder, alpha: float = 0.5):
    task = ImageWorld(train_per_class=2, test_per_class=2).task("small_shapes")
    grid = task.grid(2, 0)
    bank = ps.OperatorBank(encoder, ridge_a=1e-2, ridge_b=1e-3)
    bank.add_grid(grid)
    utd = ps.UTD(0.05 * torch.randn(grid.shape, generator=torch.Generator().manual_seed(1)), grid.identity, grid.task)
    return bank.edit(utd, alpha)


def test_an_edit_refuses_other_models_naming_both(pristine):
    edit = _bank_edit(pristine)
    assert edit.target.family == "clip" and edit.target.embed_dim == pristine.embed_dim
    other_seed = _encoder(1)
    other_family = _encoder(0, "metaclip")  # same architecture and width
    for other, words in ((other_seed, "clip"), (other_family, "metaclip")):
        before = _state(other)
        with pytest.raises(TargetMismatchError, match="allow_other_target") as err:
            edit.apply(other)
        assert "made for clip" in str(err.value) and f"this model, {words}" in str(err.value)
        assert _same(other, before) and not edit.applied
        with edit.applied_to(other, allow_other_target=True):
            assert not _same(other, before)
        assert _same(other, before)


def test_binding_is_to_the_base_weights(pristine):
    """An edit made on a model that carries another edit still binds to (and applies to) that model."""
    model = copy.deepcopy(pristine)
    base = _state(model)
    first = Recipe("task_vector", 12, model).apply(model)
    on_top = _bank_edit(model)
    first.undo()
    with on_top.applied_to(model):  # the base alone
        pass
    assert _same(model, base)
    again = Recipe("operator", 13, model).apply(model)
    on_top.apply(model)  # and on top of another edit
    on_top.remove()
    again.remove()
    assert _same(model, base)


def test_lora_route_and_task_vectors_bind_too(pristine):
    grid = ImageWorld(train_per_class=2, test_per_class=2).task("small_shapes").grid(2, 0)
    utd = ps.UTD(0.05 * torch.randn(grid.shape, generator=torch.Generator().manual_seed(2)), grid.identity, grid.task)
    lora = fit_lora(pristine, utd, [grid], LoraRouteConfig(max_steps=2, epochs=1, batch_size=8), progress=False)
    other, siglip = _encoder(1), _encoder(0, "siglip")  # SigLIP's tower has CLIP's module names and shapes
    for model, family in ((other, "clip"), (siglip, "siglip")):
        before = _state(model)
        with pytest.raises(TargetMismatchError, match=f"made for clip.*this model, {family}"):
            lora.apply(model)
        assert _same(model, before)
    lora.apply(pristine)
    lora.remove()

    tau = TaskVector.from_models(pristine.media_encoder, other.media_encoder)
    third = _encoder(2)
    before = _state(third)
    with pytest.raises(TargetMismatchError, match="task vector|TaskVector"):
        tau.apply_to(third.media_encoder)
    assert _same(third, before)
    tau.apply_to(third.media_encoder, allow_other_target=True).undo()
    assert _same(third, before)


def test_targets_survive_files(pristine, tmp_path):
    edit = _bank_edit(pristine)
    edit.save(tmp_path / "e.safetensors")
    back = Edit.load(tmp_path / "e.safetensors")
    assert back.target == edit.target and back.identity == edit.identity
    tau = TaskVector.from_models(pristine.media_encoder, _encoder(1).media_encoder, metadata={"task": "t"})
    tau.save(tmp_path / "tau.safetensors")
    loaded = TaskVector.load(tmp_path / "tau.safetensors")
    assert loaded.target == tau.target and loaded.metadata == {"task": "t"}
    assert Target.from_record(None) is None


def test_a_saved_edited_checkpoint_refuses_its_folded_edits(pristine, tmp_path):
    model = copy.deepcopy(pristine)
    edit = _bank_edit(model)
    tau = TaskVector({n: 0.01 * torch.ones_like(t) for n, t in named_tensors(model.media_encoder).items() if "fc1.weight" in n})
    with edit.applied_to(model), tau.apply_to(model.media_encoder, 0.5):
        model.save(str(tmp_path / "edited"))
    marker = json.loads((tmp_path / "edited" / "platonic.json").read_text())
    assert [r["identity"] for r in marker["folded_edits"]] == [edit.identity, tau.identity]
    loaded = ps.load("clip", str(tmp_path / "edited"))
    before = _state(loaded)
    for attempt in (edit, edit.scaled(0.1)):  # the same edit at any strength
        with pytest.raises(PlatonicError, match="already has this edit folded in"):
            attempt.apply(loaded, allow_other_target=True)
        assert _same(loaded, before)
    # saving the loaded checkpoint again keeps the record
    loaded.save(str(tmp_path / "again"))
    assert json.loads((tmp_path / "again" / "platonic.json").read_text())["folded_edits"] == marker["folded_edits"]


WORLD = ["--train-per-class", "2", "--test-per-class", "2", "--per-class", "2", "--quiet"]


def _cli(capsys, *args: str) -> tuple[int, str]:
    try:
        status = cli.main(list(args))
    except SystemExit as exc:
        status = exc.code
    return status, capsys.readouterr().err


def test_cli_evaluate_refuses_folded_and_foreign_edits(pristine, tmp_path, capsys):
    edit = _bank_edit(pristine)
    edit.save(tmp_path / "e.safetensors")
    pristine.save(str(tmp_path / "pre"))
    _encoder(1).save(str(tmp_path / "other"))
    with edit.applied_to(pristine):
        pristine.save(str(tmp_path / "edited"))
    files = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    common = ["--family", "clip", "--task", "small_shapes", *WORLD, "--edit", str(tmp_path / "e.safetensors")]
    status, err = _cli(capsys, "evaluate", "--checkpoint", str(tmp_path / "edited"), *common)
    assert status == 2 and "platonic evaluate: error:" in err and "already has this edit folded in" in err
    status, err = _cli(capsys, "evaluate", "--checkpoint", str(tmp_path / "other"), *common)
    assert status == 2 and "was made for clip" in err and "--allow-other-target" in err
    status, _ = _cli(capsys, "evaluate", "--checkpoint", str(tmp_path / "other"), *common, "--allow-other-target", "--json")
    assert status == 0
    status, _ = _cli(capsys, "evaluate", "--checkpoint", str(tmp_path / "pre"), *common, "--json")
    assert status == 0
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == files


def test_cli_bank_records_its_target_and_edit_refuses_other_checkpoints(pristine, tmp_path, capsys):
    pristine.save(str(tmp_path / "pre"))
    _encoder(1).save(str(tmp_path / "other"))
    tuned = copy.deepcopy(pristine)
    with torch.no_grad():
        for p in tuned.media_encoder.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(3)))
    tuned.save(str(tmp_path / "ft"))
    pre, task = ["--family", "clip", "--checkpoint", str(tmp_path / "pre")], ["--task", "small_shapes", *WORLD]
    a, bank = str(tmp_path / "a.safetensors"), str(tmp_path / "bank.safetensors")
    assert _cli(capsys, "utd", *pre, "--ft-checkpoint", str(tmp_path / "ft"), *task, "-o", a)[0] == 0
    assert _cli(capsys, "bank", *pre, "--descriptor", a, *task, "-o", bank)[0] == 0
    _, meta, _ = load_tensors(bank)
    loaded = ps.load("clip", str(tmp_path / "pre"))
    assert meta["target"] == Target.of_encoder(loaded, loaded.last_affine().tensors()).describe()

    other = ["--family", "clip", "--checkpoint", str(tmp_path / "other")]
    out, e = tmp_path / "edited", str(tmp_path / "e.safetensors")
    status, err = _cli(capsys, "edit", "--bank", bank, "--add", "a", *other, "--save-model", str(out))
    assert status == 2 and "was made for clip" in err and not out.exists()
    status, _ = _cli(capsys, "edit", "--bank", bank, "--add", "a", *other, "--save-model", str(out), "-o", e, "--allow-other-target")
    assert status == 0
    assert [r["identity"] for r in json.loads((out / "platonic.json").read_text())["folded_edits"]] == [Edit.load(e).identity]
    status, err = _cli(capsys, "evaluate", "--family", "clip", "--checkpoint", str(out), *task, "--edit", e, "--allow-other-target")
    assert status == 2 and "already has this edit folded in" in err


def test_a_folded_task_vector_makes_a_new_base(pristine):
    """fold_into (how fine-tunes load): theta + tau becomes the model itself, with no stack and no base copy."""
    model = copy.deepcopy(pristine)
    tv = Recipe("task_vector", 16, model)
    expected = _fresh(pristine, [tv])
    TaskVector(tv.deltas).fold_into(model.model, tv.strength)
    assert _same(model, expected) and stack.applied(model.model) == []
    edit = Recipe("operator", 17, model).apply(model)
    assert torch.equal(stack.base_values(model.last_affine().tensors())["weight"], expected["visual_projection.weight"])
    with pytest.raises(PlatonicError, match="without applied edits"):
        TaskVector(tv.deltas).fold_into(model.model, tv.strength)
    assert _same(model, _fresh(pristine, [tv, Recipe("operator", 17, model)]))
    edit.remove()
    assert _same(model, expected)

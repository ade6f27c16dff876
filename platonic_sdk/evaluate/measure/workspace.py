"""A zoo under evaluation: models, tasks, fine-tunes, and every cache the cells and studies share.

Each (model, item) pair is encoded at most once: target probes through the model's operator bank,
test and control splits through `FeatureCache`s, fine-tuned probes through one cache keyed by
(family, fine-tune task, grid task). Each item set is preprocessed once per family (`inputs`, an
`accel.Prepared` set): the family's fine-tunes and edited copies (LoRA cells, weight-space edits)
encode it from there. Everything afterwards is matrix products on cached rows: an operator A folded
at strength c moves raw embeddings exactly as z -> z + c A s.
"""

from __future__ import annotations

import contextlib
import hashlib
import warnings
from typing import Any, Callable, Literal, Mapping, Sequence, TypeVar

import attrs
import torch
from torch import Tensor

from ... import spaces
from ...data.keep import KeepSet
from ...descriptor import UTD
from ...edits.edit import Edit
from ...encoding.accel import Prepared
from ...encoding.features import encode_items
from ...encoding.features import landmarks as prompt_landmarks
from ...encoding.zeroshot import accuracy_of, predict
from ...errors import PlatonicError
from ...finetune.weightspace import TaskVector
from ...linalg import unit_rows
from ...protocol.encoder import DualEncoder
from ...ridge import RIDGE_A, RIDGE_B
from ...spaces import DEFAULT_SPACE
from ...tasks import Grid, Split, Task
from ...transfer.closed_form import GridState, OperatorBank
from ...worlds import zoo
from ...worlds.registry import world_spec
from .feature_cache import FeatureCache

T = TypeVar("T")
Source = DualEncoder | UTD  # a fine-tuned checkpoint of a family, or a ready descriptor of it


def fingerprint(source: "Source") -> str:
    """sha256 (16 hex digits) of a model's state dict (names, dtypes, shapes, bytes), or of a UTD's matrix."""
    digest = hashlib.sha256()
    tensors = {"matrix": source.matrix} if isinstance(source, UTD) else source.model.state_dict()
    for name, tensor in tensors.items():
        tensor = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()[:16]


def architecture_signature(encoder: DualEncoder) -> str:
    """Hash of the media tower's parameter names and shapes: equal iff weight-space arithmetic applies."""
    layout = [(name, tuple(p.shape)) for name, p in encoder.media_encoder.named_parameters()]
    return hashlib.sha256(repr(layout).encode()).hexdigest()[:16]


class Workspace:
    """Pretrained models by family, tasks by name, fine-tunes by (family, task), and shared caches.

    `finetuned[(family, task)]` is the family's fine-tuned encoder on that task (same text tower and
    preprocessing), or a UTD already computed on this workspace's grid of the task. `controls` name tasks whose
    test splits measure what edits break; they are never probed. `keep_splits[task]` holds the labelled items a user
    would hold of a task to keep it (`keep_set`; default: the task's train split; a replicate of a world of shipped
    items gives the whole train pool, of which its train split keeps only the probes).
    """

    def __init__(
        self,
        models: Mapping[str, DualEncoder],
        tasks: Mapping[str, Task],
        finetuned: Mapping[tuple[str, str], Source] | None = None,
        controls: Sequence[str] = (),
        *,
        per_class: int = 30,
        grid_seed: int = 0,
        ridge_a: float = RIDGE_A,
        ridge_b: float = RIDGE_B,
        batch_size: int = 64,
        task_vectors: Mapping[tuple[str, str], TaskVector] | None = None,
        keep_splits: Mapping[str, Split] | None = None,
        progress: bool = False,
    ) -> None:
        if not models:
            raise PlatonicError("a workspace needs at least one model")
        missing = [c for c in controls if c not in tasks]
        if missing:
            raise PlatonicError(f"control set(s) {missing} are not among the tasks ({', '.join(tasks)})")
        for family, task in dict(finetuned or {}):
            if family not in models or task not in tasks:
                raise PlatonicError(f"fine-tune ({family!r}, {task!r}) names an unknown family or task")
        if stray := [t for t in keep_splits or {} if t not in tasks]:
            raise PlatonicError(f"keep split(s) of {stray} name no task of the workspace ({', '.join(tasks)})")
        self.models = dict(models)
        self.tasks = dict(tasks)
        self.finetuned = dict(finetuned or {})
        self.controls = tuple(controls)
        self.per_class = int(per_class)
        self.grid_seed = int(grid_seed)
        self.ridge_a = float(ridge_a)
        self.ridge_b = float(ridge_b)
        self.batch_size = int(batch_size)
        self.progress = progress
        self._task_vectors = dict(task_vectors or {})
        self._keep_splits = dict(keep_splits or {})
        self._warned: set[tuple[type, str]] = set()
        self._grids: dict[str, Grid] = {}
        self._inputs: dict[tuple[str, str, str], Prepared] = {}
        self._banks: dict[str, OperatorBank] = {}
        self._eval: dict[tuple[str, str], FeatureCache] = {}
        self._landmarks: dict[tuple[str, str], Tensor] = {}
        self._ft_rows: dict[tuple[str, str, str], Tensor] = {}
        self._descriptors: dict[tuple[str, str], UTD] = {}
        self._ft_accuracy: dict[tuple[str, str], float] = {}
        self._arch: dict[str, str] = {}
        self._memo: dict[tuple[Any, ...], Any] = {}

    # ------------------------------------------------------------------ names
    @property
    def families(self) -> tuple[str, ...]:
        return tuple(self.models)

    @property
    def transfer_tasks(self) -> tuple[str, ...]:
        """Tasks with at least one fine-tune (controls excluded)."""
        have = {task for _, task in self.finetuned}
        return tuple(t for t in self.tasks if t in have and t not in self.controls)

    def sources_for(self, task: str) -> tuple[str, ...]:
        """Families holding a descriptor (or fine-tune) of `task`."""
        return tuple(f for f in self.models if (f, task) in self.finetuned)

    def _task(self, name: str) -> Task:
        try:
            return self.tasks[name]
        except KeyError:
            raise PlatonicError(f"unknown task {name!r}; this workspace has {', '.join(self.tasks)}") from None

    def _model(self, family: str) -> DualEncoder:
        try:
            return self.models[family]
        except KeyError:
            raise PlatonicError(f"unknown family {family!r}; this workspace has {', '.join(self.models)}") from None

    def settings(self) -> dict[str, object]:
        """Everything of the workspace that affects a run's numbers (recorded in its run folder)."""
        return {
            "families": list(self.families), "tasks": list(self.tasks), "controls": list(self.controls),
            "per_class": self.per_class, "grid_seed": self.grid_seed, "ridge_a": self.ridge_a, "ridge_b": self.ridge_b,
            "batch_size": self.batch_size,
            "fingerprints": {**{f: fingerprint(m) for f, m in self.models.items()},
                             **{f"{f}/{t}": fingerprint(s) for (f, t), s in self.finetuned.items()},
                             **{f"data/{t}": self.data_fingerprint(t) for t in self.tasks}},
        }

    def data_fingerprint(self, task: str) -> str:
        """The task's data as a run uses it: its probe grid's identity (which covers the probe items) and its
        test split's content; a task without train items has no grid."""
        probes = self.grid(task).identity if len(self._task(task).train) else "no-probes"
        return f"{probes} {self._task(task).test.content[:20]}"

    # ------------------------------------------------------------------ target side
    def grid(self, task: str) -> Grid:
        """The task's probe grid (shared by every model): per_class x M probes, seed grid_seed."""
        if task not in self._grids:
            self._grids[task] = self._task(task).grid(self.per_class, self.grid_seed)
        return self._grids[task]

    def inputs(self, family: str, task: str, split: Literal["grid", "test"]) -> Prepared:
        """The items of the task's probe grid or test split, preprocessed once for the family (kept while
        they fit in `accel.PREPARED_BYTES`): every model of the family encodes them from here, since a
        family's fine-tunes and edited copies preprocess as its pretrained model does."""
        key = (family, task, split)
        if key not in self._inputs:
            items = self.grid(task).items if split == "grid" else self._task(task).test.items
            self._inputs[key] = Prepared(self._model(family), items, self.batch_size)
        return self._inputs[key]

    def bank(self, family: str) -> OperatorBank:
        """The family's operator bank (one ridge factorisation per grid, built on demand); add grids
        through `grid_state`, which encodes them from the family's preprocessed `inputs`."""
        if family not in self._banks:
            self._banks[family] = OperatorBank(self._model(family), self.ridge_a, self.ridge_b, self.batch_size, self.progress)
        return self._banks[family]

    def grid_state(self, family: str, task: str) -> GridState:
        """The family's bank state of the task's grid: its probes encoded once, from `inputs`."""
        bank, grid = self.bank(family), self.grid(task)
        if grid.identity not in bank.grids:
            return bank.add_grid(attrs.evolve(grid, items=self.inputs(family, task, "grid")))
        return bank.state(grid.identity)

    def eval_set(self, family: str, task: str) -> FeatureCache:
        """Cached site inputs of the task's test split on the family's pretrained model."""
        key = (family, task)
        if key not in self._eval:
            test = self._task(task).test
            self._eval[key] = FeatureCache.build(self._model(family), self.inputs(family, task, "test"), test.labels,
                                                 batch_size=self.batch_size, progress=self.progress, meta={"task": task})
        return self._eval[key]

    def landmarks(self, family: str, task: str) -> Tensor:
        """The family's class landmarks of `task` (M x d): its prompt embeddings, the zero-shot head."""
        key = (family, task)
        if key not in self._landmarks:
            self._landmarks[key] = prompt_landmarks(self._model(family), self._task(task).prompts())
        return self._landmarks[key]


    def accuracy(self, family: str, task: str, A: Tensor | None = None, strength: float = 0.0) -> float:
        """Test accuracy (percent) of the family's model with `strength` A folded (no forward pass; `accuracies`)."""
        return self.accuracies(family, [task], A, strength)[task]

    def accuracies(self, family: str, names: Sequence[str], A: Tensor | None = None, strength: float = 0.0) -> dict[str, float]:
        """Test accuracy (percent) of each set of `names` with `strength` A folded. The prediction is argmax_j <z + c A s, g_j>
        over unit landmarks g_j (normalising the embedding moves no argmax): the unedited logits Z G^T (once per set) plus
        c S (G A)^T, a product as wide as the set's classes, not as the embedding."""
        out = {}
        for name in names:
            cache, G = self.eval_set(family, name), self.memo(("unit_landmarks", family, name), lambda: unit_rows(self.landmarks(family, name)))
            logits = self.memo(("logits", family, name), lambda: cache.raw_embeddings @ G.T)
            if A is not None and strength != 0:
                logits = logits + strength * (cache.site_inputs @ (G @ A.to(G.dtype)).T)
            out[name] = accuracy_of(logits.argmax(dim=1), cache.labels)
        return out

    # ------------------------------------------------------------------ source side
    def _finetune(self, family: str, task: str) -> Source:
        try:
            return self.finetuned[(family, task)]
        except KeyError:
            raise PlatonicError(f"no fine-tune or descriptor of task {task!r} for family {family!r}") from None

    def finetuned_rows(self, family: str, ft_task: str, grid_task: str, limit: int | None = None) -> Tensor:
        """Unit embeddings of grid(grid_task)'s probes (the first `limit`) under the family's fine-tune on ft_task."""
        full = (family, ft_task, grid_task)
        if full in self._ft_rows:
            return self._ft_rows[full][:limit]
        key = full if limit is None or limit >= self.grid(grid_task).shape[0] else (*full, limit)
        if key not in self._ft_rows:
            ft = self._finetune(family, ft_task)
            if isinstance(ft, UTD):
                raise PlatonicError(f"({family!r}, {ft_task!r}) is a stored descriptor; its fine-tuned model is not available")
            items = self.inputs(family, grid_task, "grid")
            self._ft_rows[key] = encode_items(ft, items if key == full else items.part(0, limit), self.batch_size, self.progress, cache=True)
        return self._ft_rows[key]

    def descriptor(self, family: str, task: str, space: str = DEFAULT_SPACE) -> UTD:
        """UTD of the family's fine-tune on `task`, on the task's grid (pretrained rows from the bank), in
        `space` (UTD.from_features; the spaces that need it read the family's logit scale)."""
        key = (family, task, space)
        if key not in self._descriptors:
            ft = self._finetune(family, task)
            grid = self.grid(task)
            if isinstance(ft, UTD):
                ft.check_grid(grid)
                if ft.space != space:
                    raise PlatonicError(f"({family!r}, {task!r}) is a stored {ft.space} descriptor; without the fine-tuned model "
                                        f"it cannot be recomputed in the {space} space")
                self._descriptors[key] = ft
            else:
                state = self.grid_state(family, task)
                f_ft = self.finetuned_rows(family, task, task)
                scale = self._model(family).logit_scale if spaces.space(space).needs_logit_scale else None
                self._descriptors[key] = UTD.from_features(unit_rows(state.raw_embeddings), f_ft, state.landmarks, grid, space, scale,
                                                           {"family": family})
        return self._descriptors[key]

    def keep_set(self, task: str) -> KeepSet | None:
        """The labelled keep set a user would hold of `task` (KeepSet.from_task of its keep split: by default its train
        split, never a scored test item), once per workspace; None when it holds no train item."""
        def made() -> KeepSet | None:
            found = self._task(task)
            split = self._keep_splits.get(task, found.train)
            return KeepSet.from_task(attrs.evolve(found, train=split), "train") if len(split) else None
        return self.memo(("keep_set", task), made)

    def warned_once(self, compute: Callable[[], T]) -> T:
        """compute(), each distinct warning it gives shown once per workspace: a run's cells would repeat the bank's
        warnings (a keep set too small to read with labels, nothing to keep) once per cell."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = compute()
        for w in caught:
            if (w.category, str(w.message)) not in self._warned:
                self._warned.add((w.category, str(w.message)))
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return value

    def anchor_tasks(self, tasks: Sequence[str]) -> tuple[str, ...]:
        """The transfer tasks that share no class name with any of `tasks` (they read other attributes):
        the probes an edit of `tasks` should leave in place. Controls and held-out tasks are never among them."""
        names = {c for t in tasks for c in self._task(t).classnames}
        return tuple(t for t in self.transfer_tasks if t not in tasks and not names & set(self._task(t).classnames))

    def solve_operator(self, target: str, descriptor: UTD, centre: bool = False, anchors: Sequence[str] = ()) -> Tensor:
        """Operator on `target` of any descriptor on a task grid (`centre`: row-centred; `anchors`: task
        names whose probes are held in place, OperatorBank.operator)."""
        self.grid_state(target, descriptor.task)
        return self.bank(target).operator(descriptor, centre, [self.grid_state(target, a).grid for a in anchors])

    def operator(self, target: str, source: str, task: str, centre: bool = False, anchors: Sequence[str] = (),
                 space: str = DEFAULT_SPACE) -> Tensor:
        """Operator on `target` of `source`'s descriptor of `task` in `space` (once per workspace, `memo`; `centre`,
        `anchors`: solve_operator)."""
        return self.memo(("operator", target, source, task, bool(centre), tuple(anchors), space),
                         lambda: self.solve_operator(target, self.descriptor(source, task, space), centre, anchors))

    def memo(self, key: tuple[Any, ...], compute: Callable[[], T]) -> T:
        """compute() once per `key`: for what a method derives from the workspace's fixed models, grids and
        fine-tunes alone (e.g. a baseline's per-term operator, shared by every cell with that term)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def random_operator(self, target: str, source: str, task: str, seed: int, centre: bool = False, anchors: Sequence[str] = (),
                        space: str = DEFAULT_SPACE) -> Tensor:
        """Random-UTD baseline: operator of a Gaussian descriptor with the norm of the source's descriptor in `space`
        (`centre`: the Gaussian descriptor is row-centred as the transferred one is; `anchors`: as its solve)."""
        return self.solve_operator(target, self.descriptor(source, task, space).random_like(seed), centre, anchors)

    def finetuned_accuracy(self, family: str, task: str) -> float | None:
        """Test accuracy of the family's own fine-tune on `task` (the normaliser); None when unavailable."""
        key = (family, task)
        if key not in self._ft_accuracy:
            ft = self.finetuned.get(key)
            if not isinstance(ft, DualEncoder):
                return None
            f = encode_items(ft, self.inputs(family, task, "test"), self.batch_size, self.progress, cache=True)
            self._ft_accuracy[key] = accuracy_of(predict(f, self.landmarks(family, task)), self._task(task).test.labels)
        return self._ft_accuracy[key]

    def adopt_finetuned_accuracies(self, known: Sequence[Sequence[Any]]) -> None:
        """Take [family, task, accuracy] rows measured before (a run folder's record) as `finetuned_accuracy`'s
        answers, so that a resumed run does not encode the fine-tunes' test splits again."""
        self._ft_accuracy.update({(family, task): acc for family, task, acc in known if acc is not None})

    # ------------------------------------------------------------------ weight space
    def architecture(self, family: str) -> str:
        if family not in self._arch:
            self._arch[family] = architecture_signature(self._model(family))
        return self._arch[family]

    def task_vector(self, family: str, task: str) -> TaskVector | None:
        """Media-tower task vector of the family's fine-tune (None when only a descriptor is known)."""
        key = (family, task)
        if key not in self._task_vectors:
            ft = self.finetuned.get(key)
            if not isinstance(ft, DualEncoder):
                return None
            self._task_vectors[key] = TaskVector.from_models(self._model(family).media_encoder, ft.media_encoder)
        return self._task_vectors[key]

    @torch.no_grad()
    def live_accuracies(self, family: str, names: Sequence[str], edit: Edit | None = None) -> dict[str, float]:
        """Accuracies from real forward passes of the family's model, with `edit` applied meanwhile (then removed)."""
        model = self._model(family)
        with edit.applied_to(model) if edit is not None else contextlib.nullcontext():
            out = {}
            for name in names:
                f = encode_items(model, self.inputs(family, name, "test"), self.batch_size, self.progress)
                out[name] = accuracy_of(predict(f, self.landmarks(family, name)), self._task(name).test.labels)
            return out

    @torch.no_grad()
    def weight_space_accuracies(self, target: str, vectors: Sequence[tuple[TaskVector, float]], names: Sequence[str]) -> dict[str, float]:
        """Accuracies of theta_target + sum_i c_i tau_i (same architecture); the target is restored after."""
        model = self._model(target)
        handles = []
        try:
            for vector, strength in vectors:
                # task arithmetic across models of one architecture: another target, deliberately
                handles.append(vector.apply_to(model.media_encoder, strength, allow_other_target=True))
            return self.live_accuracies(target, names)
        finally:
            for handle in reversed(handles):
                handle.undo()


def zoo_workspace(world: str, *, seed: int = 0, families: Sequence[str] | None = None, tasks: Sequence[str] | None = None,
                  controls: Sequence[str] | None = None, ridge_a: float | None = None, ridge_b: float | None = None,
                  device: str | None = None, train_per_class: int | None = None, test_per_class: int | None = None,
                  **options: Any) -> tuple[Workspace, dict[str, Any]]:
    """A registered world's shipped zoo as a Workspace, and a description of it.

    Members `families` (default: all), their fine-tunes on `tasks` (default: the world's transfer
    tasks), the held-out member of the world's trio and its controls (never probed). Ridges and controls
    left at None take the world's (its zoo's manifest: WorldSpec.settings()); `options` go to Workspace
    (per_class, grid_seed, batch_size, ...).
    """
    spec = world_spec(world)
    tuned = spec.settings()
    sizes = {k: v for k, v in (("train_per_class", train_per_class), ("test_per_class", test_per_class)) if v is not None}
    made = spec.make(seed=seed, **sizes)
    models = zoo.load_models(spec.zoo, names=families, device=device)
    names, controls = list(tasks or made.transfer_tasks), list(controls or tuned.controls)
    everything = {n: made.task(n) for n in dict.fromkeys([*names, made.trio[2], *controls])}
    ws = Workspace(models, everything, zoo.load_finetunes(models, names, spec.zoo), controls,
                   ridge_a=tuned.ridge_a if ridge_a is None else ridge_a, ridge_b=tuned.ridge_b if ridge_b is None else ridge_b, **options)
    manifest = zoo.read_manifest(spec.zoo)
    describe = {
        "world": f"{world}, seed {seed} ({len(names)} transfer tasks, held-out trio {' + '.join(made.trio[:2])} -> {made.trio[2]})",
        "zoo": ", ".join(f"{n} (d={manifest['members'][n]['embed_dim']})" for n in models),
        "world_seed": seed, "train_per_class": made.train_per_class, "test_per_class": made.test_per_class,
    }
    return ws, describe

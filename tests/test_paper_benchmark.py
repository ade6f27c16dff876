"""The paper's benchmarks as data (platonic_sdk.data.paper_benchmarks), and `platonic grid --benchmark`.

The spec is checked against docs/method.md's text (its sentences transcribed below: the templates, the
controls and their 10 images per class, the families of sec. 10) and against the datasets' own labels
as they lie on disk (transcribed below in their raw spelling: EuroSAT's CamelCase folders, CIFAR's
underscores), which fake layouts carry. The dry run runs the whole benchmark on the shipped zoo.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import dataset_layouts as layouts
import numpy as np
import pytest

from platonic_sdk.cli import main as cli
from platonic_sdk.data.benchmark import benchmark, load_benchmark
from platonic_sdk.data.folders import class_name
from platonic_sdk.errors import PlatonicError
from platonic_sdk.worlds.zoo import ZOO_DIR

# docs/method.md sec. 1, 2, 8, 9 and 10, verbatim (they restate the papers; test_method_md_states_the_specs checks the page)
METHOD_TEMPLATES = ('The authors use one template per task (e.g. EuroSAT "a centered satellite photo of {}.", DTD "a photo of '
                    'a {} texture.", GTSRB "a photo of a {} traffic sign.", MNIST/SVHN "a photo of the number {}.", RESISC45 '
                    '"a satellite photo of {}.", others "a photo of a {}.").')
METHOD_GRID = "Seed figure: across 6 families x 8 tasks, flattened UTDs of the *same task on different models*"
METHOD_CONTROLS = "**control sets** (paper: CIFAR-100 and ImageNet-val, 10 images per class) measure what the edit breaks"
METHOD_FAMILIES = ("clip = openai/clip-vit-large-patch14; openclip = laion/CLIP-ViT-L-14-laion2B-s32B-b82K;\n"
                   "metaclip = facebook/metaclip-l14-400m; siglip = google/siglip-large-patch16-256;\n"
                   "siglip2 = google/siglip2-large-patch16-256; evaclip = open_clip EVA02-L-14 / merged2b_s4b_b131k.")
METHOD_AUDIO = "Audio: four audio-text models of different widths/depths, two tasks composed, a third dataset held out."

# the datasets' labels as they are stored on disk
EUROSAT_FOLDERS = ("AnnualCrop", "Forest", "HerbaceousVegetation", "Highway", "Industrial", "Pasture", "PermanentCrop",
                   "Residential", "River", "SeaLake")
DTD_FOLDERS = tuple("banded blotchy braided bubbly bumpy chequered cobwebbed cracked crosshatched crystalline dotted fibrous "
                    "flecked freckled frilly gauzy grid grooved honeycombed interlaced knitted lacelike lined marbled matted "
                    "meshed paisley perforated pitted pleated polka-dotted porous potholed scaly smeared spiralled sprinkled "
                    "stained stratified striped studded swirly veined waffled woven wrinkled zigzagged".split())
RESISC45_FOLDERS = tuple("airplane airport baseball_diamond basketball_court beach bridge chaparral church circular_farmland cloud "
                         "commercial_area dense_residential desert forest freeway golf_course ground_track_field harbor "
                         "industrial_area intersection island lake meadow medium_residential mobile_home_park mountain overpass "
                         "palace parking_lot railway railway_station rectangular_farmland river roundabout runway sea_ice ship "
                         "snowberg sparse_residential stadium storage_tank tennis_court terrace thermal_power_station wetland".split())
CIFAR100_LABELS = tuple("apple aquarium_fish baby bear beaver bed bee beetle bicycle bottle bowl boy bridge bus butterfly camel can "
                        "castle caterpillar cattle chair chimpanzee clock cloud cockroach couch crab crocodile cup dinosaur dolphin "
                        "elephant flatfish forest fox girl hamster house kangaroo keyboard lamp lawn_mower leopard lion lizard "
                        "lobster man maple_tree motorcycle mountain mouse mushroom oak_tree orange orchid otter palm_tree pear "
                        "pickup_truck pine_tree plain plate poppy porcupine possum rabbit raccoon ray road rocket rose sea seal "
                        "shark shrew skunk skyscraper snail snake spider squirrel streetcar sunflower sweet_pepper table tank "
                        "telephone television tiger tractor train trout tulip turtle wardrobe whale willow_tree wolf woman "
                        "worm".split())
SPELLING = {"EuroSAT": EUROSAT_FOLDERS, "DTD": DTD_FOLDERS, "RESISC45": RESISC45_FOLDERS, "CIFAR-100": CIFAR100_LABELS}


def words(label: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", label).replace("_", " ").lower()


def templates_of_method() -> dict[str, str]:
    """{task: template} from docs/method.md's sentence; "others" under its own key."""
    out = {}
    for names, template in re.findall(r'([A-Za-z0-9/]+) "([^"]+)"', METHOD_TEMPLATES):
        out.update({name: template for name in names.split("/")})
    return out


def test_method_md_states_the_specs():
    """docs/method.md's sentences, written out from the benchmark specs and the families' reference checkpoints."""
    import platonic_sdk as ps

    flat = " ".join((Path(__file__).resolve().parents[1] / "docs" / "method.md").read_text().split())
    image, audio = benchmark("paper-image"), benchmark("paper-audio")
    by_template: dict[str, list[str]] = {}
    for task in image.tasks:
        by_template.setdefault(task.templates[0], []).append(task.name)
    others = max(by_template, key=lambda t: len(by_template[t]))  # the generic template: the doc says "others"
    for template, names in by_template.items():
        assert f'{"others" if template == others else "/".join(names)} "{template}"' in flat, names
    assert f"{len(image.families)} families x {len(image.tasks)} tasks" in flat
    controls = " and ".join(c.name for c in image.controls)
    assert re.search(rf"paper: {controls}\S*, {image.controls[0].per_class} images per class", flat), controls
    for family in image.families:
        checkpoint = ps.family(family).default_checkpoint
        stated = re.search(rf"\b{family} = ([^;]+)", flat).group(1)
        assert checkpoint in stated or checkpoint.replace(":", " / ") in stated, (family, checkpoint, stated)
    number = {2: "two", 3: "three", 4: "four"}
    assert f"{number[len(audio.families)]} audio-text models" in flat and f"{number[len(audio.tasks)]} tasks composed" in flat
    assert audio.held_out is not None and "a third dataset held out" in flat


def test_the_image_spec_is_method_md_s_tasks_templates_controls_and_families():
    bench = benchmark("paper-image")
    method = templates_of_method()
    assert len(bench.tasks) == int(re.search(r"x (\d+) tasks", METHOD_GRID).group(1)) == 8
    assert {"Cars", "SUN397"} <= {t.name for t in bench.tasks}  # the failure cases are tasks of the study
    assert {"EuroSAT", "DTD", "GTSRB", "MNIST", "SVHN", "RESISC45"} <= {t.name for t in bench.tasks}
    for task in bench.tasks:
        assert task.templates == (method.get(task.name, method["others"]),), task.name
    named, per_class = re.search(r"paper: (.+?), (\d+) images per class", METHOD_CONTROLS).groups()
    assert [c.name for c in bench.controls] == ["CIFAR-100", "ImageNet"] and named == "CIFAR-100 and ImageNet-val"
    assert all(c.per_class == int(per_class) == 10 and c.templates == (method["others"],) for c in bench.controls)
    assert bench.families == tuple(re.findall(r"(\w+) = ", METHOD_FAMILIES))
    assert bench.held_out is None


def test_class_names_are_the_datasets_labels_or_say_where_they_come_from():
    bench = benchmark("paper-image")
    sets = {s.name: s for s in bench.sets}
    for name, raw in SPELLING.items():
        assert sets[name].classnames == tuple(words(label) for label in raw), name
    assert len(sets["GTSRB"].classnames) == 43 and sets["GTSRB"].classnames[14] == "stop"
    assert sets["MNIST"].classnames == sets["SVHN"].classnames == tuple("0123456789")
    for name in ("Cars", "SUN397", "ImageNet"):  # names from the dataset's files
        assert sets[name].classnames is None and sets[name].classnames_from


def test_the_audio_spec_composes_two_tasks_and_holds_out_a_third():
    bench = benchmark("paper-audio")
    assert len(bench.families) == 4 and {"four", "two", "third"} <= set(METHOD_AUDIO.replace(",", "").split())
    assert [t.name for t in bench.tasks] == ["ESC-50", "UrbanSound8K"] and bench.related == ("ESC-50", "UrbanSound8K")
    held, esc = bench.held_out, bench.tasks[0]
    assert held.source == esc.source == "esc50" and held.folder == esc.folder
    assert not {*held.classnames} & {*esc.classnames} and len(esc.classnames) + len(held.classnames) == 50
    assert len(bench.tasks[1].classnames) == 10


# ------------------------------------------------------------------ fake layouts of the whole image study
def image_layouts(root: Path, cifar_test_per_class: int = 11) -> None:
    """Every dataset of paper-image under `root`, with all classes of the fixed-label sets (a few images each)."""
    layouts.eurosat(root, EUROSAT_FOLDERS, per_class=3)
    layouts.dtd(root, DTD_FOLDERS)
    layouts.gtsrb(root, train=[c for c in range(43) for _ in range(2)], test=list(range(43)))
    layouts.mnist(root, train=[c for c in range(10) for _ in range(2)], test=list(range(10)))
    layouts.svhn(root / "svhn", train=[c or 10 for c in range(10) for _ in range(2)], test=[c or 10 for c in range(10)])
    layouts.resisc45(root, RESISC45_FOLDERS, per_class=3)
    layouts.stanford_cars(root)
    layouts.sun397(root, partition=True, classes=("r/ring", "s/star"))  # words the zoo's tokenizer knows: distinct prompts
    layouts.cifar100(root, CIFAR100_LABELS, train=list(range(100)), test=[c for c in range(100) for _ in range(cifar_test_per_class)])
    layouts.imagenet_val(root / "imagenet", per_class=12)


def test_the_benchmark_reads_every_dataset_with_its_controls_drawn_per_class(tmp_path):
    image_layouts(tmp_path)
    loaded = load_benchmark("paper-image", tmp_path, seed=3)
    assert list(loaded.tasks) == ["Cars", "DTD", "EuroSAT", "GTSRB", "MNIST", "RESISC45", "SUN397", "SVHN", "CIFAR-100", "ImageNet"]
    assert loaded.tasks["SVHN"].test.labels.tolist() == list(range(10))  # SVHN's 10 is the digit 0
    assert loaded.tasks["SUN397"].classnames == ("ring", "star") and loaded.tasks["ImageNet"].classnames == ("tench", "goldfish")
    assert loaded.tasks["EuroSAT"].templates == ("a centered satellite photo of {}.",)
    for name, per_class, classes in (("CIFAR-100", 10, 100), ("ImageNet", 10, 2)):
        control = loaded.tasks[name]
        assert len(control.train) == 0  # nothing to probe or fine-tune
        assert np.bincount(control.test.labels).tolist() == [per_class] * classes
    again, other = load_benchmark("paper-image", tmp_path, seed=3), load_benchmark("paper-image", tmp_path, seed=4)
    drawn = lambda b: b.tasks["CIFAR-100"].test.items.paths  # noqa: E731
    assert drawn(again) == drawn(loaded) and drawn(other) != drawn(loaded)  # seeded
    assert all(p.startswith(f"{tmp_path}/cifar-100-python/test#") for p in drawn(loaded))  # from the official test split
    assert {Path(p).parent.name for p in loaded.tasks["ImageNet"].test.items.paths} == {"n01440764", "n01443537"}


def test_imagenet_names_come_from_open_clip_when_the_folder_has_no_mapping(tmp_path):
    from open_clip.zero_shot_metadata import IMAGENET_CLASSNAMES

    for i in range(1000):
        for k in range(2):
            layouts.save(tmp_path / "imagenet" / "val" / f"n{i:08d}" / f"ILSVRC2012_val_{k}.JPEG", i)
    entry = next(c for c in benchmark("paper-image").controls if c.name == "ImageNet")
    control = entry.read(tmp_path)
    assert len(control.test) == 2000 and len(set(control.classnames)) == 1000  # fewer than 10 per class: all of them
    curated = [class_name(n) for n in IMAGENET_CLASSNAMES]  # prompt-ready, as every loader gives names ("-" as a space)
    differ = {i: (curated[i], control.classnames[i]) for i in range(1000) if curated[i] != control.classnames[i]}
    # CLIP's curated names give two pairs of classes one name; those take torchvision's (ILSVRC's own first synonyms)
    assert differ == {744: ("missile", "projectile"), 836: ("sunglasses", "sunglass")}


def test_a_dataset_with_other_classes_is_refused_naming_them(tmp_path):
    image_layouts(tmp_path, cifar_test_per_class=1)
    (tmp_path / "eurosat" / "2750" / "SeaLake").rename(tmp_path / "eurosat" / "2750" / "Lake")
    with pytest.raises(PlatonicError, match=r"EuroSAT: .*missing \['sea lake'\]; not in the benchmark \['lake'\]"):
        load_benchmark("paper-image", tmp_path)


def grid(*argv: str) -> int:
    return cli.main(["grid", "--quiet", "--no-cache", *argv])


def test_missing_datasets_are_all_named_with_their_layouts_before_any_model_loads(tmp_path, capsys):
    image_layouts(tmp_path / "data", cifar_test_per_class=1)
    for gone in ("eurosat", "SUN397", "imagenet"):
        for path in sorted((tmp_path / "data" / gone).rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        (tmp_path / "data" / gone).rmdir()
    out = tmp_path / "run"
    code = grid("--benchmark", "paper-image", "--data-root", str(tmp_path / "data"), "--out", str(out),
                "--model", "clip=/no/such/checkpoint")  # never loaded: the datasets are checked first
    err = capsys.readouterr().err
    assert code == 2 and "3 of 10 datasets are missing" in err and err.count("\n") == 1  # one line, however long
    err = " ".join(line.strip() for line in err.splitlines())
    data = tmp_path / "data"
    for name, layout in (("EuroSAT", f"{data}/eurosat/2750/<class>/*.jpg"), ("SUN397", f"{data}/SUN397/ClassName.txt"),
                         ("ImageNet", f"{data}/imagenet/val/<wnid>/*.JPEG")):
        assert f"{name}: expected {layout}" in err
    assert "DTD" not in err and not out.exists()  # nothing left behind


def test_unknown_benchmarks_and_bad_models_are_refused(tmp_path, capsys):
    assert grid("--benchmark", "paper-video", "--data-root", str(tmp_path), "--out", str(tmp_path / "r")) == 2
    assert "unknown benchmark 'paper-video' (did you mean 'paper-image'?); known: paper-audio, paper-image" in capsys.readouterr().err
    assert grid("--benchmark", "paper-image", "--data-root", str(tmp_path), "--out", str(tmp_path / "r"), "--model", "clap=x") == 2
    assert "'clap' is not among the benchmark's families" in capsys.readouterr().err
    assert grid("--benchmark", "paper-image", "--task", "amber_shapes", "--out", str(tmp_path / "r")) == 2
    assert "brings its own tasks, controls and families: drop --task" in capsys.readouterr().err
    assert grid("--model", "clip=x", "--out", str(tmp_path / "r")) == 2
    assert "give --benchmark NAME" in capsys.readouterr().err
    image_layouts(tmp_path / "data", cifar_test_per_class=1)  # the datasets are there; the hub ids cannot load offline
    assert grid("--benchmark", "paper-image", "--data-root", str(tmp_path / "data"), "--out", str(tmp_path / "r")) == 2
    err = capsys.readouterr().err
    assert "cannot load clip from its reference checkpoint" in err and "openai/clip-vit-large-patch14" in err
    assert "give the path of a local checkpoint of clip in --model" in err and not (tmp_path / "r").exists()


def zoo_families(tmp_path: Path) -> dict[str, Path]:
    """The shipped zoo's five members, and a copy of its SigLIP marked as SigLIP2 (a fixed-resolution SigLIP2 is a SiglipModel)."""
    members = {f: ZOO_DIR / f for f in ("clip", "openclip", "metaclip", "siglip", "evaclip")}
    members["siglip2"] = shutil.copytree(ZOO_DIR / "siglip", tmp_path / "siglip2")
    marker = members["siglip2"] / "platonic.json"
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "family": "siglip2"}))
    return members


def benchmark_argv(tmp_path: Path, out: Path, *extra: str) -> list[str]:
    return ["--benchmark", "paper-image", "--data-root", str(tmp_path / "data"), "--out", str(out),
            *(a for f, m in zoo_families(tmp_path).items() for a in ("--model", f"{f}={m}")),
            "--max-cells", "2", "--sweep-cells", "1", "--sweep-strengths", "0", "0.5", "--no-similarity", *extra]


def test_paper_image_runs_end_to_end_on_fake_layouts_and_writes_the_paper_table(tmp_path, capsys):
    image_layouts(tmp_path / "data", cifar_test_per_class=11)
    for c, cls in enumerate(("ring", "star")):  # a third remote-sensing-like set in class folders, for the held-out study
        for i in range(3):
            layouts.save(tmp_path / "data" / "ucm" / cls / f"{i}.png", c)
    out = tmp_path / "run"
    argv = benchmark_argv(tmp_path, out, "--max-steps", "1", "--held-out", "EuroSAT", "RESISC45", "UCM=images:ucm")
    assert grid(*argv) == 0, capsys.readouterr().err
    report = (out / "report.md").read_text()
    summary = json.loads((out / "report.json").read_text())
    assert report.startswith("# platonic grid --benchmark paper-image")
    # the paper's table: each method's tasks and each control set, the worst other task beside them (docs/method.md sec. 18)
    assert ("| method | strength | task A | task B | CIFAR-100 | ImageNet | control mean | worst other task's drop (points) | "
            "worst other task | share of labelled reference | cells |") in report
    assert ("| method | strength | removed task | CIFAR-100 | ImageNet | control mean | worst other task's drop (points) | "
            "worst other task | share of labelled reference | cells |") in report
    for kind in ("addition", "negation"):
        entry = summary[kind]
        assert entry["cells"] == 2 and set(entry["zero_shot"]["controls"]) == {"CIFAR-100", "ImageNet"}
        for method in ("zero_shot", "random_utd", "closed_form", "oracle"):
            assert all(0 <= v <= 100 for v in entry[method]["controls"].values())
    pairs = 6 * 5 * 5  # each target, with a source of EuroSAT and one of RESISC45 among the other five families
    assert f"## Held-out transfer (EuroSAT + RESISC45 -> UCM, never fitted; {pairs} target x source pairs, " in report
    assert summary["per_task"] and set(summary["per_task"]) <= {t.name for t in benchmark("paper-image").tasks}
    run = json.loads((out / "run.json").read_text())["settings"]
    assert run["controls"] == ["CIFAR-100", "ImageNet"] and len(run["families"]) == 6
    assert run["describe"]["benchmark"].startswith("paper-image")
    made = sorted(p.relative_to(out / "finetunes").as_posix() for p in (out / "finetunes").rglob("*.safetensors"))
    assert made == sorted(f"{f}/{t.name}.safetensors" for f in run["families"] for t in benchmark("paper-image").tasks)  # no control
    cells = [json.loads(line) for line in (out / "cells.jsonl").read_text().splitlines()]
    assert all(set(c["controls"]) == {"CIFAR-100", "ImageNet"} and not {"CIFAR-100", "ImageNet"} & set(c["tasks"]) for c in cells)


def test_a_rerun_reads_the_fine_tunes_back_and_refuses_those_of_another_recipe(tmp_path, capsys):
    image_layouts(tmp_path / "data", cifar_test_per_class=1)
    out = tmp_path / "run"
    argv = benchmark_argv(tmp_path, out, "--families", "clip", "siglip2", "--kinds", "negation")
    assert grid(*argv, "--max-steps", "1") == 0, capsys.readouterr().err
    stamps = {p: p.stat().st_mtime_ns for p in (out / "finetunes").rglob("*.safetensors")}
    passes = json.loads((out / "report.json").read_text())["cells"]["passes"]
    assert len(stamps) == 16 and grid(*argv, "--max-steps", "1") == 0  # resumes every cell on the same weights
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    assert json.loads((out / "report.json").read_text())["cells"]["resumed"] == passes
    capsys.readouterr()
    assert grid(*argv, "--max-steps", "2") == 2
    assert "was made with max_steps 1 (this run: 2)" in capsys.readouterr().err


def test_paper_audio_composes_two_tasks_and_reports_the_held_out_third(tmp_path, capsys):
    from platonic_sdk.data.paper_benchmarks import ESC50_OTHERS, ESC50_URBAN, URBANSOUND8K_NAMES
    from platonic_sdk.worlds.audio import AUDIO_ZOO_DIR

    data = tmp_path / "data"
    layouts.esc50(data / "ESC-50", [n.replace(" ", "_") for n in (*ESC50_OTHERS, *ESC50_URBAN)])  # as ESC-50 spells them
    layouts.urbansound8k(data / "UrbanSound8K", [n.replace(" ", "_") for n in URBANSOUND8K_NAMES])
    loaded = load_benchmark("paper-audio", data)
    assert loaded.held_out == ("ESC-50", "UrbanSound8K", "ESC-50-urban")
    held, esc = loaded.tasks["ESC-50-urban"], loaded.tasks["ESC-50"]
    assert len(held.train) == 0 and len(held.test) == 10 and held.classnames == ESC50_URBAN  # fold 5 of its 10 classes
    assert esc.num_classes == 40 and not {Path(p).name for p in held.test.items.paths} & {Path(p).name for p in esc.test.items.paths}

    families = ("clap-htsat-unfused", "clap-general")
    out = tmp_path / "run"
    argv = ["--benchmark", "paper-audio", "--data-root", str(data), "--out", str(out), "--families", *families,
            *(a for f in families for a in ("--model", f"{f}={AUDIO_ZOO_DIR / f}")), "--max-steps", "1", "--max-cells", "1",
            "--sweep-cells", "1", "--sweep-strengths", "0", "0.5", "--no-similarity"]
    assert grid(*argv) == 0, capsys.readouterr().err
    report = (out / "report.md").read_text()
    assert "## Held-out transfer (ESC-50 + UrbanSound8K -> ESC-50-urban, never fitted; 2 target x source pairs, " in report
    summary = json.loads((out / "report.json").read_text())
    assert summary["held_out"]["task"] == "ESC-50-urban" and 0 <= summary["held_out"]["closed_form"] <= 100
    made = sorted(p.relative_to(out / "finetunes").as_posix() for p in (out / "finetunes").rglob("*.safetensors"))
    assert made == [f"{f}/{t}.safetensors" for f in sorted(families) for t in ("ESC-50", "UrbanSound8K")]


def test_the_user_guide_lists_every_dataset_with_its_folder_and_template():
    guide = (Path(__file__).resolve().parents[1] / "docs" / "user_guide.md").read_text()
    section = guide[guide.index("## Benchmarks"):]
    section = section[: section.index("\n## ", 1)]
    for bench in (benchmark("paper-image"), benchmark("paper-audio")):
        assert f"--benchmark {bench.name}" in section
        for entry in bench.sets:
            folder = re.match(r"[^{<*\s]*/", entry.layout("DIR")).group(0)  # the folder it expects under the data root
            assert entry.name in section and f"`{folder}" in section, (entry.name, folder)
            assert all(t in section for t in entry.templates), entry.name

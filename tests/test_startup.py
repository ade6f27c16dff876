"""What starting up imports: `platonic --help`, usage errors, `import platonic_sdk`, the public API and each
command up to its first model load, each in a fresh interpreter (what sys.modules holds then)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

MODEL_LIBRARIES = ("torch", "transformers", "open_clip", "peft", "laion_clap", "sklearn", "matplotlib", "timm")

PROBE = textwrap.dedent("""
    import json, sys
    LIBS = {libs!r}

    def report(where):
        loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set(LIBS))
        # fine-tuning, the worlds themselves (their registry is names only), plotting and the LoRA code
        ours = sorted(m for m in sys.modules if m.startswith(("platonic_sdk.finetune", "platonic_sdk.worlds.", "platonic_sdk.evaluate.report.plots",
                                                              "platonic_sdk.training", "platonic_sdk.edits.lora_edit", "platonic_sdk.transfer.lora"))
                      and m != "platonic_sdk.worlds.registry")
        print(json.dumps({{"where": where, "libraries": loaded, "modules": ours}}))
        sys.stdout.flush()

    {body}
""")


def probe(body: str) -> list[dict]:
    """Run `body` in a fresh interpreter; the reports it printed."""
    code = PROBE.format(libs=MODEL_LIBRARIES, body=textwrap.indent(textwrap.dedent(body), "").strip())
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    reports = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert reports, out.stderr[-2000:]
    return reports


def test_import_and_help_and_usage_errors_load_no_model_library():
    reports = probe("""
        import platonic_sdk
        report("import")
        from platonic_sdk.cli import main as cli
        for argv in (["--help"], ["bank", "--help"], ["utd", "--family", "clipp", "--task", "t"], ["edit", "--family", "clip"],
                     ["grid", "--methods", "closed_frm", "--out", "x"], ["grid", "--benchmark", "paper-vidoe", "--out", "x"],
                     ["demo", "--world", "imag"], ["evaluate", "--strength", "1"]):
            try:
                status = cli.main(argv)
            except SystemExit as exc:
                status = exc.code
            report(" ".join(argv) + f" -> {status}")
    """)
    assert len(reports) == 9
    for r in reports:
        assert r["libraries"] == [] and r["modules"] == [], r
    assert [r["where"].rsplit(" ", 1)[-1] for r in reports[1:]] == ["0", "0", "2", "2", "2", "2", "2", "2"]


def test_an_unknown_task_is_refused_from_the_worlds_task_names_alone():
    """A misspelt task is refused, with the nearest names, before any model library loads (the worlds' modules name
    their tasks without torch)."""
    reports = probe("""
        from platonic_sdk.cli import main as cli
        for argv in (["evaluate", "--family", "clip", "--task", "amber_shapez"], ["grid", "--task", "fashion_tinted", "--task",
                     "card_suit", "--world", "real", "--out", "x"], ["utd", "--family", "clap", "--task", "raised_notez"]):
            report(" ".join(argv) + f" -> {cli.main(argv)}")
    """)
    assert [r["where"].rsplit(" ", 1)[-1] for r in reports] == ["2", "2", "2"]
    assert all(r["libraries"] == [] for r in reports), reports


def test_the_public_api_loads_torch_and_no_model_library():
    (r,) = probe("""
        from platonic_sdk import UTD, Composition, OperatorBank, load, list_families
        assert "clip" in list_families()
        report("api")
    """)
    assert r["libraries"] == ["torch"] and r["modules"] == []


@pytest.mark.parametrize("command", ["bank", "edit", "evaluate"])
def test_bank_edit_and_evaluate_start_without_fine_tuning_worlds_plots_or_peft(command, tmp_path):
    """Up to its first model load, a closed-form command loads torch and nothing of fine-tuning, the worlds,
    plotting or peft (a data-spec task: a world's task name would load its world)."""
    images = tmp_path / "shapes"
    for cls in ("round", "square"):
        (images / cls).mkdir(parents=True)
        for i in range(3):
            (images / cls / f"{i}.png").write_bytes(_png())
    utd = str(tmp_path / "shapes.utd.safetensors")
    argv = {"bank": ["bank", "--descriptor", utd, "-o", str(tmp_path / "b.safetensors")],
            "edit": ["edit", "--add", utd, "--strength", "0.5", "-o", str(tmp_path / "e.safetensors")], "evaluate": ["evaluate"]}[command]
    (r,) = probe(f"""
        import torch
        from platonic_sdk import UTD
        from platonic_sdk.cli import commands, main as cli
        from platonic_sdk.data.specs import TaskOptions, load_task
        grid = load_task("images:shapes", TaskOptions({str(tmp_path)!r})).grid(per_class=30)  # the command's grid: checked before the load
        UTD(torch.randn(*grid.shape), grid.identity, "shapes").save({utd!r})

        def first_model_load(*args, **kwargs):
            report({command!r})
            raise SystemExit(0)

        commands.load_model = first_model_load
        cli.main({argv!r} + ["--family", "clip", "--task", "images:shapes", "--data-root", {str(tmp_path)!r}])
    """)
    assert r["where"] == command
    assert set(r["libraries"]) <= {"torch"} and r["modules"] == [], r


def _png() -> bytes:
    """A 2x2 PNG written without any imaging library."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + bytes([200, 30, 30] * 2) for _ in range(2))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def test_the_runner_loads_peft_only_when_a_lora_fit_or_adapter_file_needs_it():
    """A rerun of a finished run imports the runner, its methods and the edits, and none of them imports peft."""
    (r,) = probe("""
        import platonic_sdk.evaluate.run.runner, platonic_sdk.evaluate.measure.methods, platonic_sdk.edits.lora_edit
        import platonic_sdk.transfer.lora, platonic_sdk.finetune
        report("runner")
    """)
    assert "torch" in r["libraries"] and "peft" not in r["libraries"], r

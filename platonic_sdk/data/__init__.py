"""Datasets on disk as `Task` objects whose splits reference their items (decoded on demand).

Image folders and CSV manifests, torchvision layouts (`torchvision_task`), Hugging Face datasets on disk
(`hf_task`, optional `datasets` package), audio folders, CSV manifests, ESC-50 and UrbanSound8K; the
paper's benchmarks as data (`paper_benchmarks`, read by `load_benchmark`).
"""

from .audio import (
    AUDIO_TEMPLATE, AudioFile, Waveform, as_waveform, esc50_task, folder_task, manifest_task, read_audio, urbansound8k_task,
    write_audio,
)
from .benchmark import benchmark, load_benchmark, register_benchmark
from .hf import hf_task
from .images import IMAGE_MODES, ImageFile, as_image, as_images, image_folder_task, image_manifest_task, read_image
from .paper_benchmarks import PAPER_AUDIO, PAPER_IMAGE  # registered: paper-image, paper-audio
from .torchvision_sets import torchvision_task

__all__ = [
    "AUDIO_TEMPLATE",
    "AudioFile",
    "IMAGE_MODES",
    "ImageFile",
    "PAPER_AUDIO",
    "PAPER_IMAGE",
    "Waveform",
    "as_image",
    "as_images",
    "as_waveform",
    "benchmark",
    "esc50_task",
    "folder_task",
    "hf_task",
    "image_folder_task",
    "image_manifest_task",
    "load_benchmark",
    "manifest_task",
    "read_audio",
    "read_image",
    "register_benchmark",
    "torchvision_task",
    "urbansound8k_task",
    "write_audio",
]

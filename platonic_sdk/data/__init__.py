"""Datasets on disk as `Task` objects whose splits reference their items (decoded on demand).

Image folders and CSV manifests, torchvision layouts (`torchvision_task`), Hugging Face datasets on disk
(`hf_task`, optional `datasets` package), audio folders, CSV manifests, ESC-50 and UrbanSound8K.
"""

from .audio import (
    AUDIO_TEMPLATE, AudioFile, Waveform, as_waveform, esc50_task, folder_task, manifest_task, read_audio, urbansound8k_task,
    write_audio,
)
from .hf import hf_task
from .images import IMAGE_MODES, ImageFile, as_image, as_images, image_folder_task, image_manifest_task, read_image
from .torchvision_sets import torchvision_task

__all__ = [
    "AUDIO_TEMPLATE",
    "AudioFile",
    "IMAGE_MODES",
    "ImageFile",
    "Waveform",
    "as_image",
    "as_images",
    "as_waveform",
    "esc50_task",
    "folder_task",
    "hf_task",
    "image_folder_task",
    "image_manifest_task",
    "manifest_task",
    "read_audio",
    "read_image",
    "torchvision_task",
    "urbansound8k_task",
    "write_audio",
]

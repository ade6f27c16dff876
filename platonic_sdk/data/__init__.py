"""Datasets on disk as `Task` objects: image folders, audio waveforms, audio folders and CSV manifests."""

from .audio import AUDIO_TEMPLATE, Waveform, as_waveform, folder_task, manifest_task, read_audio, write_audio
from .images import IMAGE_MODES, as_image, as_images, image_folder_task, read_image

__all__ = [
    "AUDIO_TEMPLATE",
    "IMAGE_MODES",
    "Waveform",
    "as_image",
    "as_images",
    "as_waveform",
    "folder_task",
    "image_folder_task",
    "manifest_task",
    "read_audio",
    "read_image",
    "write_audio",
]

"""Datasets on disk as `Task` objects: image folders, audio waveforms, audio folders and CSV manifests."""

from .audio import AUDIO_TEMPLATE, Waveform, as_waveform, folder_task, manifest_task, read_audio, write_audio
from .images import image_folder_task, read_image

__all__ = [
    "AUDIO_TEMPLATE",
    "Waveform",
    "as_waveform",
    "folder_task",
    "image_folder_task",
    "manifest_task",
    "read_audio",
    "read_image",
    "write_audio",
]

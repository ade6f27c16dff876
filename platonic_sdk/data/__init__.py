"""Datasets on disk as `Task` objects: audio waveforms, audio folders and CSV manifests."""

from .audio import AUDIO_TEMPLATE, Waveform, as_waveform, folder_task, manifest_task, read_audio, write_audio

__all__ = ["AUDIO_TEMPLATE", "Waveform", "as_waveform", "folder_task", "manifest_task", "read_audio", "write_audio"]

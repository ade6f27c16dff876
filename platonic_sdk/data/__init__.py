"""Datasets on disk as `Task` objects whose splits reference their items (decoded on demand).

Image folders and CSV manifests, torchvision layouts (`torchvision_task`), Hugging Face datasets on disk
(`hf_task`, optional `datasets` package), audio folders, CSV manifests, ESC-50 and UrbanSound8K; the
paper's benchmarks as data (`paper_benchmarks`, read by `load_benchmark`).
"""

from ..lazy import exports

__getattr__, __dir__, __all__ = exports(__name__, {
    ".audio": ["AUDIO_TEMPLATE", "AudioFile", "Waveform", "as_waveform", "esc50_task", "folder_task", "manifest_task", "read_audio", "urbansound8k_task", "write_audio"],
    ".benchmark": ["benchmark", "load_benchmark", "register_benchmark"],
    ".hf": ["hf_task"],
    ".keep": ["KeepSet"],
    ".images": ["IMAGE_MODES", "ImageFile", "as_image", "as_images", "image_folder_task", "image_manifest_task", "read_image"],
    ".paper_benchmarks": ["PAPER_AUDIO", "PAPER_IMAGE"],
    ".torchvision_sets": ["torchvision_task"],
})

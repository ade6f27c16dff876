"""The authors' prompts that readers and the paper's benchmarks share (docs/method.md sec. 1): one template per
task, and the class names of datasets whose files carry none (GTSRB's numbered folders, digits)."""

from __future__ import annotations

from ..tasks import DEFAULT_TEMPLATE

# The authors' one template per task (docs/method.md sec. 1); every other task: "a photo of a {}."
TEMPLATES = {
    "eurosat": "a centered satellite photo of {}.",
    "dtd": "a photo of a {} texture.",
    "gtsrb": "a photo of a {} traffic sign.",
    "mnist": "a photo of the number {}.",
    "svhn": "a photo of the number {}.",
    "resisc45": "a satellite photo of {}.",
}
PHOTO = DEFAULT_TEMPLATE  # "a photo of a {}."
DIGITS = tuple(str(d) for d in range(10))
GTSRB_NAMES = (  # GTSRB's class folders are numbered 00000..00042: the sign each number stands for
    "speed limit 20 km/h", "speed limit 30 km/h", "speed limit 50 km/h", "speed limit 60 km/h", "speed limit 70 km/h",
    "speed limit 80 km/h", "end of speed limit 80 km/h", "speed limit 100 km/h", "speed limit 120 km/h", "no passing",
    "no passing for vehicles over 3.5 tons", "right of way at the next intersection", "priority road", "yield", "stop",
    "no vehicles", "vehicles over 3.5 tons prohibited", "no entry", "general caution", "dangerous curve to the left",
    "dangerous curve to the right", "double curve", "bumpy road", "slippery road", "road narrows on the right", "road work",
    "traffic signals", "pedestrians", "children crossing", "bicycles crossing", "beware of ice or snow",
    "wild animals crossing", "end of all speed and passing limits", "turn right ahead", "turn left ahead", "ahead only",
    "go straight or right", "go straight or left", "keep right", "keep left", "roundabout mandatory", "end of no passing",
    "end of no passing for vehicles over 3.5 tons",
)

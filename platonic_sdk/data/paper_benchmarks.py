"""The paper's studies as data (docs/method.md sec. 1, 8, 10): `paper-image` and `paper-audio`.

paper-image: six image-text families, eight tasks, two control sets of 10 images per class, the
authors' one template per task. Every torchvision dataset is read from one torchvision root (the
data root), SVHN from DIR/svhn and ImageNet from DIR/imagenet. Class names are the datasets' own
labels in label order (GTSRB's folders carry numbers: its names are the sign names; digits for MNIST
and SVHN); Cars, SUN397 and ImageNet take theirs from the dataset's files. The paper's held-out
remote-sensing study reads UCMerced and AID, which torchvision does not hold: it has no held-out set
here (`platonic grid --held-out EuroSAT RESISC45 UCMerced=images:DIR` adds one).

paper-audio: four CLAP families; ESC-50 without its exterior/urban-noise category and UrbanSound8K
are composed, and ESC-50's exterior/urban-noise category (its test fold) is the held-out set: related
to both, and neither its clips nor its class names enter a fit. The paper names no audio template;
it is the SDK's (LAION-CLAP's prompt).
"""

from __future__ import annotations

from .audio import AUDIO_TEMPLATE
from .benchmark import Benchmark, BenchmarkSet, register_benchmark
from .paper_prompts import DIGITS, GTSRB_NAMES, PHOTO, TEMPLATES

EUROSAT_NAMES = ("annual crop", "forest", "herbaceous vegetation", "highway", "industrial", "pasture", "permanent crop",
                 "residential", "river", "sea lake")
DTD_NAMES = (
    "banded", "blotchy", "braided", "bubbly", "bumpy", "chequered", "cobwebbed", "cracked", "crosshatched", "crystalline",
    "dotted", "fibrous", "flecked", "freckled", "frilly", "gauzy", "grid", "grooved", "honeycombed", "interlaced", "knitted",
    "lacelike", "lined", "marbled", "matted", "meshed", "paisley", "perforated", "pitted", "pleated", "polka-dotted", "porous",
    "potholed", "scaly", "smeared", "spiralled", "sprinkled", "stained", "stratified", "striped", "studded", "swirly", "veined",
    "waffled", "woven", "wrinkled", "zigzagged",
)
RESISC45_NAMES = (
    "airplane", "airport", "baseball diamond", "basketball court", "beach", "bridge", "chaparral", "church", "circular farmland",
    "cloud", "commercial area", "dense residential", "desert", "forest", "freeway", "golf course", "ground track field",
    "harbor", "industrial area", "intersection", "island", "lake", "meadow", "medium residential", "mobile home park",
    "mountain", "overpass", "palace", "parking lot", "railway", "railway station", "rectangular farmland", "river",
    "roundabout", "runway", "sea ice", "ship", "snowberg", "sparse residential", "stadium", "storage tank", "tennis court",
    "terrace", "thermal power station", "wetland",
)
CIFAR100_NAMES = (
    "apple", "aquarium fish", "baby", "bear", "beaver", "bed", "bee", "beetle", "bicycle", "bottle", "bowl", "boy", "bridge",
    "bus", "butterfly", "camel", "can", "castle", "caterpillar", "cattle", "chair", "chimpanzee", "clock", "cloud",
    "cockroach", "couch", "crab", "crocodile", "cup", "dinosaur", "dolphin", "elephant", "flatfish", "forest", "fox", "girl",
    "hamster", "house", "kangaroo", "keyboard", "lamp", "lawn mower", "leopard", "lion", "lizard", "lobster", "man",
    "maple tree", "motorcycle", "mountain", "mouse", "mushroom", "oak tree", "orange", "orchid", "otter", "palm tree", "pear",
    "pickup truck", "pine tree", "plain", "plate", "poppy", "porcupine", "possum", "rabbit", "raccoon", "ray", "road",
    "rocket", "rose", "sea", "seal", "shark", "shrew", "skunk", "skyscraper", "snail", "snake", "spider", "squirrel",
    "streetcar", "sunflower", "sweet pepper", "table", "tank", "telephone", "television", "tiger", "tractor", "train", "trout",
    "tulip", "turtle", "wardrobe", "whale", "willow tree", "wolf", "woman", "worm",
)
CONTROL_PER_CLASS = 10  # docs/method.md sec. 8: CIFAR-100 and ImageNet-val, 10 images per class

PAPER_IMAGE = register_benchmark(Benchmark(
    name="paper-image",
    modality="image",
    description="six image-text families x eight tasks, controls CIFAR-100 and ImageNet-val (10 per class)",
    families=("clip", "openclip", "metaclip", "siglip", "siglip2", "evaclip"),
    tasks=(
        BenchmarkSet("Cars", "torchvision", (PHOTO,), dataset="stanford_cars",
                     classnames_from="devkit/cars_meta.mat (class_names, 196 makes and models)"),
        BenchmarkSet("DTD", "torchvision", (TEMPLATES["dtd"],), dataset="dtd", classnames=DTD_NAMES),
        BenchmarkSet("EuroSAT", "torchvision", (TEMPLATES["eurosat"],), dataset="eurosat", classnames=EUROSAT_NAMES),
        BenchmarkSet("GTSRB", "torchvision", (TEMPLATES["gtsrb"],), dataset="gtsrb", classnames=GTSRB_NAMES),
        BenchmarkSet("MNIST", "torchvision", (TEMPLATES["mnist"],), dataset="mnist", classnames=DIGITS),
        BenchmarkSet("RESISC45", "torchvision", (TEMPLATES["resisc45"],), dataset="resisc45", classnames=RESISC45_NAMES),
        BenchmarkSet("SUN397", "torchvision", (PHOTO,), dataset="sun397",
                     classnames_from="SUN397/ClassName.txt (397 scene paths such as /a/abbey, read as words)"),
        BenchmarkSet("SVHN", "torchvision", (TEMPLATES["svhn"],), folder="svhn", dataset="svhn", classnames=DIGITS),
    ),
    controls=(
        BenchmarkSet("CIFAR-100", "torchvision", (PHOTO,), dataset="cifar100", classnames=CIFAR100_NAMES,
                     per_class=CONTROL_PER_CLASS),
        BenchmarkSet("ImageNet", "torchvision", (PHOTO,), folder="imagenet", dataset="imagenet_val", per_class=CONTROL_PER_CLASS,
                     pool="all", classnames_from="imagenet/classnames.txt, else open_clip's bundled names of the 1000 "
                                                 "ILSVRC classes, else the first synonym in LOC_synset_mapping.txt"),
    ),
))

ESC50_URBAN = ("helicopter", "chainsaw", "siren", "car horn", "engine", "train", "church bells", "airplane", "fireworks", "hand saw")
ESC50_OTHERS = (  # ESC-50's other four categories, in its target order: animals, natural, human non-speech, interior
    "dog", "rooster", "pig", "cow", "frog", "cat", "hen", "insects", "sheep", "crow",
    "rain", "sea waves", "crackling fire", "crickets", "chirping birds", "water drops", "wind", "pouring water", "toilet flush",
    "thunderstorm",
    "crying baby", "sneezing", "clapping", "breathing", "coughing", "footsteps", "laughing", "brushing teeth", "snoring",
    "drinking sipping",
    "door wood knock", "mouse click", "keyboard typing", "door wood creaks", "can opening", "washing machine",
    "vacuum cleaner", "clock alarm", "clock tick", "glass breaking",
)
URBANSOUND8K_NAMES = ("air conditioner", "car horn", "children playing", "dog bark", "drilling", "engine idling", "gun shot",
                      "jackhammer", "siren", "street music")

PAPER_AUDIO = register_benchmark(Benchmark(
    name="paper-audio",
    modality="audio",
    description="four CLAP families; ESC-50 (40 classes) + UrbanSound8K composed, ESC-50's urban noises held out",
    families=("clap-htsat-unfused", "clap-htsat-fused", "clap-general", "clap-music"),
    tasks=(
        BenchmarkSet("ESC-50", "esc50", (AUDIO_TEMPLATE,), folder="ESC-50", classnames=ESC50_OTHERS, select=True),
        BenchmarkSet("UrbanSound8K", "urbansound8k", (AUDIO_TEMPLATE,), folder="UrbanSound8K", classnames=URBANSOUND8K_NAMES),
    ),
    held_out=BenchmarkSet("ESC-50-urban", "esc50", (AUDIO_TEMPLATE,), folder="ESC-50", classnames=ESC50_URBAN, select=True),
    related=("ESC-50", "UrbanSound8K"),
))

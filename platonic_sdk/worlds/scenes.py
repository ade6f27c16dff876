"""Scenes of the synthetic image world: what is in a picture, how it is drawn, and how it is described.

A `Scene` is a small value object (shape or glyph, colour, fill pattern, size, place, background and
an optional whole-image tint); `render` draws it as a 32 x 32 RGB image (2x supersampled, box
downsampled) and `caption` describes a random subset of its attributes with a small grammar.
Everything is a pure function of the scene and a numpy Generator, so a seed fixes every byte.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

import attrs
import numpy as np
from PIL import Image, ImageDraw, ImageFont

SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "diamond", "star", "cross", "ring", "hexagon")
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 35, 35),
    "green": (40, 175, 50),
    "blue": (45, 80, 225),
    "yellow": (235, 215, 40),
    "purple": (145, 55, 185),
    "orange": (245, 140, 25),
    "cyan": (40, 200, 215),
    "pink": (240, 125, 190),
}
PATTERNS: tuple[str, ...] = ("plain", "striped", "dotted", "checkered")
BACKGROUNDS: dict[str, tuple[int, int, int]] = {"black": (18, 18, 18), "white": (238, 238, 238), "gray": (125, 125, 125)}
POSITIONS: dict[str, tuple[float, float]] = {
    "on the left": (0.28, 0.5),
    "on the right": (0.72, 0.5),
    "at the top": (0.5, 0.28),
    "at the bottom": (0.5, 0.72),
    "in the center": (0.5, 0.5),
}
COUNTS: tuple[str, ...] = ("one", "two", "three", "four")
DIGITS: tuple[str, ...] = tuple(str(i) for i in range(10))
LETTERS: tuple[str, ...] = ("a", "b", "c", "d", "e", "f", "g", "h")
TINTS: dict[str, tuple[int, int, int]] = {"amber": (255, 150, 40), "teal": (20, 170, 160), "violet": (150, 60, 255)}

Kind = Literal["shape", "glyph", "scribble", "bitmap"]
SS = 2  # supersampling factor


@attrs.frozen
class Scene:
    """One picture: `count` copies of a shape (or one glyph / scribble / bitmap) on a plain background.

    Sizes and periods are in output pixels; `centers` are fractions of the frame; `tint` mixes the
    whole image towards a colour: x <- (1 - t) x + t * tint.
    """

    kind: Kind
    colour: str
    rgb: tuple[int, int, int]
    background: str
    size: float
    centers: tuple[tuple[float, float], ...]
    shape: str = "circle"
    glyph: str = ""
    pattern: str = "plain"
    period: float = 4.0
    position: str | None = None
    angle: float = 0.0
    tint: str | None = None
    tint_strength: float = 0.0
    bitmap: tuple[tuple[float, ...], ...] | None = None  # grey levels in [0, 1] (handwritten digits)

    @property
    def count(self) -> int:
        return len(self.centers)


def _polygon(shape: str, cx: float, cy: float, r: float, angle: float) -> list[tuple[float, float]]:
    """Vertices of a regular-ish polygon shape of circumradius r around (cx, cy)."""
    if shape == "square":
        ang = np.pi / 4 + np.arange(4) * np.pi / 2
        rad = np.full(4, r)
    elif shape == "diamond":
        ang = np.arange(4) * np.pi / 2
        rad = np.array([r, 0.7 * r, r, 0.7 * r])
    elif shape == "triangle":
        ang = -np.pi / 2 + np.arange(3) * 2 * np.pi / 3
        rad = np.full(3, r)
    elif shape == "hexagon":
        ang = np.arange(6) * np.pi / 3
        rad = np.full(6, r)
    elif shape == "star":
        ang = -np.pi / 2 + np.arange(10) * np.pi / 5
        rad = np.where(np.arange(10) % 2 == 0, r, 0.42 * r)
    elif shape == "cross":
        t = 0.36 * r
        pts = [(-t, -r), (t, -r), (t, -t), (r, -t), (r, t), (t, t), (t, r), (-t, r), (-t, t), (-r, t), (-r, -t), (-t, -t)]
        ang = np.array([np.arctan2(y, x) for x, y in pts])
        rad = np.array([np.hypot(x, y) for x, y in pts])
    else:
        raise ValueError(f"no polygon for shape {shape!r}")
    ang = ang + angle
    return [(cx + float(rr * np.cos(a)), cy + float(rr * np.sin(a))) for a, rr in zip(ang, rad)]


@lru_cache(maxsize=64)
def _font(px: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=px)


def _mask(scene: Scene, n: int) -> np.ndarray:
    """Boolean object mask at the supersampled resolution n x n."""
    img = Image.new("L", (n, n), 0)
    draw = ImageDraw.Draw(img)
    r = scene.size * SS
    for fx, fy in scene.centers:
        cx, cy = fx * n, fy * n
        if scene.kind == "glyph":
            draw.text((cx, cy), scene.glyph.upper(), font=_font(max(6, int(round(2.2 * r)))), fill=255, anchor="mm")
        elif scene.kind == "scribble":
            rng = np.random.default_rng(int(1e6 * (fx + 3 * fy + scene.angle)) % (2**32))
            pts = [(cx + float(x) * r, cy + float(y) * r) for x, y in rng.uniform(-1, 1, size=(5, 2))]
            draw.line(pts, fill=255, width=max(2, int(0.45 * r)), joint="curve")
        elif scene.shape == "circle":
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=255)
        elif scene.shape == "ring":
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=255)
            draw.ellipse([cx - 0.55 * r, cy - 0.55 * r, cx + 0.55 * r, cy + 0.55 * r], fill=0)
        else:
            draw.polygon(_polygon(scene.shape, cx, cy, r, scene.angle), fill=255)
    return np.asarray(img) > 127


@lru_cache(maxsize=4)
def _coordinates(n: int) -> np.ndarray:
    """(y, x) of every pixel of an n x n supersampled frame, in output pixels (read-only, built once per n)."""
    grid = np.mgrid[0:n, 0:n].astype(np.float64) / SS
    grid.flags.writeable = False
    return grid


def _pattern(pattern: str, period: float, n: int) -> np.ndarray:
    """Boolean 'on' mask of a fill pattern with the given period (output pixels) at resolution n."""
    y, x = _coordinates(n)
    p = max(period, 1.0)
    if pattern == "plain":
        return np.ones((n, n), dtype=bool)
    if pattern == "striped":
        return ((x + y) / p) % 2 < 1
    if pattern == "checkered":
        return ((x // p) + (y // p)) % 2 == 0
    if pattern == "dotted":
        dx, dy = (x % p) - p / 2, (y % p) - p / 2
        return dx * dx + dy * dy < (0.3 * p) ** 2
    raise ValueError(f"unknown pattern {pattern!r}")


def _box_mean(canvas: np.ndarray) -> np.ndarray:
    """Mean of each SS x SS block (SS = 2), summed in the order numpy's `reshape(...).mean(axis=(1, 3))` sums them
    (row-major within the block), so the same bits at a fifth of the cost."""
    return (((canvas[0::2, 0::2] + canvas[0::2, 1::2]) + canvas[1::2, 0::2]) + canvas[1::2, 1::2]) / 4


def render(scene: Scene, size: int = 32) -> Image.Image:
    """Draw `scene` as a size x size RGB image (deterministic)."""
    n = size * SS
    canvas = np.empty((n, n, 3), dtype=np.float64)
    canvas[:] = BACKGROUNDS[scene.background]
    rgb = np.asarray(scene.rgb, dtype=np.float64)
    if scene.kind == "bitmap":
        grey = np.asarray(Image.fromarray(np.uint8(255 * np.asarray(scene.bitmap))).resize((n, n), Image.BILINEAR)) / 255.0
        canvas = canvas * (1 - grey[..., None]) + rgb * grey[..., None]
    else:
        mask = _mask(scene, n)
        on = _pattern(scene.pattern, scene.period, n)
        canvas[mask & on] = rgb
        canvas[mask & ~on] = 0.3 * rgb
    img = _box_mean(canvas)
    if scene.tint is not None:
        img = (1 - scene.tint_strength) * img + scene.tint_strength * np.asarray(TINTS[scene.tint], dtype=np.float64)
    return Image.fromarray(np.clip(np.rint(img), 0, 255).astype(np.uint8), "RGB")


def jitter_rgb(name: str, rng: np.random.Generator, amount: int = 18) -> tuple[int, int, int]:
    """The named colour with each channel moved by up to +-amount."""
    base = np.asarray(COLOURS[name]) + rng.integers(-amount, amount + 1, size=3)
    return tuple(int(v) for v in np.clip(base, 0, 255))


def plural(noun: str) -> str:
    """English plural of a shape name (cross -> crosses)."""
    return noun + ("es" if noun.endswith("s") else "s")


def caption(scene: Scene, rng: np.random.Generator) -> str:
    """Describe a random subset of the scene's attributes (at least one) with a small grammar.

    Single objects: "[a photo of] a {colour} {pattern} {shape} {position} [on a {bg} background]";
    counts: "{count} {colour} {shape}s"; glyphs: "the letter {g}" / "the number {g}" [in {colour}].
    Dropped nouns become "object", so single-attribute prompts ("a photo of a red object.") are in-grammar.
    """
    keep = lambda p: bool(rng.random() < p)  # noqa: E731
    prefix = "a photo of " if keep(0.5) else ""
    stop = "." if keep(0.5) else ""
    bg = f" on a {scene.background} background" if keep(0.3) else ""
    colour = scene.colour if keep(0.5) else ""
    if scene.kind == "glyph":
        what = ("the number " if scene.glyph in DIGITS else "the letter ") + scene.glyph
        where = f" {scene.position}" if scene.position and keep(0.4) else ""
        tail = f" in {colour}" if colour else ""
        return f"{prefix}{what}{tail}{where}{bg}".strip() + stop
    shape = scene.shape if keep(0.8) else ""
    if scene.count > 1 or keep(0.15):
        words = [COUNTS[scene.count - 1], colour, plural(shape) if shape else "objects"]
        if scene.count == 1:
            words[-1] = shape or "object"
        return (prefix + " ".join(w for w in words if w) + bg).strip() + stop
    pattern = scene.pattern if keep(0.5) else ""
    where = f" {scene.position}" if scene.position and keep(0.4) else ""
    if not (colour or shape or pattern or where or bg):
        shape = scene.shape
    words = " ".join(w for w in (colour, pattern, shape or "object") if w)
    article = "an" if words[0] in "aeiou" else "a"
    return f"{prefix}{article} {words}{where}{bg}".strip() + stop

"""The one registry of plug-ins by name (platonic_sdk/named_registry.py), and the five registries built on it."""

from __future__ import annotations

import pytest

from platonic_sdk.errors import PlatonicError, UnknownFamilyError
from platonic_sdk.named_registry import NamedRegistry


def test_a_taken_name_is_refused_unless_replaced_and_the_refusal_changes_nothing():
    reg: NamedRegistry[int] = NamedRegistry("gadget", taken_error=ValueError)
    assert reg.register("b", 1) == 1
    with pytest.raises(ValueError, match=r"^gadget 'b' is already registered \(pass replace=True to override\)$"):
        reg.register("b", 2)
    assert reg.lookup("b") == 1 and reg["b"] == 1
    with pytest.raises(ValueError, match="already registered"):
        reg["b"] = 2  # item assignment registers too
    assert reg.register("b", 3, replace=True) == 3
    assert reg.lookup("b") == 3 and len(reg) == 1
    plain = NamedRegistry("widget", replaceable=False)  # its register function takes no replace=
    plain.register("a", 1)
    with pytest.raises(PlatonicError, match=r"^widget 'a' is already registered$"):
        plain.register("a", 1)


def test_an_unknown_name_lists_the_known_ones_in_the_registry_order():
    reg: NamedRegistry[str] = NamedRegistry("gadget", listing="registered")
    for name in ("zeta", "alpha", "mu"):
        reg.register(name, name.upper())
    assert reg.names() == ["zeta", "alpha", "mu"] == list(reg)  # registration order
    with pytest.raises(PlatonicError, match=r"^unknown gadget 'gizmo'; registered: zeta, alpha, mu$"):
        reg.lookup("gizmo")
    with pytest.raises(KeyError):  # plain item access stays a dict's
        reg["gizmo"]
    ordered = NamedRegistry("gadget", sort=True, missing_error=UnknownFamilyError, lazy={"omega": "platonic_sdk.nowhere", "alpha": "platonic_sdk.nowhere"})
    for name in ("zeta", "alpha", "mu"):
        ordered.register(name, name)
    assert ordered.names() == ["alpha", "mu", "omega", "zeta"]  # sorted, the lazy names among them once
    with pytest.raises(UnknownFamilyError, match=r"^unknown gadget 'gizmo'; known: alpha, mu, omega, zeta; see above$"):
        ordered.lookup("gizmo", note="; see above")
    del ordered["mu"]
    assert "mu" not in ordered and ordered.names() == ["alpha", "omega", "zeta"]


def test_the_five_registries_keep_their_errors_and_orders():
    import platonic_sdk as ps
    from platonic_sdk.data.benchmark import benchmark, benchmark_names
    from platonic_sdk.evaluate.plan.registry import method
    from platonic_sdk.finetune.merging import merge_method, merge_methods
    from platonic_sdk.worlds.registry import world_names, world_spec

    families = ps.list_families()
    assert families == sorted(families) and "clip" in families
    with pytest.raises(UnknownFamilyError, match=r"^unknown family 'nope'; known families: " + ", ".join(families)):
        ps.family("nope")
    with pytest.raises(ValueError, match=r"family 'clip' is already registered \(pass replace=True"):
        ps.register_family(ps.family("clip"))
    assert merge_methods()[:3] == ["task_arithmetic", "ties", "dare"]  # registration order
    with pytest.raises(PlatonicError, match=r"^unknown merge method 'nope'; known: task_arithmetic, ties, dare"):
        merge_method("nope")
    with pytest.raises(PlatonicError, match=r"^unknown cell method 'nope'; registered: .*closed_form"):
        method("nope")
    assert world_names() == sorted(world_names()) and {"audio", "image"} <= set(world_names())
    with pytest.raises(PlatonicError, match=r"^unknown world 'nope'; registered: " + ", ".join(world_names()) + "$"):
        world_spec("nope")
    assert benchmark_names() == sorted(benchmark_names())
    with pytest.raises(PlatonicError, match=r"^unknown benchmark 'nope'; known: " + ", ".join(benchmark_names()) + "$"):
        benchmark("nope")


def test_lookup_imports_a_built_in_plug_in_once_and_suggests_the_nearest_name(tmp_path, monkeypatch):
    (tmp_path / "gadget_plugin.py").write_text(
        "from test_named_registry import GADGETS\nGADGETS.register('Widget', 'made')\nCOUNT = globals().get('COUNT', 0) + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import sys

    assert "gadget_plugin" not in sys.modules
    assert GADGETS.names() == ["Widget"]  # listed before it is loaded, nothing imported
    assert "gadget_plugin" not in sys.modules
    assert GADGETS.check("widget") == "Widget"  # casefold
    assert GADGETS.lookup("WIDGET") == "made" and sys.modules["gadget_plugin"].COUNT == 1
    assert GADGETS.lookup("Widget") == "made" and sys.modules["gadget_plugin"].COUNT == 1
    with pytest.raises(PlatonicError, match=r"^unknown gadget 'widgte' \(did you mean 'Widget'\?\); known: Widget$"):
        GADGETS.lookup("widgte")


GADGETS: NamedRegistry[str] = NamedRegistry("gadget", casefold=True, lazy={"Widget": "gadget_plugin"})

"""Which settings each vendor of ``VGPU_VENDOR`` is built with."""

from __future__ import annotations

from vgpu_extender.settings import Settings
from vgpu_extender.vendors import create_vendor_set


def test_one_vendor_takes_the_flat_options_and_nvidia_the_request_defaults() -> None:
    settings = Settings(
        vendor="nvidia", vendor_options={"count_resource": "example.com/gpu"}, split_count=4
    )
    config = settings.vendor_config()
    assert config["count_resource"] == "example.com/gpu"
    assert config["split_count"] == 4
    assert settings.vendor_names == ("nvidia",)


def test_several_vendors_take_their_own_sections_and_the_first_the_flat_keys() -> None:
    vnpus = {"hamiVnpuCore": True, "configs": []}
    settings = Settings(
        vendor="nvidia, Ascend",
        vendor_options={"count_resource": "example.com/gpu", "ascend": {"vnpus": vnpus}},
    )
    assert settings.vendor_names == ("nvidia", "ascend")
    nvidia = settings.vendor_config("nvidia")
    assert nvidia["count_resource"] == "example.com/gpu" and "ascend" not in nvidia
    # Not NVIDIA's request defaults, not the first vendor's flat keys: only its section.
    assert settings.vendor_config("ascend") == {"vnpus": vnpus}


def test_a_section_named_for_the_only_vendor_is_applied_too() -> None:
    settings = Settings(vendor="nvidia", vendor_options={"nvidia": {"vendor_word": "EX"}})
    vendors = create_vendor_set(settings.vendor, settings.vendor_config)
    assert vendors.names == ("EX",)


def test_the_set_of_both_serves_nvidia_first_then_every_chip() -> None:
    settings = Settings(vendor="nvidia,ascend")
    vendors = create_vendor_set(settings.vendor, settings.vendor_config)
    assert vendors.primary.name == "NVIDIA"
    assert "Ascend910B3" in vendors.names and "Ascend310P" in vendors.names

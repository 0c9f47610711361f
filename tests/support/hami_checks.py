"""Helpers shared by the HAMi vendors' unit tests: pods built from containers' resources,
a share model's per-device verdicts checked against its grid verdicts, and a vendor's
words checked to be distinct and prefix-free."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from vgpu_extender.domain import ContainerRequest, Reason, Wording
from vgpu_extender.domain.share import Capacity, ShareModel
from vgpu_extender.engine.rules import cumulative_masks, first_failing

Triple = tuple[int, int, int]


def container(
    name: str = "c",
    limits: Mapping[str, Any] | None = None,
    requests: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = dict(limits)
    if requests is not None:
        resources["requests"] = dict(requests)
    return {"name": name, "resources": resources}


def pod(
    *containers: dict[str, Any],
    init: Sequence[dict[str, Any]] = (),
    annotations: Mapping[str, str] | None = None,
    name: str = "p",
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "ns", "uid": "u-1"}
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    return {"metadata": metadata, "spec": spec}


def verdict(share: ShareModel, total: Triple, used: Triple, ask: ContainerRequest) -> Reason | None:
    """The first stage ``ask`` fails on one device of ``total`` with ``used`` taken."""
    free = Capacity(total[0] - used[0], total[1] - used[1], total[2] - used[2])
    stage = first_failing(share, free, Capacity(*total), ask)
    return None if stage is None else stage.reason


def grid_verdicts(
    share: ShareModel, cells: Sequence[tuple[Triple, Triple]], ask: ContainerRequest
) -> list[Reason | None]:
    """The same verdicts, on a grid of one row whose cells are ``(total, used)``."""
    totals = np.array([[cell[0] for cell in cells]], dtype=np.int64)
    used = np.array([[cell[1] for cell in cells]], dtype=np.int64)
    free = Capacity(*(totals[..., i] - used[..., i] for i in range(3)))
    whole = Capacity(*(totals[..., i] for i in range(3)))
    within = np.ones((1, len(cells)), dtype=np.bool_)
    stages, masks = cumulative_masks(share, free, whole, ask, within)
    return [
        next((s.reason for s, m in zip(stages, masks, strict=True) if not m[0, cell]), None)
        for cell in range(len(cells))
    ]


def assert_words_distinct(wording: Wording) -> None:
    texts = list(wording.texts.values())
    assert set(wording.texts) == set(Reason)
    assert len(set(texts)) == len(texts)
    for text in texts:
        assert "%" not in text
        assert not [other for other in texts if other != text and other.startswith(text)], text

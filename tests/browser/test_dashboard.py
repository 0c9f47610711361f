"""The dashboard at /ui in a real Chromium, against the real extender on 127.0.0.1:
what it draws is what the admin API says, it follows the cluster without a reload,
the what-if form answers, and changes need the token."""

from __future__ import annotations

import json
from typing import Any

from playwright.sync_api import Page, expect

from tests.browser.cluster import NODES, PODS, TOKEN
from tests.support.server import RunningExtender, place, pod_json


def _open(page: Page, running: RunningExtender) -> None:
    page.goto(f"{running.url}/ui")
    expect(page.locator("#status")).to_contain_text("Updated")


def _api_nodes(running: RunningExtender) -> list[dict[str, Any]]:
    response = running.client.get("/api/v1/nodes", params={"devices": "true"})
    assert response.status_code == 200
    nodes: list[dict[str, Any]] = response.json()
    return nodes


def _device(page: Page, uuid: str) -> Any:
    return page.locator(f'article.device[data-uuid="{uuid}"]')


def _api_device(running: RunningExtender, uuid: str) -> dict[str, Any]:
    for node in _api_nodes(running):
        for device in node["devices"]:
            if device["uuid"] == uuid:
                return dict(device)
    raise AssertionError(f"{uuid} is not in /api/v1/nodes")


def test_every_node_and_device_is_drawn_with_the_apis_numbers(
    page: Page, cluster: RunningExtender
) -> None:
    _open(page, cluster)
    nodes = _api_nodes(cluster)
    assert [node["name"] for node in nodes] == NODES
    expect(page.locator("section.node")).to_have_count(len(nodes))
    expect(page.locator("article.device")).to_have_count(sum(len(n["devices"]) for n in nodes))
    for node in nodes:
        row = page.locator(f'section.node[data-node="{node["name"]}"]')
        expect(row.locator("h3")).to_have_text(node["name"])
        expect(row.locator(".totals")).to_contain_text(
            f"memory {node['memory_used_mib']} / {node['memory_mib']} MiB"
        )
        expect(row.locator("article.device")).to_have_count(len(node["devices"]))
        for device in node["devices"]:
            drawn = row.locator(f'article.device[data-uuid="{device["uuid"]}"]')
            state = "unhealthy" if not device["healthy"] else "healthy"
            expect(drawn).to_have_attribute("data-state", state)
            # The model as the node reported it, whatever the vendor.
            expect(drawn.locator(".type")).to_have_text(device["type"])
            for metric, used, total in (
                ("memory", device["memory_used_mib"], device["memory_mib"]),
                ("compute", device["cores_used"], device["cores"]),
                ("slots", device["slots_used"], device["slots"]),
            ):
                bar = drawn.locator(f'.bar[data-metric="{metric}"]')
                expect(bar).to_have_attribute("data-used", str(used))
                expect(bar).to_have_attribute("data-total", str(total))
            for pod in device["pods"]:
                expect(
                    drawn.locator(f'li[data-pod="{pod["namespace"]}/{pod["name"]}"]')
                ).to_be_visible()
    # One unhealthy T4, drawn as such.
    expect(page.locator('article.device[data-state="unhealthy"]')).to_have_count(1)
    summary = cluster.client.get("/api/v1/summary").json()
    expect(page.locator('[data-stat="Pods"] strong')).to_have_text(str(summary["pods"]))
    expect(page.locator('[data-stat="GPUs"] strong')).to_have_text(str(summary["gpus"]))
    expect(page.locator('[data-stat="Pending reservations"] strong')).to_have_text(
        str(summary["pending_reservations"])
    )
    for name, namespace, node_name, _mem, _cores in PODS:
        allocation = page.locator(f'#allocations tr[data-pod="{namespace}/{name}"]')
        expect(allocation).to_contain_text(node_name)


def test_a_bind_through_the_verbs_shows_up_without_a_reload(
    page: Page, cluster: RunningExtender
) -> None:
    _open(page, cluster)
    page.evaluate("window.sameDocument = true")
    # Tag every node's section, to tell the ones drawn again from the ones kept.
    page.evaluate("document.querySelectorAll('section.node').forEach((s) => { s.tagged = true; })")
    uuid = "GPU-gpu-h100-1-1"
    before = _api_device(cluster, uuid)
    assert before["memory_used_mib"] == 0
    expect(_device(page, uuid).locator('.bar[data-metric="memory"]')).to_have_attribute(
        "data-used", "0"
    )

    place(cluster, pod_json("late", namespace="ml", mem=30000, cores=40), "gpu-h100-1")

    after = _api_device(cluster, uuid)
    assert after["memory_used_mib"] == 30000  # the policy put it on the idle GPU
    drawn = _device(page, uuid)
    expect(drawn.locator('li[data-pod="ml/late"]')).to_be_visible()
    expect(drawn.locator('.bar[data-metric="memory"]')).to_have_attribute("data-used", "30000")
    expect(drawn.locator('.bar[data-metric="memory"] .bar-value')).to_have_text(
        f"30000 / {after['memory_mib']} MiB"
    )
    expect(page.locator('#allocations tr[data-pod="ml/late"]')).to_contain_text(uuid)
    assert page.evaluate("window.sameDocument") is True
    tagged = page.evaluate(
        "Object.fromEntries([...document.querySelectorAll('section.node')]"
        ".map((s) => [s.dataset.node, s.tagged === true]))"
    )
    # Only the node that changed was drawn again.
    assert tagged == {"gpu-a100-1": True, "gpu-h100-1": False, "gpu-t4-1": True}


def test_the_what_if_form_says_where_a_pod_would_go_and_why_not_elsewhere(
    page: Page, cluster: RunningExtender
) -> None:
    _open(page, cluster)
    pod = pod_json("big", mem=70000)
    expected = cluster.client.post("/api/v1/whatif", json={"pod": pod}).json()
    assert [p["node"] for p in expected["feasible"]]  # somewhere
    assert set(expected["rejected"]) == {"gpu-t4-1"}

    page.fill("#whatif-pod", json.dumps(pod))
    page.click("#whatif-submit")

    feasible = page.locator("#whatif-result ol.feasible > li")
    expect(feasible).to_have_count(len(expected["feasible"]))
    for position, placement in enumerate(expected["feasible"]):
        expect(feasible.nth(position)).to_have_attribute("data-node", placement["node"])
        expect(feasible.nth(position)).to_contain_text(f"score {placement['score']}")
        for grants in placement["containers"] or []:
            for grant in grants:
                expect(feasible.nth(position)).to_contain_text(
                    f"{grant['uuid']} {grant['memory_mib']} MiB"
                )
    rejected = page.locator("#whatif-result table.rejected tbody tr")
    expect(rejected).to_have_count(len(expected["rejected"]))
    for node, why in expected["rejected"].items():
        row = page.locator(f'#whatif-result table.rejected tr[data-node="{node}"]')
        expect(row).to_contain_text(why["reason"])
        expect(row).to_contain_text(why["message"])
    # It reserved nothing.
    assert cluster.client.get("/api/v1/summary").json()["pods"] == len(PODS)


def test_cordon_needs_the_token(page: Page, cluster: RunningExtender) -> None:
    uuid = "GPU-gpu-a100-1-3"
    _open(page, cluster)
    expect(page.locator("#mode")).to_have_text("read-only")
    expect(page.locator("article.device").first).to_be_visible()
    expect(page.locator("button.action")).to_have_count(0)
    # Nor does the API take it from the page without the token.
    refused = page.evaluate(
        f"async () => (await fetch('/api/v1/devices/{uuid}/cordon', {{method: 'POST'}})).status"
    )
    assert refused == 401

    page.fill("#token", "not-the-token")
    page.click("#token-save")
    button = _device(page, uuid).locator('button[data-action="cordon"]')
    button.click()
    expect(page.locator("#error")).to_contain_text("refused")
    expect(page.locator("#error")).to_contain_text("wrong bearer token")
    assert _api_device(cluster, uuid)["cordoned"] is False

    page.fill("#token", TOKEN)
    page.click("#token-save")
    expect(page.locator("#mode")).to_contain_text("changes allowed")
    _device(page, uuid).locator('button[data-action="cordon"]').click()
    expect(_device(page, uuid)).to_have_attribute("data-state", "cordoned")
    assert _api_device(cluster, uuid)["cordoned"] is True
    expect(page.locator('[data-stat="GPUs"] small')).to_contain_text("1 cordoned")

    _device(page, uuid).locator('button[data-action="uncordon"]').click()
    expect(_device(page, uuid)).to_have_attribute("data-state", "healthy")
    assert _api_device(cluster, uuid)["cordoned"] is False


def test_reads_that_need_the_token_wait_for_it(
    page: Page, guarded_cluster: RunningExtender
) -> None:
    page.goto(f"{guarded_cluster.url}/ui")
    expect(page.locator("#error")).to_contain_text("401")
    expect(page.locator("#error")).to_contain_text("enter the admin token")
    expect(page.locator("article.device")).to_have_count(0)

    page.fill("#token", TOKEN)
    page.click("#token-save")
    expect(page.locator("article.device")).to_have_count(8)
    expect(page.locator("#error")).to_be_hidden()
    # Kept for the tab: a reload still reads.
    page.reload()
    expect(page.locator("article.device")).to_have_count(8)

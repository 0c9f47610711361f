// The cluster as the extender holds it: the summary, a row per node with its
// devices, and the allocations grouped per pod.

import { bar, el, percent } from "./dom.js";

export function renderSummary(target, s) {
  const items = [
    ["Nodes", `${s.nodes}`, s.nodes_with_problems ? `${s.nodes_with_problems} with problems` : ""],
    ["GPUs", `${s.gpus}`, `${s.unhealthy_gpus} unhealthy, ${s.cordoned_gpus} cordoned`],
    ["Memory used", percent(s.memory_utilisation), `${s.memory_used_mib} / ${s.memory_mib} MiB`],
    ["Compute used", percent(s.cores_utilisation), `${s.cores_used} / ${s.cores} cores`],
    ["Slots used", `${s.slots_used} / ${s.slots}`, ""],
    ["Pods", `${s.pods}`, ""],
    ["Pending reservations", `${s.pending_reservations}`, "reserved at bind, not bound yet"],
    ["Fragmentation", percent(s.fragmentation), "free memory a whole-GPU pod cannot use"],
    ["Conflicts", `${s.conflicts}`, ""],
  ];
  target.replaceChildren(
    ...items.map(([name, value, note]) =>
      el(
        "div",
        { class: "stat", dataset: { stat: name } },
        el("dt", {}, name),
        el("dd", {}, el("strong", {}, value), note ? el("small", {}, note) : null),
      ),
    ),
  );
}

function deviceState(device) {
  if (!device.healthy) return "unhealthy";
  if (device.cordoned) return "cordoned";
  return "healthy";
}

function renderDevice(device, actions) {
  const state = deviceState(device);
  // The vendor, unless the type already names it (NVIDIA-A100-..., Ascend910B3).
  const named = !device.vendor || device.type.toLowerCase().includes(device.vendor.toLowerCase());
  const kind = named ? device.type : `${device.vendor} ${device.type}`;
  let button = null;
  if (actions.canChange) {
    const verb = device.cordoned ? "uncordon" : "cordon";
    button = el(
      "button",
      {
        type: "button",
        class: `action ${verb}`,
        dataset: { action: verb, uuid: device.uuid },
        onclick: () => actions.onCordon(device.uuid, verb),
      },
      verb,
    );
  }
  const pods = device.pods.map((pod) =>
    el(
      "li",
      { class: pod.state, dataset: { pod: `${pod.namespace}/${pod.name}` } },
      `${pod.namespace}/${pod.name} `,
      el("small", {}, `${pod.memory_mib} MiB, ${pod.cores}% (${pod.state})`),
    ),
  );
  return el(
    "article",
    { class: `device ${state}`, dataset: { uuid: device.uuid, state } },
    el(
      "header",
      {},
      el("span", { class: "index" }, `#${device.index}`),
      el("span", { class: `badge ${state}` }, state),
      button,
    ),
    el("div", { class: "type", title: `mode ${device.mode}, NUMA ${device.numa}` }, kind),
    el("code", { class: "uuid" }, device.uuid),
    bar("memory", device.memory_used_mib, device.memory_mib, "MiB"),
    bar("compute", device.cores_used, device.cores, "%"),
    bar("slots", device.slots_used, device.slots),
    pods.length ? el("ul", { class: "pods" }, pods) : el("p", { class: "idle" }, "no pods"),
  );
}

function renderNode(node, actions) {
  return el(
    "section",
    { class: `node ${node.problem ? "problem" : ""}`, dataset: { node: node.name } },
    el(
      "header",
      {},
      el("h3", {}, node.name),
      el(
        "span",
        { class: "totals" },
        `${node.gpus} GPUs (${node.healthy_gpus} healthy, ${node.cordoned_gpus} cordoned) · ` +
          `memory ${node.memory_used_mib} / ${node.memory_mib} MiB · ` +
          `compute ${node.cores_used} / ${node.cores} · ${node.allocations} pods · ` +
          `fragmentation ${percent(node.fragmentation)}`,
      ),
      node.problem ? el("span", { class: "problem-text" }, node.problem) : null,
    ),
    el("div", { class: "devices" }, (node.devices || []).map((d) => renderDevice(d, actions))),
  );
}

// Each node's section is kept while its data stays the same: with thousands of
// nodes, drawing only those that changed keeps a refresh cheap.
const drawnNodes = new WeakMap();

export function renderNodes(target, nodes, actions) {
  if (!nodes.length) {
    drawnNodes.delete(target);
    target.replaceChildren(el("p", { class: "note" }, "No node is registered."));
    return;
  }
  const before = drawnNodes.get(target) || new Map();
  const after = new Map();
  const sections = nodes.map((node) => {
    const key = JSON.stringify([node, actions.canChange]);
    const kept = before.get(node.name);
    const section = kept && kept.key === key ? kept.section : renderNode(node, actions);
    after.set(node.name, { key, section });
    return section;
  });
  drawnNodes.set(target, after);
  const current = [...target.children];
  const same = current.length === sections.length && sections.every((s, i) => s === current[i]);
  if (!same) target.replaceChildren(...sections);
}

// One row per pod: an allocation row is one container on one GPU.
export function renderAllocations(body, note, page) {
  const pods = new Map();
  for (const row of page.items) {
    let pod = pods.get(row.pod_uid);
    if (!pod) {
      pod = { ...row, rows: [], states: new Set() };
      pods.set(row.pod_uid, pod);
    }
    pod.rows.push(row);
    pod.states.add(row.state);
  }
  body.replaceChildren(
    ...[...pods.values()].map((pod) =>
      el(
        "tr",
        { dataset: { pod: `${pod.namespace}/${pod.pod}` } },
        el("td", {}, `${pod.namespace}/${pod.pod}`),
        el("td", {}, pod.states.has("reserved") ? "reserved" : "bound"),
        el("td", {}, pod.node),
        el(
          "td",
          {},
          el(
            "ul",
            { class: "grants" },
            pod.rows.map((r) =>
              el(
                "li",
                { dataset: { uuid: r.device_uuid } },
                `${r.init ? "init " : ""}${r.container_index}: `,
                el("code", {}, r.device_uuid),
                ` ${r.memory_mib} MiB, ${r.cores}%`,
              ),
            ),
          ),
        ),
      ),
    ),
  );
  const shown = page.items.length;
  note.textContent = !page.total
    ? "No pod holds a GPU."
    : shown < page.total
      ? `${page.total} allocation rows; the first ${shown} are shown.`
      : `${page.total} allocation rows.`;
}

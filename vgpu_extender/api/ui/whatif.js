// The what-if form: POST /api/v1/whatif with a pod, then where it would go (best
// first, with its devices) and why every other node would not. Reserves nothing.

import { post } from "./api.js";
import { el } from "./dom.js";

const EXAMPLE = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "what-if", namespace: "default" },
  spec: {
    containers: [
      {
        name: "main",
        resources: { limits: { "nvidia.com/gpu": "1", "nvidia.com/gpumem": "8000" } },
      },
    ],
  },
};

function grants(containers) {
  if (!containers) return el("small", {}, "devices not chosen (beyond the best few)");
  return el(
    "ul",
    { class: "grants" },
    containers.map((devices, index) =>
      el(
        "li",
        {},
        `container ${index}: `,
        devices.length
          ? devices.map((g, i) => [i ? ", " : "", el("code", {}, g.uuid), ` ${g.memory_mib} MiB ${g.cores}%`])
          : "no device",
      ),
    ),
  );
}

function render(target, answer) {
  if (!answer.managed) {
    target.replaceChildren(
      el("p", { class: "note" }, "The pod asks for no managed resource: the extender would pass it through."),
    );
    return;
  }
  const feasible = answer.feasible.length
    ? el(
        "ol",
        { class: "feasible" },
        answer.feasible.map((p) =>
          el("li", { dataset: { node: p.node } }, el("strong", {}, p.node), ` score ${p.score} `, grants(p.containers)),
        ),
      )
    : el("p", { class: "error-text" }, "No node would take it.");
  const rejected = Object.entries(answer.rejected);
  target.replaceChildren(
    el("h3", {}, "Would go to"),
    feasible,
    el("h3", {}, "Would not go to"),
    rejected.length
      ? el(
          "table",
          { class: "rejected" },
          el("thead", {}, el("tr", {}, el("th", {}, "Node"), el("th", {}, "Reason"), el("th", {}, "Why"))),
          el(
            "tbody",
            {},
            rejected.map(([node, why]) =>
              el(
                "tr",
                { dataset: { node } },
                el("td", {}, node),
                el("td", {}, why.reason, why.unresolvable ? " (preemption cannot help)" : ""),
                el("td", {}, why.message),
              ),
            ),
          ),
        )
      : el("p", { class: "note" }, "Every candidate node would take it."),
  );
}

export function setUpWhatIf(form, result) {
  const pod = form.elements.pod;
  if (!pod.value) pod.value = JSON.stringify(EXAMPLE, null, 2);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let body;
    try {
      body = { pod: JSON.parse(pod.value) };
    } catch (error) {
      result.replaceChildren(el("p", { class: "error-text" }, `The pod is not JSON: ${error.message}`));
      return;
    }
    const nodes = form.elements.nodes.value.split(",").map((n) => n.trim()).filter(Boolean);
    if (nodes.length) body.nodes = nodes;
    result.replaceChildren(el("p", { class: "note" }, "Asking…"));
    try {
      render(result, await post("/api/v1/whatif", body));
    } catch (error) {
      result.replaceChildren(el("p", { class: "error-text" }, error.message));
    }
  });
}

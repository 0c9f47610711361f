// Small DOM builders. Everything shown comes from the cluster (pod and node names
// are chosen by tenants), so text always goes in as text, never as HTML.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export const percent = (ratio) => `${(100 * ratio).toFixed(1)}%`;

// A bar of ``used`` out of ``total``: the width set through the CSSOM, which the
// page's Content-Security-Policy allows (an inline style attribute it does not).
export function bar(label, used, total, unit = "") {
  const fill = el("span", { class: "fill" });
  const ratio = total > 0 ? Math.min(1, used / total) : 0;
  fill.style.width = `${(100 * ratio).toFixed(1)}%`;
  const text = `${used} / ${total}${unit ? ` ${unit}` : ""}`;
  return el(
    "div",
    { class: `bar ${ratio >= 1 ? "full" : ""}`, dataset: { metric: label, used, total } },
    el("span", { class: "bar-label" }, label),
    el("span", { class: "track", role: "img", "aria-label": `${label} ${text}` }, fill),
    el("span", { class: "bar-value" }, text),
  );
}

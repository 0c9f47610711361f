// The dashboard: reads the admin API every few seconds and draws it; the cordon
// buttons only once a token is entered (the API refuses changes without one anyway).

import { get, post, setToken, token } from "./api.js";
import { renderAllocations, renderNodes, renderSummary } from "./cluster.js";
import { setUpWhatIf } from "./whatif.js";

const REFRESH_MS = 2000;
const $ = (id) => document.getElementById(id);

let timer = null;
let lastDrawn = "";

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

function showMode() {
  $("mode").textContent = token() ? "token entered: changes allowed" : "read-only";
  document.body.dataset.mode = token() ? "admin" : "read-only";
}

async function cordon(uuid, verb) {
  try {
    await post(`/api/v1/devices/${encodeURIComponent(uuid)}/${verb}`);
    showError("");
  } catch (error) {
    showError(`${verb} ${uuid} refused: ${error.message}`);
    return;
  } finally {
    refreshSoon();
  }
}

async function refresh() {
  try {
    const [summary, nodes, allocations] = await Promise.all([
      get("/api/v1/summary"),
      get("/api/v1/nodes?devices=true"),
      get("/api/v1/allocations?limit=1000"),
    ]);
    // Drawn again only when something changed: a button under the pointer stays put.
    const drawn = JSON.stringify([summary, nodes, allocations, Boolean(token())]);
    if (drawn !== lastDrawn) {
      renderSummary($("summary"), summary);
      renderNodes($("nodes"), nodes, { canChange: Boolean(token()), onCordon: cordon });
      renderAllocations($("allocations").tBodies[0], $("allocations-note"), allocations);
      lastDrawn = drawn;
    }
    $("status").textContent = `Updated ${new Date().toLocaleTimeString()}`;
    $("status").dataset.updated = String(Date.now());
    if ($("error").dataset.source === "read") {
      showError("");
      delete $("error").dataset.source;
    }
  } catch (error) {
    const hint = error.status === 401 || error.status === 403 ? " (enter the admin token above)" : "";
    showError(`Reading the cluster failed: ${error.message}${hint}`);
    $("error").dataset.source = "read";
    $("status").textContent = "Not updated";
  }
}

// One refresh at a time; the next one is scheduled when this one ends, or at once
// when something asked for one meanwhile. A hidden tab does not poll.
let running = false;
let again = false;

async function loop() {
  timer = null;
  running = true;
  const started = performance.now();
  try {
    if (!document.hidden) await refresh();
  } finally {
    running = false;
  }
  // A large cluster takes a while to read and draw: never more than half the time
  // spent refreshing.
  const took = performance.now() - started;
  timer = setTimeout(loop, again ? 0 : Math.max(REFRESH_MS, 2 * took));
  again = false;
}

function refreshSoon() {
  if (running) {
    again = true;
    return;
  }
  if (timer !== null) clearTimeout(timer);
  timer = setTimeout(loop, 0);
}

function setUpToken() {
  const form = $("token-form");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    setToken(form.elements.token.value.trim());
    form.elements.token.value = "";
    showMode();
    refreshSoon();
  });
  $("token-forget").addEventListener("click", () => {
    setToken("");
    showMode();
    refreshSoon();
  });
}

setUpToken();
showMode();
setUpWhatIf($("whatif-form"), $("whatif-result"));
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) refreshSoon();
});
loop();

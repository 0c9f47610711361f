// The admin API, as this page calls it: the token (when one is entered) goes with
// every request as a bearer token; it is kept for this tab only (sessionStorage).

const TOKEN_KEY = "vgpu-extender.admin-token";

export class ApiError extends Error {
  constructor(status, detail) {
    super(`HTTP ${status}: ${detail}`);
    this.status = status;
    this.detail = detail;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) {
    sessionStorage.setItem(TOKEN_KEY, value);
  } else {
    sessionStorage.removeItem(TOKEN_KEY);
  }
}

// ``detail`` is a string for our own errors, a list of field errors for FastAPI's 422.
function describe(detail) {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail.map((e) => `${(e.loc || []).join(".")}: ${e.msg}`).join("; ");
  }
  return JSON.stringify(detail);
}

export async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  const given = token();
  if (given) headers.Authorization = `Bearer ${given}`;
  const init = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { detail: text };
  }
  if (!response.ok) {
    throw new ApiError(response.status, describe(data && data.detail !== undefined ? data.detail : text));
  }
  return data;
}

export const get = (path) => call("GET", path);
export const post = (path, body) => call("POST", path, body);

import { useCallback, useEffect, useRef, useState } from "react";

export const POLL_MS = 3000;

// Same-origin requests resolved against <base href> (Airflow's base path); the browser sends
// Airflow's session cookie, which the plugin API authenticates like Airflow's own API.
export function apiUrl(path) {
  return new URL(`t9k/api/${path}`, document.baseURI).toString();
}

async function parse(resp) {
  const text = await resp.text();
  let body = text;
  try {
    body = text ? JSON.parse(text) : {};
  } catch {
    /* plain text */
  }
  if (!resp.ok) {
    const detail = typeof body === "object" && body && body.detail ? body.detail : text;
    throw new Error(`${resp.status}: ${typeof detail === "string" ? detail : JSON.stringify(detail)}`);
  }
  return body;
}

export async function getJson(path) {
  return parse(await fetch(apiUrl(path), { credentials: "same-origin", headers: { Accept: "application/json" } }));
}

export async function getText(path) {
  const resp = await fetch(apiUrl(path), { credentials: "same-origin" });
  if (!resp.ok) throw new Error(`${resp.status}: ${await resp.text()}`);
  return resp.text();
}

export async function postJson(path, body) {
  return parse(
    await fetch(apiUrl(path), {
      method: "POST",
      credentials: "same-origin",
      headers: { Accept: "application/json", "Content-Type": "application/json" },
      body: JSON.stringify(body || {}),
    }),
  );
}

// Fetches `load()` now and every POLL_MS while `live`; keeps the last good data on an error.
export function usePoll(load, deps, live = true) {
  const [state, setState] = useState({ loading: true });
  const loadRef = useRef(load);
  loadRef.current = load;
  const refresh = useCallback(() => {
    loadRef.current().then(
      (data) => setState({ data, updated: new Date() }),
      (error) => setState((s) => ({ ...s, loading: false, error: String(error.message || error) })),
    );
  }, []);
  useEffect(() => {
    refresh();
    if (!live) return undefined;
    const t = setInterval(refresh, POLL_MS);
    return () => clearInterval(t);
  }, [...deps, live]);
  return [state, refresh];
}

// Airflow's own state palettes, so phases look like task states.
const PALETTE = {
  Succeeded: "success",
  Failed: "failed",
  Running: "running",
  Pending: "queued",
  Created: "queued",
  Initializing: "queued",
  Paused: "up_for_reschedule",
  Resuming: "restarting",
  Restarting: "up_for_retry",
  Unknown: "removed",
};

export function palette(phase) {
  return PALETTE[phase] || "gray";
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

// Path of a task instance in Airflow's UI (relative to <base href>), optionally a tab.
export function tiPath(task, tab) {
  const base = `dags/${encodeURIComponent(task.dag_id)}/runs/${encodeURIComponent(task.run_id)}/tasks/${encodeURIComponent(task.task_id)}`;
  const mapped = task.map_index >= 0 ? `/mapped/${task.map_index}` : "";
  return base + mapped + (tab ? `/${tab}` : "");
}

export function taskApi(dagId, runId, taskId, mapIndex, suffix = "") {
  const mi = mapIndex === undefined || mapIndex === null ? "" : `map_index=${encodeURIComponent(mapIndex)}`;
  const path = `dags/${encodeURIComponent(dagId)}/runs/${encodeURIComponent(runId)}/tasks/${encodeURIComponent(taskId)}/job${suffix}`;
  return { path, mi };
}

export function withQuery(path, ...parts) {
  const q = parts.filter(Boolean).join("&");
  return q ? `${path}?${q}` : path;
}

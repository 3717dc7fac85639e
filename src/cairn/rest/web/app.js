// Cairn's web UI: one job's control endpoint, kept up to date by its live event stream
// (server-sent events read with fetch, which can send the token), polled every 2 s through
// its REST API while the stream is down.
// Invariant: data from the job (names, tracebacks, configuration) is only ever set as text
// (textContent, SVG text nodes), never as markup; the token comes from the URL's fragment
// (#token=...), is kept in sessionStorage and sent as a bearer token with every call.
"use strict";

const POLL_MS = 2000;
const RETRY_LIVE_MS = 5000;
const fragment = new URLSearchParams(location.hash.slice(1));
if (fragment.get("token")) {
  sessionStorage.setItem("cairn-token", fragment.get("token"));
  history.replaceState(null, "", location.pathname);
}
const token = sessionStorage.getItem("cairn-token") || "";
let jid = null;
let tab = "overview";
let selectedCheckpoint = null;
let live = false;
const view = { job: null, checkpoints: null, pressure: {}, user: {}, latency: [], jobs: null, archived: null };

async function api(path, init = {}) {
  const headers = Object.assign({ Authorization: "Bearer " + token }, init.headers || {});
  const response = await fetch(path, Object.assign({}, init, { headers }));
  const body = await response.json();
  if (!response.ok) {
    const error = new Error((body.errors || [response.statusText])[0]);
    error.status = response.status;
    throw error;
  }
  return body;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = String(text);
  return node;
}

// The first ``textColumns`` columns hold text (left-aligned), the others numbers.
function table(headers, rows, onClick, textColumns = 1) {
  const head = el("tr", {}, ...headers.map((h, i) => el("th", i < textColumns ? { class: "text" } : {}, h)));
  const body = rows.map((r) => {
    const tr = el("tr", onClick ? { class: "clickable" } : {}, ...r.cells.map((c, i) =>
      el("td", Object.assign(i < textColumns ? { class: "text" } : {}, r.ids ? { id: r.ids[i] || "" } : {}), c)));
    if (onClick) tr.addEventListener("click", () => onClick(r));
    return tr;
  });
  return el("table", {}, head, ...body);
}

const ms = (v) => (v === null || v === undefined || v < 0 ? "-" : v + " ms");
const bytes = (v) => {
  if (v === null || v === undefined || v < 0) return "-";
  for (const [u, s] of [["GiB", 1 << 30], ["MiB", 1 << 20], ["KiB", 1 << 10]]) if (v >= s) return (v / s).toFixed(1) + " " + u;
  return v + " B";
};
const time = (t) => (t ? new Date(t).toLocaleTimeString() : "-");
const pct = (r) => Math.round(r * 100) + "%";
const num = (v) => (v === null || v === undefined ? "-" : Number.isInteger(v) ? String(v) : v.toFixed(3));
const count = (v) => {
  for (const [u, s] of [["G", 1e9], ["M", 1e6], ["k", 1e3]]) if (v >= s) return (v / s).toFixed(1) + u;
  return v.toFixed(0);
};

// What a job costs, from Cairn's "cpu" block of /jobs/:jobid and /jobs/overview rows: the
// records/s its sources read, the cores its workers use and the CPU time per source record,
// over the last second while it runs; an ended job's averages over its last attempt.
function cost(job) {
  const c = job.cpu;
  if (!c) return { rate: "-", cores: "-", perRecord: "-", measured: "-" };
  const ended = job["end-time"] >= 0;
  const us = ended ? c["cpu-per-record-us-since-start"] : c["cpu-per-record-us"];
  return {
    rate: ended ? "-" : count(c["source-records-per-second"]) + " rec/s",
    cores: (ended ? c["cores-since-start"] : c.cores).toFixed(2),
    perRecord: us === null || us === undefined ? "-" : us.toFixed(1) + " \u00b5s",
    measured: c.measured === "task-thread" ? "task threads only (in-process workers)" : "worker processes",
  };
}

function message(text) {
  document.getElementById("message").textContent = text;
}

// ------------------------------------------------------------------ data

function unreachable(e) {
  message(e.status === 401 ? "Open this page with #token=<the job's token> (the link cairn list --web prints)." : "Cannot reach the job: " + e.message);
}

// The endpoint's own job is the first row of /jobs/overview.
async function findJob() {
  if (jid === null) {
    const overview = await api("/jobs/overview");
    jid = overview.jobs[0].jid;
    view.jobs = overview.jobs;
  }
}

async function refresh() {
  if (live) return;
  try {
    await findJob();
    view.job = await api("/jobs/" + jid);
    try {
      view.checkpoints = await api("/jobs/" + jid + "/checkpoints");
    } catch (e) {
      view.checkpoints = null;
    }
    for (const v of view.job.vertices) {
      const base = `/jobs/${jid}/vertices/${v.id}`;
      view.pressure[v.id] = await api(base + "/backpressure");
      // User metrics are the aggregated ids with an operator in them ("<operator>.<name>").
      const ids = (await api(base + "/subtasks/metrics")).map((m) => m.id).filter((id) => id.includes("."));
      view.user[v.id] = ids.length ? await api(base + "/subtasks/metrics?get=" + ids.map(encodeURIComponent).join(",")) : [];
    }
    // Latency histograms (metrics.latency.interval): Flink's job-level ids "latency...._p99".
    const lids = (await api("/jobs/" + jid + "/metrics")).map((m) => m.id)
      .filter((id) => id.startsWith("latency.") && /_(median|p95|p99|max)$/.test(id));
    view.latency = lids.length ? await api("/jobs/" + jid + "/metrics?get=" + lids.map(encodeURIComponent).join(",")) : [];
    render();
  } catch (e) {
    unreachable(e);
  }
}

// Server-sent events over fetch: "event: <name>" and "data: <json>" lines, a blank line ends
// one event. The stream ends after the job's final state.
async function connectLive() {
  try {
    await findJob();
    const response = await fetch(`/jobs/${jid}/events`, { headers: { Authorization: "Bearer " + token } });
    if (!response.ok || !response.body) throw new Error("HTTP " + response.status);
    setLive(true);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        onEvent(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
  } catch (e) {
    if (e.status === 401) unreachable(e);
  }
  setLive(false);
  const ended = view.job && ["FINISHED", "CANCELED", "FAILED"].includes(view.job.state);
  if (!ended) setTimeout(connectLive, RETRY_LIVE_MS);
}

function onEvent(text) {
  let name = "message", data = "";
  for (const line of text.split("\n")) {
    if (line.startsWith("event: ")) name = line.slice(7);
    else if (line.startsWith("data: ")) data += line.slice(6);
  }
  const body = JSON.parse(data);
  if (name === "job") view.job = body;
  else if (name === "checkpoints") view.checkpoints = body;
  else if (name === "user-metrics") view.user = body;
  else if (name === "latency") view.latency = body;
  else if (name === "backpressure") view.pressure = body;
  if (name === "backpressure") render();  // the last event of an update
}

function setLive(on) {
  live = on;
  const node = document.getElementById("live");
  node.textContent = on ? "live" : "polling";
  node.dataset.live = String(on);
}

// ------------------------------------------------------------------ tabs

function render() {
  const job = view.job;
  document.getElementById("job-name").textContent = job.name + " (" + job.jid + ")";
  document.getElementById("job-state").textContent = job.state;
  const renderers = { overview, graph, checkpoints, config, exceptions, doctor };
  if (tab === "overview" || tab === "graph" || tab === "checkpoints") renderers[tab](section(tab));
  if (tab === "jobs") jobs(section("jobs"));
}

function section(name) {
  const node = document.getElementById("tab-" + name);
  node.replaceChildren();
  return node;
}

function overview(node) {
  const job = view.job;
  const c = cost(job);
  node.append(el("dl", {},
    el("dt", {}, "Job"), el("dd", { id: "overview-name" }, job.name),
    el("dt", {}, "State"), el("dd", { id: "overview-state" }, job.state),
    el("dt", {}, "Started"), el("dd", {}, new Date(job["start-time"]).toLocaleString()),
    el("dt", {}, "Duration"), el("dd", {}, Math.round(job.duration / 1000) + " s"),
    el("dt", {}, "Source rate"), el("dd", { id: "overview-rate" }, c.rate),
    el("dt", {}, "CPU (cores)"), el("dd", { id: "overview-cores" }, c.cores),
    el("dt", {}, "CPU per record"), el("dd", { id: "overview-cpu-per-record" }, c.perRecord),
    el("dt", {}, "CPU measured"), el("dd", { id: "overview-cpu-measured" }, c.measured)));
  node.append(vertexTable(job, view.pressure));
  node.append(userMetricsTable(job, view.user));
  node.append(latencyTable(view.latency));
}

// Latency markers' histograms (ms), one row per scope: "latency.<scope>.latency_<field>".
function latencyTable(values) {
  const rows = new Map();
  for (const m of values || []) {
    const cut = m.id.lastIndexOf(".latency_");
    const scope = m.id.slice("latency.".length, cut), field = m.id.slice(cut + ".latency_".length);
    if (!rows.has(scope)) rows.set(scope, {});
    rows.get(scope)[field] = m.value;
  }
  if (!rows.size) return el("p", { id: "latency-none", class: "hint" }, "No latency markers (metrics.latency.interval).");
  const body = [...rows].map(([scope, f]) => ({
    cells: [scope, f.median ?? "-", f.p95 ?? "-", f.p99 ?? "-", f.max ?? "-"],
    ids: ["", "latency-" + scope + "-median", "latency-" + scope + "-p95", "latency-" + scope + "-p99", "latency-" + scope + "-max"],
  }));
  return el("div", { id: "latency" }, el("h3", {}, "Latency (ms)"), table(["Scope", "p50", "p95", "p99", "Max"], body));
}

// The metrics the job's functions registered (runtime_context.get_metrics_group()), each
// aggregated over the vertex's subtasks: counters add up in "sum", gauges read in "min"/"max".
function userMetricsTable(job, user) {
  const rows = [];
  for (const v of job.vertices) {
    for (const m of (user || {})[v.id] || []) {
      const id = "user-" + v.id + "-" + m.id + "-";
      rows.push({ cells: [v.name, m.id, num(m.sum), num(m.min), num(m.max)], ids: ["", "", id + "sum", id + "min", id + "max"] });
    }
  }
  if (!rows.length) return el("p", { id: "user-metrics-none", class: "hint" }, "No user metrics (runtime_context.get_metrics_group()).");
  return el("div", { id: "user-metrics" }, el("h3", {}, "User metrics"), table(["Vertex", "Metric", "Sum", "Min", "Max"], rows, undefined, 2));
}

// Records and bytes are the vertex's "metrics" block of /jobs/:jobid (Flink's names): bytes
// are those of network channels, the only ones that serialize.
function vertexTable(job, pressure, prefix = "") {
  return table(
    ["Vertex", "Status", "Parallelism", "Records in", "Records out", "Bytes in", "Bytes out", "Backpressure", "Busy (max)"],
    job.vertices.map((v) => {
      const p = (pressure || {})[v.id] || { subtasks: [], backpressureLevel: "-" };
      const busy = Math.max(0, ...p.subtasks.map((s) => s.busyRatio));
      const m = v.metrics || {};
      return {
        cells: [v.name, v.status, v.parallelism, m["read-records"] ?? "-", m["write-records"] ?? "-", bytes(m["read-bytes"]),
          bytes(m["write-bytes"]), p.backpressureLevel, pct(busy)],
        ids: ["", "status-", "", "records-in-", "records-out-", "bytes-in-", "bytes-out-", "bp-level-", ""].map((id) => (id ? prefix + id + v.id : "")),
      };
    }));
}

// This driver's jobs (running and finished), the running jobs of other drivers on this
// machine (served by their own endpoints: open those with cairn list --web) and the ended
// jobs of the job archive (served here from their archive, like this driver's finished ones).
function jobs(node) {
  const rows = view.jobs || [];
  node.append(table(
    ["Job", "ID", "State", "Started", "Duration", "Tasks", "Source rate", "CPU (cores)", "CPU per record", "Served by"],
    rows.map((j) => {
      const c = cost(j);
      return {
        jid: j.jid,
        cells: [j.name, j.jid, j.state, new Date(j["start-time"]).toLocaleString(), Math.round(j.duration / 1000) + " s",
          j.tasks.total, c.rate, c.cores, c.perRecord, j.jid === jid ? "this page" : j.endpoint || (j.archived ? "archive" : "this driver")],
        ids: ["job-name-" + j.jid, "", "job-state-" + j.jid, "", "", "", "job-rate-" + j.jid, "job-cores-" + j.jid,
          "job-cpu-per-record-" + j.jid, ""],
      };
    }),
    async (row) => {
      if (row.jid === jid) return show("overview");
      const target = rows.find((j) => j.jid === row.jid);
      if (target.endpoint) return message("Job " + target.name + " runs in another driver: cairn list --web prints its link.");
      try {
        view.archived = await api("/jobs/" + row.jid);
        render();
      } catch (e) {
        message(e.message);
      }
    }));
  const a = view.archived;
  if (a) node.append(el("h3", { id: "archived-name" }, a.name + " (" + a.state + ")"), vertexTable(a, {}, "archived-"));
}

async function refreshJobs() {
  try {
    view.jobs = (await api("/jobs/overview")).jobs;
    if (tab === "jobs") render();
  } catch (e) {
    unreachable(e);
  }
}

function graph(node) {
  const nodes = view.job.plan.nodes;
  const depth = {};
  const depthOf = (n) => {
    if (depth[n.id] !== undefined) return depth[n.id];
    const inputs = (n.inputs || []).map((i) => depthOf(nodes.find((m) => m.id === i.id)));
    return (depth[n.id] = inputs.length ? Math.max(...inputs) + 1 : 0);
  };
  nodes.forEach(depthOf);
  const W = 260, H = 110, GAP = 90;
  const rows = {};
  const pos = {};
  for (const n of nodes) {
    const d = depth[n.id];
    rows[d] = (rows[d] || 0) + 1;
    pos[n.id] = { x: 20 + d * (W + GAP), y: 20 + (rows[d] - 1) * (H + 40) };
  }
  const width = 40 + (Math.max(...Object.values(depth)) + 1) * (W + GAP);
  const height = 40 + Math.max(...Object.values(rows)) * (H + 40);
  const root = svg("svg", { width, height, id: "job-graph" });
  for (const n of nodes) {
    for (const i of n.inputs || []) {
      const a = pos[i.id], b = pos[n.id];
      root.append(svg("line", { x1: a.x + W, y1: a.y + H / 2, x2: b.x, y2: b.y + H / 2, stroke: "#888" }));
      root.append(svg("text", { x: (a.x + W + b.x) / 2 - 25, y: (a.y + b.y + H) / 2 - 6, "font-size": 11 }, i.ship_strategy));
    }
  }
  for (const n of nodes) {
    const { x, y } = pos[n.id];
    const p = view.pressure[n.id] || { subtasks: [] };
    const worst = p.subtasks.reduce((a, s) => (s.ratio > a.ratio ? s : a), { ratio: 0, busyRatio: 0 });
    const busiest = Math.max(0, ...p.subtasks.map((s) => s.busyRatio));
    const cls = worst.ratio > 0.5 ? "bp" : busiest > 0.5 ? "busy" : "idle";
    const g = svg("g", { id: "vertex-" + n.id, "data-state": cls });
    g.append(svg("rect", { x, y, width: W, height: H, rx: 6, class: cls, "fill-opacity": 0.25, stroke: "#333" }));
    g.append(svg("text", { x: x + 8, y: y + 18, "font-weight": "bold" }, n.description));
    g.append(svg("text", { x: x + 8, y: y + 36, "font-size": 12 }, "parallelism " + n.parallelism));
    p.subtasks.forEach((s, k) => {
      const by = y + 46 + k * 14, bw = W - 16;
      let bx = x + 8;
      for (const [c, r] of [["busy", s.busyRatio], ["bp", s.ratio], ["idle", s.idleRatio]]) {
        const rect = svg("rect", { x: bx, y: by, width: Math.max(0, r * bw), height: 10, class: c });
        rect.append(svg("title", {}, `subtask ${s.subtask + 1}: ${c} ${pct(r)}`));
        g.append(rect);
        bx += r * bw;
      }
    });
    root.append(g);
  }
  node.append(el("p", { class: "legend" }, "Per subtask:", el("span", { class: "busy" }), "busy",
    el("span", { class: "bp" }), "backpressured", el("span", { class: "idle" }), "idle"), root);
}

function checkpoints(node) {
  const cp = view.checkpoints;
  if (cp === null) {
    node.append(el("p", {}, "Checkpointing is disabled for this job."));
    return;
  }
  const c = cp.counts;
  node.append(el("dl", {},
    el("dt", {}, "Completed"), el("dd", { id: "cp-completed" }, c.completed),
    el("dt", {}, "Failed"), el("dd", { id: "cp-failed" }, c.failed),
    el("dt", {}, "In progress"), el("dd", { id: "cp-in-progress" }, c.in_progress),
    el("dt", {}, "Restored"), el("dd", {}, c.restored),
    el("dt", {}, "Latest completed"), el("dd", { id: "cp-latest" }, cp.latest.completed ? "#" + cp.latest.completed.id + ", " + ms(cp.latest.completed.end_to_end_duration) : "-"),
    el("dt", {}, "Latest savepoint"), el("dd", {}, cp.latest.savepoint ? cp.latest.savepoint.external_path || "#" + cp.latest.savepoint.id : "-"),
    el("dt", {}, "Latest failed"), el("dd", {}, cp.latest.failed ? "#" + cp.latest.failed.id + " " + (cp.latest.failed.failure_reason || "") : "-")));
  node.append(chart(cp.history.filter((h) => h.status === "COMPLETED").reverse()));
  node.append(el("h3", {}, "History"), table(
    ["ID", "Status", "Type", "Trigger", "End to end", "Checkpointed", "Full size", "Processed", "Persisted", "Unaligned"],
    cp.history.map((h) => ({
      id: h.id,
      cells: ["#" + h.id, h.status, h.checkpoint_type, time(h.trigger_timestamp), ms(h.end_to_end_duration), bytes(h.checkpointed_size),
        bytes(h.state_size), bytes(h.processed_data), bytes(h.persisted_data), h.unaligned ? "yes" : "no"],
    })),
    (row) => { selectedCheckpoint = row.id; details(); }));
  node.append(el("div", { id: "cp-details" }));
  if (selectedCheckpoint !== null) details();
}

function chart(history) {
  const W = 600, H = 120;
  const root = svg("svg", { width: W, height: H + 20, id: "cp-chart" });
  if (history.length < 2) return root;
  const line = (key, colour) => {
    const max = Math.max(1, ...history.map((h) => h[key]));
    const pts = history.map((h, i) => `${(i / (history.length - 1)) * (W - 10) + 5},${H - (h[key] / max) * (H - 10)}`);
    root.append(svg("polyline", { points: pts.join(" "), fill: "none", stroke: colour }));
  };
  line("end_to_end_duration", "#d9534f");
  line("state_size", "#5b9bd5");
  root.append(svg("text", { x: 5, y: H + 15, "font-size": 11 }, "end-to-end duration (red) and full size (blue) of the completed checkpoints"));
  return root;
}

async function details() {
  const target = document.getElementById("cp-details");
  if (!target) return;
  try {
    const d = await api(`/jobs/${jid}/checkpoints/details/${selectedCheckpoint}`);
    const names = Object.fromEntries(view.job.vertices.map((v) => [v.id, v.name]));
    target.replaceChildren(el("h3", {}, "Checkpoint #" + d.id + " per subtask"), table(
      ["Subtask", "Acknowledged", "End to end", "Start delay", "Alignment", "Sync", "Async", "Size", "Persisted"],
      d.subtasks.map((s) => ({ cells: [names[s.vertex_id] + " (" + (s.subtask_index + 1) + ")", time(s.ack_timestamp), ms(s.end_to_end_duration),
        ms(s.start_delay), ms(s.alignment_duration), ms(s.sync_duration), ms(s.async_duration), bytes(s.state_size), bytes(s.persisted_data)] }))));
  } catch (e) {
    target.replaceChildren(el("p", {}, e.message));
  }
}

async function config(node) {
  const c = await api(`/jobs/${jid}/config`);
  const rows = Object.entries(c["execution-config"]["user-config"]).map(([k, v]) => ({ cells: [k, v] }));
  node.append(rows.length ? table(["Key", "Value"], rows) : el("p", {}, "No configuration keys were set."));
}

async function exceptions(node) {
  const e = await api(`/jobs/${jid}/exceptions`);
  if (e["root-exception"]) node.append(el("h3", {}, "Root exception"), el("pre", {}, e["root-exception"]));
  const entries = e.exceptionHistory.entries;
  node.append(el("h3", {}, "Restarts (" + entries.length + ")"));
  for (const x of entries) node.append(el("p", {}, time(x.timestamp) + " " + x.exceptionName), el("pre", {}, x.stacktrace));
}

async function doctor(node) {
  const d = await api(`/jobs/${jid}/doctor`);
  node.append(el("p", {}, d.findings.length + " finding(s) on " + d.checkpoints + " checkpoint(s)."));
  for (const f of d.findings) {
    const figures = Object.entries(f.figures).map(([k, v]) => el("li", {}, k + ": " + v));
    node.append(el("div", { class: "finding" }, el("h4", {}, f.title), el("ul", {}, ...figures),
      el("p", {}, f.advice), el("p", {}, "Set: " + f.keys.join(", "))));
  }
}

// ------------------------------------------------------------------ commands

async function waitForOperation(trigger) {
  for (;;) {
    const s = await api(`/jobs/${jid}/savepoints/${trigger}`);
    if (s.status.id === "COMPLETED") {
      if (s.operation["failure-cause"]) throw new Error(s.operation["failure-cause"]["stack-trace"]);
      return s.operation.location;
    }
    await new Promise((r) => setTimeout(r, 300));
  }
}

async function command(what) {
  if (!confirm(what + " job " + view.job.name + "?")) return;
  try {
    if (what === "Cancel") {
      await api(`/jobs/${jid}?mode=cancel`, { method: "PATCH" });
      message("Cancel requested.");
      return;
    }
    const path = what === "Savepoint" ? "savepoints" : "stop";
    const body = what === "Savepoint" ? { "cancel-job": false } : { drain: what === "Stop and drain" };
    const trigger = (await api(`/jobs/${jid}/${path}`, { method: "POST", body: JSON.stringify(body), headers: { "Content-Type": "application/json" } }))["request-id"];
    message(what + " in progress...");
    const location = await waitForOperation(trigger);
    message(what + " completed: " + location);
    document.getElementById("message").setAttribute("data-savepoint", location);
  } catch (e) {
    message(what + " failed: " + e.message);
  }
}

function show(name) {
  tab = name;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.tab === name);
  for (const s of document.querySelectorAll("main section")) s.hidden = s.id !== "tab-" + name;
  if (name === "jobs") refreshJobs();
  if (view.job === null) return;
  const once = { config, exceptions, doctor }[name];
  if (once) once(section(name)).catch((e) => message(e.message));
  else render();
}

document.addEventListener("DOMContentLoaded", () => {
  for (const a of document.querySelectorAll("nav a")) a.addEventListener("click", (e) => { e.preventDefault(); show(a.dataset.tab); });
  document.getElementById("btn-savepoint").addEventListener("click", () => command("Savepoint"));
  document.getElementById("btn-stop").addEventListener("click", () => command("Stop with savepoint"));
  document.getElementById("btn-drain").addEventListener("click", () => command("Stop and drain"));
  document.getElementById("btn-cancel").addEventListener("click", () => command("Cancel"));
  show("overview");
  setLive(false);
  connectLive();
  refresh();
  setInterval(() => { refresh(); if (tab === "jobs") refreshJobs(); }, POLL_MS);
});

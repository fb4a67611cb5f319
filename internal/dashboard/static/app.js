// jobq dashboard: reads the JSON API of the server that served it and draws
// the page. Everything is drawn here (SVG); nothing is fetched from
// elsewhere. Text from the queue is always set with textContent.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const REFRESH_MS = 2000;
let csrf = "";
let info = null;

function $(id) { return document.getElementById(id); }

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS(SVGNS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}

async function api(path, opts) {
  const r = await fetch(path, Object.assign({ credentials: "same-origin" }, opts || {}));
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  if (!r.ok) {
    throw new Error((body && body.error) || (r.status + " " + r.statusText));
  }
  return body;
}

function post(path, body) {
  return api(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Jobq-Csrf": csrf },
    body: JSON.stringify(body),
  });
}

function showError(msg) {
  const e = $("error");
  if (!msg) { e.hidden = true; e.textContent = ""; return; }
  e.hidden = false;
  e.textContent = msg;
}

function fmtCount(n) { return n === null || n === undefined ? "n/a" : String(n); }

function fmtDuration(s) {
  if (s === null || s === undefined) return "–";
  if (s < 1) return Math.round(s * 1000) + " ms";
  if (s < 90) return (Math.round(s * 10) / 10) + " s";
  if (s < 5400) return Math.round(s / 60) + " min";
  if (s < 172800) return (Math.round(s / 360) / 10) + " h";
  return (Math.round(s / 8640) / 10) + " d";
}

function fmtBytes(n) {
  if (!n) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (Math.round(n * 10) / 10) + " " + units[i];
}

function fmtTime(t) {
  if (!t) return "–";
  const d = new Date(t);
  return d.toLocaleString();
}

function ago(t) {
  if (!t) return "–";
  return fmtDuration((Date.now() - new Date(t).getTime()) / 1000) + " ago";
}

// confirmAction shows the confirmation dialog and resolves true on Confirm.
function confirmAction(text) {
  return new Promise((resolve) => {
    const d = $("confirm");
    $("confirm-text").textContent = text;
    const done = (ok) => {
      $("confirm-ok").onclick = null;
      $("confirm-cancel").onclick = null;
      d.onclose = null;
      if (d.open) d.close();
      resolve(ok);
    };
    $("confirm-ok").onclick = () => done(true);
    $("confirm-cancel").onclick = () => done(false);
    d.onclose = () => done(false);
    d.showModal();
  });
}

// linePlot draws series (each {name, cls, values}) against times into the
// SVG element; values may hold nulls (gaps). It records the number of
// points drawn in data-points.
function linePlot(node, times, series) {
  while (node.firstChild) node.removeChild(node.firstChild);
  const W = 600, H = 220, L = 48, R = 8, T = 8, B = 24;
  let ymax = 0;
  for (const s of series) for (const v of s.values) if (v !== null && v > ymax) ymax = v;
  if (ymax <= 0) ymax = 1;
  ymax = niceCeil(ymax);
  const t0 = times.length ? times[0] : 0;
  const t1 = times.length ? times[times.length - 1] : 1;
  const span = Math.max(t1 - t0, 1);
  const x = (t) => L + (W - L - R) * (t - t0) / span;
  const y = (v) => T + (H - T - B) * (1 - v / ymax);
  // Axes and grid.
  for (let i = 0; i <= 4; i++) {
    const v = ymax * i / 4;
    node.appendChild(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    const lab = svg("text", { x: L - 6, y: y(v) + 4, class: "axis", "text-anchor": "end" });
    lab.textContent = fmtAxis(v);
    node.appendChild(lab);
  }
  if (times.length) {
    for (const [t, anchor] of [[t0, "start"], [t1, "end"]]) {
      const lab = svg("text", { x: x(t), y: H - 6, class: "axis", "text-anchor": anchor });
      lab.textContent = new Date(t).toLocaleTimeString();
      node.appendChild(lab);
    }
  }
  let drawn = 0;
  for (const s of series) {
    let d = "";
    let pen = false;
    s.values.forEach((v, i) => {
      if (v === null || v === undefined) { pen = false; return; }
      d += (pen ? "L" : "M") + x(times[i]).toFixed(1) + " " + y(v).toFixed(1);
      pen = true;
      drawn++;
    });
    if (d) node.appendChild(svg("path", { d: d, class: "line " + s.cls }));
    // The last point, marked.
    for (let i = s.values.length - 1; i >= 0; i--) {
      if (s.values[i] !== null && s.values[i] !== undefined) {
        node.appendChild(svg("circle", { cx: x(times[i]), cy: y(s.values[i]), r: 3, class: "dot " + s.cls }));
        break;
      }
    }
  }
  if (!times.length) {
    const lab = svg("text", { x: W / 2, y: H / 2, class: "axis", "text-anchor": "middle" });
    lab.textContent = "waiting for samples…";
    node.appendChild(lab);
  }
  node.setAttribute("data-points", String(drawn));
}

function niceCeil(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function fmtAxis(v) {
  if (v >= 1e6) return (v / 1e6) + "M";
  if (v >= 1e4) return (v / 1e3) + "k";
  return String(Math.round(v * 100) / 100);
}

function legend(node, series) {
  while (node.firstChild) node.removeChild(node.firstChild);
  for (const s of series) {
    const item = el("span", null, "item");
    item.appendChild(el("span", null, "swatch " + s.cls));
    item.appendChild(document.createTextNode(s.name));
    node.appendChild(item);
  }
}

function barPlot(node, hist) {
  while (node.firstChild) node.removeChild(node.firstChild);
  const W = 600, H = 220, L = 40, R = 8, T = 8, B = 40;
  const bs = hist.buckets;
  let first = bs.findIndex((b) => b.count > 0);
  let last = bs.length - 1 - [...bs].reverse().findIndex((b) => b.count > 0);
  if (first < 0) {
    const lab = svg("text", { x: W / 2, y: H / 2, class: "axis", "text-anchor": "middle" });
    lab.textContent = "no runtimes recorded";
    node.appendChild(lab);
    node.setAttribute("data-points", "0");
    return;
  }
  first = Math.max(0, first - 1);
  last = Math.min(bs.length - 1, last + 1);
  const shown = bs.slice(first, last + 1);
  const ymax = niceCeil(Math.max(...shown.map((b) => b.count)));
  const bw = (W - L - R) / shown.length;
  shown.forEach((b, i) => {
    const h = (H - T - B) * b.count / ymax;
    const r = svg("rect", { x: L + i * bw + 2, y: H - B - h, width: Math.max(bw - 4, 1), height: h, class: "bar" });
    const title = svg("title", {});
    title.textContent = b.count + " attempts";
    r.appendChild(title);
    node.appendChild(r);
    const lab = svg("text", { x: L + i * bw + bw / 2, y: H - B + 14, class: "axis", "text-anchor": "middle" });
    lab.textContent = b.le_s === null ? "more" : "≤" + fmtDuration(b.le_s);
    node.appendChild(lab);
  });
  const top = svg("text", { x: L - 6, y: T + 8, class: "axis", "text-anchor": "end" });
  top.textContent = String(ymax);
  node.appendChild(top);
  node.setAttribute("data-points", String(hist.count));
}

async function refreshStats() {
  const st = await api("/api/stats");
  $("stat-ready").textContent = fmtCount(st.ready);
  $("stat-in-flight").textContent = fmtCount(st.in_flight);
  $("stat-delayed").textContent = fmtCount(st.delayed);
  $("stat-dead-lettered").textContent = fmtCount(st.dead_lettered);
  $("stat-drain-rate").textContent = st.drain_rate_per_s === undefined ? "measuring…" : (Math.round(st.drain_rate_per_s * 100) / 100) + " /s";
  if (st.drain_rate_per_s === undefined) $("stat-drain-eta").textContent = "measuring…";
  else if (st.drain_eta_s === null) $("stat-drain-eta").textContent = "unknown";
  else if (st.drain_eta_s === 0) $("stat-drain-eta").textContent = "empty";
  else $("stat-drain-eta").textContent = "~" + fmtDuration(st.drain_eta_s);
}

const countSeries = [
  { name: "ready", cls: "s-ready", key: "ready" },
  { name: "in flight", cls: "s-inflight", key: "in_flight" },
  { name: "delayed", cls: "s-delayed", key: "delayed" },
  { name: "dead-lettered", cls: "s-dead", key: "dead_lettered" },
];
const rateSeries = [
  { name: "net drain", cls: "s-ready", key: "drained_per_s" },
  { name: "dead-lettered", cls: "s-dead", key: "dead_lettered_per_s" },
];

async function refreshSeries() {
  const s = await api("/api/series");
  const times = s.points.map((p) => p.t);
  const pick = (defs) => defs.map((d) => ({ name: d.name, cls: d.cls, values: s.points.map((p) => p[d.key]) }));
  const counts = pick(countSeries);
  linePlot($("plot-counts"), times, counts);
  legend($("legend-counts"), counts);
  const rates = pick(rateSeries).map((r) => ({ name: r.name, cls: r.cls, values: r.values.map((v) => (v === null || v === undefined ? null : Math.max(v, 0))) }));
  linePlot($("plot-rates"), times, rates);
  legend($("legend-rates"), rates);
  let drained = 0, dead = 0;
  for (const p of s.points) {
    if (p.drained_per_s > 0) drained += p.drained_per_s;
    if (p.dead_lettered_per_s > 0) dead += p.dead_lettered_per_s;
  }
  $("failure-share").textContent = drained > 0
    ? "Dead-lettered: " + Math.round(100 * Math.min(dead / drained, 1)) + "% of the tasks that left the queue in this window."
    : "No tasks left the queue in this window.";
}

async function refreshRuntimes() {
  const h = await api("/api/runtimes");
  barPlot($("plot-runtimes"), h);
  let note = h.count + " runtimes: " + h.source + ".";
  if (h.count > 0) note += " Median " + fmtDuration(h.p50_s) + ", p90 " + fmtDuration(h.p90_s) + ", max " + fmtDuration(h.max_s) + ".";
  if (h.outcomes) {
    const parts = Object.keys(h.outcomes).sort().map((k) => h.outcomes[k] + " " + k);
    const n = Object.values(h.outcomes).reduce((a, b) => a + b, 0);
    note += " Of the " + n + " tasks followed to their end: " + (parts.length ? parts.join(", ") : "none yet") + " (" + h.following + " still followed).";
  } else if (h.results_note) {
    note += " Tasks that succeeded are not included: " + h.results_note + ".";
  }
  $("runtime-note").textContent = note;
}

async function refreshWorkers() {
  const w = await api("/api/workers");
  const table = $("workers-table");
  if (!w.available) {
    $("workers-summary").textContent = w.message;
    table.hidden = true;
    return;
  }
  const s = w.summary;
  let text = s.live + " live, " + s.vanished + " vanished, " + s.withdrawn + " withdrawn; last hour: " +
    s.started_last_hour + " started, " + s.ended_last_hour + " ended.";
  if (s.lifetimes) text += " Lifetimes of ended workers: median " + fmtDuration(s.lifetimes.p50_s) + ", longest " + fmtDuration(s.lifetimes.max_s) + ".";
  $("workers-summary").textContent = text;
  const tb = table.tBodies[0];
  tb.replaceChildren();
  for (const x of w.workers) {
    const tr = el("tr", null, "state-" + x.state);
    const up = x.started ? fmtDuration((new Date(x.heartbeat) - new Date(x.started)) / 1000) : "–";
    for (const v of [x.id, x.state, x.host, x.pid, x.version || "–", (x.tasks || []).length, x.done, x.failed,
      Math.round(x.cpu_percent) + "%", fmtBytes(x.rss_bytes), ago(x.heartbeat), up]) tr.appendChild(el("td", v));
    tb.appendChild(tr);
  }
  table.hidden = w.workers.length === 0;
}

async function refreshDead() {
  const list = await api("/api/deadletters?n=200");
  $("dead-count").textContent = "(" + list.length + (list.length === 200 ? "+" : "") + ")";
  const table = $("dead-table");
  const tb = table.tBodies[0];
  const open = new Set([...tb.querySelectorAll("tr.detail:not([hidden])")].map((r) => r.dataset.id));
  tb.replaceChildren();
  $("dead-empty").hidden = list.length > 0;
  table.hidden = list.length === 0;
  for (const d of list) {
    const tr = el("tr", null, "dead-row");
    tr.dataset.id = d.message_id;
    tr.appendChild(el("td", d.message_id, "mono"));
    tr.appendChild(el("td", d.command || d.task_id || "(undecodable)", "mono clip"));
    tr.appendChild(el("td", d.delivery_count));
    tr.appendChild(el("td", fmtTime(d.dead_at)));
    tr.appendChild(el("td", d.reason, "clip"));
    const act = el("td", null, "row-actions");
    const more = el("button", "details");
    more.type = "button";
    const rq = el("button", "requeue", "requeue");
    rq.type = "button";
    const pg = el("button", "purge", "danger purge");
    pg.type = "button";
    act.append(more, rq, pg);
    tr.appendChild(act);
    tb.appendChild(tr);

    const det = el("tr", null, "detail");
    det.dataset.id = d.message_id;
    det.hidden = !open.has(d.message_id);
    const td = el("td");
    td.colSpan = 6;
    if (d.attempts && d.attempts.length) {
      const at = el("table", null, "attempts");
      const head = el("tr");
      for (const h of ["#", "outcome", "worker", "host", "start", "runtime", "exit", "detail"]) head.appendChild(el("th", h));
      at.appendChild(head);
      for (const a of d.attempts) {
        const r = el("tr");
        for (const v of [a.delivery, a.outcome, a.worker || "–", a.host || "–", fmtTime(a.start),
          a.duration_s === undefined ? "–" : fmtDuration(a.duration_s), a.exit_code === undefined ? "–" : a.exit_code, a.detail || ""]) r.appendChild(el("td", v));
        at.appendChild(r);
      }
      td.appendChild(at);
    } else {
      td.appendChild(el("div", "No attempt history (this backend keeps none, or the task was never run).", "note"));
    }
    td.appendChild(el("div", "Output tail", "label"));
    td.appendChild(el("pre", d.detail || "(none)", "tail"));
    det.appendChild(td);
    tb.appendChild(det);

    more.onclick = () => { det.hidden = !det.hidden; };
    rq.onclick = () => moveDead("requeue", [d.message_id], "Requeue dead letter " + d.message_id + "? It goes back to the queue.");
    pg.onclick = () => moveDead("purge", [d.message_id], "Delete dead letter " + d.message_id + " for good?");
  }
}

async function refreshPolicies() {
  const p = await api("/api/policies");
  const table = $("policies-table");
  if (!p.available) {
    $("policies-note").textContent = p.message;
    table.hidden = true;
    return;
  }
  const tb = table.tBodies[0];
  tb.replaceChildren();
  const paused = p.paused || [];
  $("paused-note").hidden = paused.length === 0;
  $("paused-note").textContent = paused.map((x) => "Paused: " + (x.kind || x.key ? [x.kind && "kind " + x.kind, x.key && "key " + x.key].filter(Boolean).join(", ") : "the whole queue") +
    " since " + new Date(x.since).toLocaleString() + " by " + x.by).join(" · ");
  $("resume-queue").disabled = !paused.some((x) => !x.kind && !x.key);
  $("pause-queue").disabled = !$("resume-queue").disabled;
  $("policies-note").textContent = p.policies.filter((x) => x.kind !== "pause").map((x) => x.text).join(" · ") || "No policies set.";
  for (const k of p.keys) {
    const tr = el("tr");
    let limit = k.limit === undefined ? "–" : String(k.limit);
    if (k.period_s !== undefined) limit += " / " + fmtDuration(k.period_s);
    for (const v of [k.kind, k.key, limit, k.in_flight, k.admitted_in_window, k.waiting < 0 ? "?" : k.waiting]) tr.appendChild(el("td", v));
    tb.appendChild(tr);
  }
  table.hidden = p.keys.length === 0;
}

async function moveDead(verb, ids, question) {
  if (!(await confirmAction(question))) return;
  try {
    const body = ids ? { ids: ids } : { all: true };
    const res = await post("/api/deadletters/" + verb, body);
    showError("");
    $("updated").textContent = (res.requeued !== undefined ? "requeued " + res.requeued : "purged " + res.purged) + " dead letters";
  } catch (e) {
    showError(verb + " failed: " + e.message);
  }
  await refreshAll();
}

async function pauseQueue(verb, question) {
  if (!(await confirmAction(question))) return;
  try {
    await post("/api/" + verb, {});
    showError("");
    $("updated").textContent = verb === "pause" ? "paused; workers stop within about 2s" : "resumed; workers go on within about 2s";
  } catch (e) {
    showError(verb + " failed: " + e.message);
  }
  await refreshAll();
}

// bulkFilter reads the bulk form into the body of /api/bulk/ACTION.
function bulkFilter() {
  const sel = $("bulk-action").value;
  const body = { kind: $("bulk-kind").value.trim(), key: $("bulk-key").value.trim(), error: $("bulk-error").value,
    since: $("bulk-since").value.trim(), until: $("bulk-until").value.trim(), all: $("bulk-all").checked };
  const code = $("bulk-exit-code").value.trim();
  if (code !== "") {
    if (!/^-?\d+$/.test(code)) throw new Error("exit code " + JSON.stringify(code) + " is not a number");
    body.exit_code = parseInt(code, 10);
  }
  if (sel === "purge-queued") body.state = "queued";
  return { action: sel === "purge-queued" ? "purge" : sel, body: body, what: sel === "cancel" || sel === "purge-queued" ? "queued tasks" : "dead letters" };
}

// nounFor is what for n things ("dead letters", "1 dead letter").
function nounFor(n, what) { return n === 1 ? what.replace(/s$/, "") : what; }

function bulkText(res, what) {
  let t = res.dry_run
    ? res.matched + " of " + res.scanned + " " + what + " match"
    : res.action + ": " + res.done + " of " + res.matched + " matching " + nounFor(res.matched, what) + " done (" + res.scanned + " scanned)";
  if (res.pending) t += "; " + res.pending + " cancel-requested (the worker that receives each drops it)";
  if (res.partial) t += ". Partial: " + res.partial;
  return t;
}

// bulkAction counts the matches (a dry run); with run, it then asks to
// confirm with that count and runs the action.
async function bulkAction(run) {
  let f;
  try {
    f = bulkFilter();
    const count = await post("/api/bulk/" + f.action, Object.assign({}, f.body, { dry_run: true }));
    $("bulk-result").textContent = bulkText(count, f.what);
    showError("");
    if (!run) return;
    if (count.matched === 0) return;
    if (!(await confirmAction(f.action.charAt(0).toUpperCase() + f.action.slice(1) + " " + count.matched + " " + nounFor(count.matched, f.what) + " of " + info.name + "?"))) return;
    const res = await post("/api/bulk/" + f.action, Object.assign({}, f.body, { dry_run: false }));
    $("bulk-result").textContent = bulkText(res, f.what);
  } catch (e) {
    // Shown beside the form: the next refresh clears the page's error line.
    $("bulk-result").textContent = "bulk " + (f ? f.action : "action") + " failed: " + e.message;
    return;
  }
  await refreshAll();
}

let refreshing = false;
async function refreshAll() {
  if (refreshing) return;
  refreshing = true;
  try {
    const results = await Promise.allSettled([refreshStats(), refreshSeries(), refreshRuntimes(), refreshWorkers(), refreshDead(), refreshPolicies()]);
    const failed = results.filter((r) => r.status === "rejected").map((r) => r.reason.message);
    showError(failed.length ? "Could not refresh: " + failed.join("; ") : "");
    if (!failed.length) $("updated").textContent = "updated " + new Date().toLocaleTimeString();
    document.body.dataset.ready = "1";
  } finally {
    refreshing = false;
  }
}

async function start() {
  try {
    info = await api("/api/info");
  } catch (e) {
    showError("Could not reach the dashboard server: " + e.message);
    return;
  }
  csrf = info.csrf;
  $("queue-name").textContent = info.name;
  $("queue-url").textContent = info.queue || "(queue made in-process)";
  $("backend").textContent = info.backend || "backend";
  $("interval").textContent = fmtDuration(info.interval_s);
  $("requeue-all").onclick = () => moveDead("requeue", null, "Requeue every dead letter of " + info.name + "?");
  $("purge-all").onclick = () => moveDead("purge", null, "Delete every dead letter of " + info.name + " for good?");
  $("bulk-count").onclick = () => bulkAction(false);
  $("bulk-run").onclick = () => bulkAction(true);
  $("pause-queue").onclick = () => pauseQueue("pause", "Pause " + info.name + "? Workers stop taking new tasks within about 2s and finish what they hold; pushes still go in.");
  $("resume-queue").onclick = () => pauseQueue("resume", "Resume " + info.name + "? Workers take tasks again within about 2s.");
  await refreshAll();
  setInterval(refreshAll, REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", start);

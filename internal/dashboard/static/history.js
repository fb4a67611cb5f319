// jobq dashboard, history panels: what the result records and the worker
// registry say about the last hours and days (GET /api/history). Uses the
// helpers of app.js (loaded first). Drawn as inline SVG; text from the
// queue is set with textContent.
"use strict";

let historyWindow = "24h";
let historyLast = 0;
const HISTORY_REFRESH_MS = 15000;

// stackPlot draws stacked bars: series (each {name, cls, values}) per time.
// It records the sum of every series in data-total.
function stackPlot(node, times, series, bucketMs) {
  while (node.firstChild) node.removeChild(node.firstChild);
  const W = 600, H = 220, L = 48, R = 8, T = 8, B = 24;
  let ymax = 0, total = 0;
  times.forEach((_, i) => {
    let sum = 0;
    for (const s of series) sum += s.values[i] || 0;
    total += sum;
    if (sum > ymax) ymax = sum;
  });
  ymax = niceCeil(Math.max(ymax, 1));
  const bw = (W - L - R) / Math.max(times.length, 1);
  const y = (v) => T + (H - T - B) * (1 - v / ymax);
  for (let i = 0; i <= 4; i++) {
    const v = ymax * i / 4;
    node.appendChild(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    const lab = svg("text", { x: L - 6, y: y(v) + 4, class: "axis", "text-anchor": "end" });
    lab.textContent = fmtAxis(v);
    node.appendChild(lab);
  }
  times.forEach((t, i) => {
    let base = 0;
    for (const s of series) {
      const v = s.values[i] || 0;
      if (v <= 0) continue;
      const r = svg("rect", { x: L + i * bw + 0.5, y: y(base + v), width: Math.max(bw - 1, 1), height: y(base) - y(base + v), class: "stack " + s.cls });
      const title = svg("title", {});
      title.textContent = new Date(t).toLocaleString() + ": " + v + " " + s.name;
      r.appendChild(title);
      node.appendChild(r);
      base += v;
    }
  });
  if (times.length) {
    for (const [t, x, anchor] of [[times[0], L, "start"], [times[times.length - 1] + bucketMs, W - R, "end"]]) {
      const lab = svg("text", { x: x, y: H - 6, class: "axis", "text-anchor": anchor });
      lab.textContent = fmtWhen(t);
      node.appendChild(lab);
    }
  }
  if (total === 0) {
    const lab = svg("text", { x: W / 2, y: H / 2, class: "axis", "text-anchor": "middle" });
    lab.textContent = "nothing recorded in this window";
    node.appendChild(lab);
  }
  node.setAttribute("data-total", String(total));
}

// hbarPlot draws one horizontal bar per item ({label, value, text}).
function hbarPlot(node, items, cls) {
  while (node.firstChild) node.removeChild(node.firstChild);
  const W = 600, L = 170, R = 90, row = 16;
  const H = Math.max(items.length * row + 8, 40);
  node.setAttribute("viewBox", "0 0 " + W + " " + H);
  const vmax = Math.max(...items.map((it) => it.value), 0) || 1;
  items.forEach((it, i) => {
    const yy = 4 + i * row;
    const lab = svg("text", { x: L - 6, y: yy + 11, class: "axis", "text-anchor": "end" });
    lab.textContent = it.label.length > 26 ? it.label.slice(0, 25) + "…" : it.label;
    node.appendChild(lab);
    node.appendChild(svg("rect", { x: L, y: yy + 2, width: Math.max((W - L - R) * it.value / vmax, 1), height: row - 5, class: "stack " + cls }));
    const v = svg("text", { x: W - R + 6, y: yy + 11, class: "axis" });
    v.textContent = it.text;
    node.appendChild(v);
  });
  if (!items.length) {
    const lab = svg("text", { x: W / 2, y: 24, class: "axis", "text-anchor": "middle" });
    lab.textContent = "no workers in the registry";
    node.appendChild(lab);
  }
  node.setAttribute("data-points", String(items.length));
}

function fmtWhen(t) {
  const d = new Date(t);
  if (historyWindow === "6h") return d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  return d.toLocaleString(undefined, { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}

function setText(id, v) { $(id).textContent = v; }

function interruptions(c) { return c.preempted + c.requeued + c.lease_expired; }

async function refreshHistory(force) {
  if (!force && Date.now() - historyLast < HISTORY_REFRESH_MS) return;
  const h = await api("/api/history?window=" + encodeURIComponent(historyWindow));
  historyLast = Date.now();
  const sec = $("history");
  sec.dataset.window = h.window;
  $("history-note").textContent = h.available
    ? "From the result records (" + (h.level === "native" ? "added up by the backend" : "read page by page") + ", in " + h.took_ms + " ms), " +
      new Date(h.since).toLocaleString() + " to " + new Date(h.until).toLocaleString() + ", in buckets of " + fmtDuration(h.bucket_s) + "; kept for 15 s or more, then recomputed."
    : h.message;
  drawFleet(h.fleet);
  if (!h.available) { sec.dataset.ready = "1"; return; }
  const t = h.totals;
  setText("hist-succeeded", t.succeeded);
  setText("hist-dead-lettered", t.dead_lettered);
  setText("hist-cancelled", t.cancelled);
  setText("hist-preempted", t.preempted);
  setText("hist-requeued", t.requeued);
  setText("hist-lease-expired", t.lease_expired);
  setText("hist-runtime", h.runtime.runtime_count ? fmtDuration(h.runtime.p50_s) + " / " + fmtDuration(h.runtime.p90_s) + " / " + fmtDuration(h.runtime.max_s) : "–");
  const times = h.buckets.map((b) => b.t);
  const bucketMs = h.bucket_s * 1000;
  const ends = [
    { name: "succeeded", cls: "s-inflight", values: h.buckets.map((b) => b.succeeded) },
    { name: "dead-lettered", cls: "s-dead", values: h.buckets.map((b) => b.dead_lettered) },
    { name: "cancelled", cls: "s-delayed", values: h.buckets.map((b) => b.cancelled) },
  ];
  stackPlot($("plot-history-ends"), times, ends, bucketMs);
  legend($("legend-history-ends"), ends);
  const rts = [
    { name: "p50", cls: "s-ready", values: h.buckets.map((b) => b.p50_s) },
    { name: "p90", cls: "s-delayed", values: h.buckets.map((b) => b.p90_s) },
    { name: "max", cls: "s-dead", values: h.buckets.map((b) => b.max_s) },
  ];
  linePlot($("plot-history-runtimes"), times, rts);
  legend($("legend-history-runtimes"), rts);
  const stops = [
    { name: "preempted", cls: "s-dead", values: h.buckets.map((b) => b.preempted) },
    { name: "stopped and requeued", cls: "s-delayed", values: h.buckets.map((b) => b.requeued) },
    { name: "lease expired", cls: "s-ready", values: h.buckets.map((b) => b.lease_expired) },
  ];
  stackPlot($("plot-history-preemptions"), times, stops, bucketMs);
  legend($("legend-history-preemptions"), stops);
  drawEnvs(h.by_env || []);
  drawErrors(h.errors || []);
  sec.dataset.ready = "1";
}

function drawEnvs(envs) {
  const tb = $("env-table").querySelector("tbody");
  while (tb.firstChild) tb.removeChild(tb.firstChild);
  const shown = envs.filter((e) => interruptions(e) + e.failed > 0);
  $("env-table").hidden = shown.length === 0;
  $("env-empty").hidden = shown.length > 0;
  for (const e of shown) {
    const tr = el("tr");
    tr.appendChild(el("td", e.env || "(unknown: a lost worker)", "mono"));
    for (const v of [e.preempted, e.requeued, e.lease_expired, e.failed]) tr.appendChild(el("td", v));
    tb.appendChild(tr);
  }
}

function drawErrors(groups) {
  const tb = $("errors-table").querySelector("tbody");
  while (tb.firstChild) tb.removeChild(tb.firstChild);
  $("errors-table").hidden = groups.length === 0;
  $("errors-empty").hidden = groups.length > 0;
  for (const g of groups) {
    const tr = el("tr");
    tr.appendChild(el("td", g.exit_code === null ? "–" : g.exit_code));
    tr.appendChild(el("td", g.first_line || "(no output)", "mono clip"));
    tr.appendChild(el("td", g.count));
    tr.appendChild(el("td", ago(g.last)));
    const ex = el("td", null, "mono");
    for (const id of g.examples || []) {
      const a = el("a", id.length > 14 ? id.slice(0, 12) + "…" : id, "example");
      a.href = "#task-" + id;
      a.title = id;
      a.dataset.id = id;
      a.onclick = (ev) => { ev.preventDefault(); showRecord(id); };
      ex.appendChild(a);
      ex.appendChild(document.createTextNode(" "));
    }
    tr.appendChild(ex);
    tb.appendChild(tr);
  }
}

async function showRecord(id) {
  const d = $("record");
  $("record-title").textContent = "Task " + id;
  const body = $("record-body");
  while (body.firstChild) body.removeChild(body.firstChild);
  try {
    const r = await api("/api/result?id=" + encodeURIComponent(id));
    body.appendChild(el("p", r.state + (r.exit_code !== undefined ? ", exit code " + r.exit_code : "") + ", " + r.delivery_count + " deliveries" +
      (r.worker ? ", last on " + r.worker + " (" + r.host + ")" : "")));
    if (r.error) body.appendChild(el("p", r.error, "mono"));
    if (r.attempts.length) {
      const t = el("table", null, "attempts");
      const head = el("tr");
      for (const h of ["#", "outcome", "worker", "host", "runtime", "exit", "detail"]) head.appendChild(el("th", h));
      t.appendChild(head);
      for (const a of r.attempts) {
        const tr = el("tr");
        for (const v of [a.delivery, a.outcome, a.worker || "–", a.host || "–", fmtDuration(a.duration_s), a.exit_code === undefined ? "–" : a.exit_code, a.detail || ""]) tr.appendChild(el("td", v));
        t.appendChild(tr);
      }
      body.appendChild(t);
    }
    if (r.output) body.appendChild(el("pre", r.output, "tail"));
  } catch (e) {
    body.appendChild(el("p", "Could not read the record: " + e.message));
  }
  d.showModal();
}

function drawFleet(f) {
  const sec = $("fleet");
  if (!f || !f.available) {
    $("fleet-note").textContent = (f && f.message) || "the worker registry is not available on this backend";
    sec.dataset.ready = "1";
    return;
  }
  const ws = f.workers || [];
  const live = ws.filter((w) => w.state === "live").length;
  $("fleet-note").textContent = live + " live of " + ws.length + " workers in the registry (it keeps a worker for a day after its last heartbeat).";
  const churn = [
    { name: "started", cls: "s-inflight", values: f.churn.map((c) => c.started) },
    { name: "ended", cls: "s-dead", values: f.churn.map((c) => c.ended) },
  ];
  const prev = historyWindow;
  historyWindow = "24h";
  stackPlot($("plot-churn"), f.churn.map((c) => c.t), churn, 3600 * 1000);
  historyWindow = prev;
  legend($("legend-churn"), churn);
  barPlot($("plot-lifetimes"), f.lifetimes);
  $("lifetimes-note").textContent = f.lifetimes.count ? f.lifetimes.count + " workers ended; median " + fmtDuration(f.lifetimes.p50_s) + ", longest " + fmtDuration(f.lifetimes.max_s) : "no worker ended in the last day";
  hbarPlot($("plot-cpu"), ws.map((w) => ({ label: w.id, value: w.cpu_percent, text: (Math.round(w.cpu_percent * 10) / 10) + " %" })), "s-ready");
  hbarPlot($("plot-ram"), ws.map((w) => ({ label: w.id, value: w.rss_bytes, text: fmtBytes(w.rss_bytes) })), "s-inflight");
  sec.dataset.ready = "1";
}

function startHistory() {
  for (const b of document.querySelectorAll("#history-windows button")) {
    b.onclick = () => {
      historyWindow = b.dataset.window;
      for (const o of document.querySelectorAll("#history-windows button")) o.classList.toggle("on", o === b);
      refreshHistory(true).catch((e) => showError("Could not read the history: " + e.message));
    };
  }
  $("record-close").onclick = () => $("record").close();
  const tick = () => refreshHistory(false).catch((e) => showError("Could not read the history: " + e.message));
  tick();
  setInterval(tick, REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", startHistory);

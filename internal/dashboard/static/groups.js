// jobq dashboard, Groups section: the queue's most recent groups with
// their counts, rate, ETA and work totals (GET /api/groups). Uses the
// helpers of app.js (loaded first). Text from the queue is set with
// textContent.
"use strict";

const GROUPS_REFRESH_MS = 5000;

// progressBar is a bar of the group's ended tasks: succeeded, then
// dead-lettered and cancelled, out of those pushed.
function progressBar(g) {
  const bar = el("span", null, "progress");
  const total = Math.max(g.pushed, 1);
  for (const [n, cls] of [[g.succeeded, "s-inflight"], [g.dead_lettered, "s-dead"], [g.cancelled, "s-delayed"]]) {
    if (n <= 0) continue;
    const part = el("span", null, cls);
    part.style.width = (100 * n / total) + "%";
    bar.appendChild(part);
  }
  bar.title = (g.succeeded + g.dead_lettered + g.cancelled) + " of " + g.pushed + " ended";
  return bar;
}

function fmtRate(r) {
  if (r === null || r === undefined) return "–";
  if (r >= 10) return Math.round(r) + "/s";
  if (r >= 0.1) return (Math.round(r * 10) / 10) + "/s";
  return (Math.round(r * 3600 * 10) / 10) + "/h";
}

async function refreshGroups() {
  const rep = await api("/api/groups");
  const sec = $("groups"), table = $("groups-table");
  if (!rep.available) {
    $("groups-note").textContent = rep.message;
    table.hidden = true;
    sec.dataset.ready = "1";
    return;
  }
  let note = rep.groups.length ? "The " + rep.groups.length + " most recently changed groups." : "No groups yet: push with --group NAME.";
  if (rep.work_note) note += " " + rep.work_note + ".";
  $("groups-note").textContent = note;
  const tb = table.tBodies[0];
  tb.replaceChildren();
  for (const g of rep.groups) {
    const tr = el("tr");
    tr.dataset.group = g.name;
    tr.appendChild(el("td", g.name, "mono"));
    const p = el("td");
    p.appendChild(progressBar(g));
    tr.appendChild(p);
    const split = g.queued === null ? "–" : g.queued + " / " + g.delayed + " / " + g.running;
    const w = g.work;
    const cells = [g.pushed, g.succeeded, g.dead_lettered, g.cancelled, g.open, split, g.failed,
      fmtRate(g.rate_per_s), g.done ? "done" : fmtDuration(g.eta_s),
      w ? fmtDuration(w.done_s) : "–", w ? fmtDuration(w.lost_s) : "–", w ? fmtDuration(w.saved_s) : "–", w ? w.preemptions : "–",
      ago(g.updated)];
    cells.forEach((v, i) => tr.appendChild(el("td", v, i < 7 || i === 12 ? "num" : "")));
    tb.appendChild(tr);
  }
  table.hidden = rep.groups.length === 0;
  sec.dataset.ready = "1";
}

function startGroups() {
  const tick = () => refreshGroups().catch((e) => showError("Could not read the groups: " + e.message));
  tick();
  setInterval(tick, GROUPS_REFRESH_MS);
}

document.addEventListener("DOMContentLoaded", startGroups);

// The status page: it holds no data of its own and asks this node's
// /status every second with the token the user gave, either in the form
// or once as ?token=, which is moved into this tab's sessionStorage and
// taken out of the address bar (and so out of history and referrers).
"use strict";

const key = "duckraft-token";
const samples = []; // {t, applied, maxLag}, the last two minutes
const keep = 120;
let timer = null;

function $(id) { return document.getElementById(id); }

function text(el, s) { el.textContent = s; return el; }

function takeTokenFromURL() {
  const url = new URL(window.location.href);
  const t = url.searchParams.get("token");
  if (t !== null) {
    sessionStorage.setItem(key, t);
    url.searchParams.delete("token");
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
}

function showLogin(message) {
  $("view").hidden = true;
  $("login").hidden = false;
  $("error").hidden = !message;
  text($("error"), message || "");
}

async function poll() {
  const token = sessionStorage.getItem(key);
  if (!token) {
    showLogin("");
    return;
  }
  let st;
  try {
    const resp = await fetch("status", { headers: { Authorization: "Bearer " + token }, cache: "no-store" });
    if (resp.status === 401) {
      sessionStorage.removeItem(key);
      showLogin("The token was refused.");
      return;
    }
    if (!resp.ok) {
      throw new Error("status answered " + resp.status);
    }
    st = await resp.json();
  } catch (e) {
    $("error").hidden = false;
    text($("error"), "Cannot reach the node: " + e.message);
    schedule();
    return;
  }
  $("error").hidden = true;
  $("login").hidden = true;
  $("view").hidden = false;
  render(st);
  schedule();
}

function schedule() {
  clearTimeout(timer);
  timer = setTimeout(poll, 1000);
}

function render(st) {
  text($("node"), st.id);
  const ready = $("ready");
  text(ready, st.ready ? "ready" : "not ready: " + st.not_ready);
  ready.className = "badge " + (st.ready ? "ok" : "bad");
  text($("updated"), "updated " + new Date().toLocaleTimeString());
  text($("state"), st.state || "");
  text($("leader"), st.leader_id || "none known");
  text($("applied"), st.applied_index);
  text($("commit"), st.commit_index);
  text($("lag"), st.lag + " (max " + st.max_staleness + ")");
  text($("consistency"), st.consistency);

  const members = (st.members || []).slice().sort((a, b) => a.id.localeCompare(b.id));
  text($("member-count"), "(" + members.length + ")");
  const body = $("members").tBodies[0];
  body.replaceChildren(...members.map(memberRow));

  const changes = st.leader_changes || [];
  $("leader-changes").replaceChildren(...changes.slice().reverse().map((c) => {
    const li = document.createElement("li");
    text(li, new Date(c.time).toLocaleString() + ": " + (c.leader || "no leader"));
    return li;
  }));

  let maxLag = 0;
  for (const m of members) maxLag = Math.max(maxLag, m.lag || 0);
  samples.push({ t: Date.now(), applied: st.applied_index, maxLag: maxLag });
  while (samples.length > keep) samples.shift();
  chart();
}

function memberRow(m) {
  const tr = document.createElement("tr");
  tr.dataset.id = m.id;
  tr.dataset.role = m.role || "";
  tr.dataset.leader = m.leader ? "true" : "false";
  tr.className = (m.leader ? "leader " : "") + (m.state || "");
  const cells = [m.id, m.role || "", m.state || "", m.leader ? "★ leader" : "", m.applied_index, m.lag, m.load, m.quack_addr || ""];
  cells.forEach((v, i) => {
    const td = document.createElement("td");
    if (i >= 4 && i <= 6) td.className = "num";
    text(td, v === undefined ? "" : String(v));
    tr.appendChild(td);
  });
  return tr;
}

// chart draws applied entries per second and the largest member lag over
// the samples, each scaled to the chart's height.
function chart() {
  const w = 600, h = 160, pad = 8;
  const rates = [];
  for (let i = 1; i < samples.length; i++) {
    const dt = (samples[i].t - samples[i - 1].t) / 1000;
    rates.push({ t: samples[i].t, v: dt > 0 ? Math.max(0, samples[i].applied - samples[i - 1].applied) / dt : 0 });
  }
  const lags = samples.map((s) => ({ t: s.t, v: s.maxLag }));
  const top = Math.max(1, ...rates.map((r) => r.v), ...lags.map((l) => l.v));
  const t0 = Date.now() - keep * 1000;
  const x = (t) => Math.max(0, ((t - t0) / (keep * 1000)) * w);
  const y = (v) => h - pad - (v / top) * (h - 2 * pad);
  const points = (series) => series.map((p) => x(p.t).toFixed(1) + "," + y(p.v).toFixed(1)).join(" ");
  $("rate").setAttribute("points", points(rates));
  $("maxlag").setAttribute("points", points(lags));
  const grid = $("grid");
  if (!grid.childElementCount) {
    for (let i = 1; i < 4; i++) {
      const l = document.createElementNS("http://www.w3.org/2000/svg", "line");
      l.setAttribute("x1", 0); l.setAttribute("x2", w);
      l.setAttribute("y1", (h * i) / 4); l.setAttribute("y2", (h * i) / 4);
      grid.appendChild(l);
    }
  }
  text($("scale"), "top of the chart: " + Math.round(top));
}

$("login").addEventListener("submit", (e) => {
  e.preventDefault();
  const t = $("token").value.trim();
  if (t) {
    sessionStorage.setItem(key, t);
    $("token").value = "";
    poll();
  }
});

takeTokenFromURL();
poll();

// The status page: it holds no data of its own and asks this node's
// /status every second with the token the user gave, either in the form
// or once as ?token=, which is moved into this tab's sessionStorage and
// taken out of the address bar (and so out of history and referrers).
"use strict";

const key = "duckraft-token";
const samples = []; // {t, applied, maxLag}, the last two minutes
const keep = 120;
let timer = null;
let lastAnswer = null; // when the node last answered /status

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
    unreachable(e.message);
    schedule();
    return;
  }
  lastAnswer = new Date();
  $("view").classList.remove("stale");
  $("error").hidden = true;
  $("login").hidden = true;
  $("view").hidden = false;
  render(st);
  schedule();
}

// unreachable shows that the node stopped answering: a red state, when it
// last answered, and what it said then, greyed, so that nobody reads an
// old row for the present. The members' links lead to the others' pages.
function unreachable(why) {
  const ready = $("ready");
  text(ready, "unreachable");
  ready.className = "badge bad";
  $("error").hidden = false;
  if (lastAnswer === null) {
    text($("error"), "Cannot reach the node: " + why);
    return;
  }
  const ago = Math.round((Date.now() - lastAnswer.getTime()) / 1000);
  text($("error"), "The node has not answered since " + lastAnswer.toLocaleTimeString() + " (" + ago +
    " s ago: " + why + "). What follows is what it said then; open another member's page below.");
  text($("updated"), "last answer " + lastAnswer.toLocaleTimeString());
  $("view").classList.add("stale");
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

  const voters = members.filter((m) => m.in_raft && m.voter);
  const alive = voters.filter((m) => m.state === "alive").length;
  const needed = Math.floor(voters.length / 2) + 1;
  const quorum = $("quorum");
  text(quorum, "quorum: " + alive + " of " + voters.length + " voters alive, " + needed + " needed" +
    (alive >= needed ? "" : " — writes stop until enough voters return"));
  quorum.className = alive >= needed ? "ok" : "bad";

  // A dead or removed member's lag only grows; the chart follows the
  // members that can catch up.
  let maxLag = 0;
  for (const m of members) if (m.state === "alive") maxLag = Math.max(maxLag, m.lag || 0);
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
    if (i === 0 && m.http_addr) {
      // Another member's page asks for the token itself: it is not put
      // in the link, which would keep it in history.
      const a = document.createElement("a");
      a.href = "http://" + m.http_addr + "/";
      text(a, String(v));
      td.appendChild(a);
    } else {
      text(td, v === undefined ? "" : String(v));
    }
    tr.appendChild(td);
  });
  return tr;
}

// chart draws two charts over the last two minutes, each with its own
// scale and axes: applied entries per second, and the largest lag of the
// live members in log entries.
function chart() {
  const rates = [];
  for (let i = 1; i < samples.length; i++) {
    const dt = (samples[i].t - samples[i - 1].t) / 1000;
    rates.push({ t: samples[i].t, v: dt > 0 ? Math.max(0, samples[i].applied - samples[i - 1].applied) / dt : 0 });
  }
  plot("rate-chart", rates, "entries/s");
  plot("lag-chart", samples.map((s) => ({ t: s.t, v: s.maxLag })), "entries");
}

const svgNS = "http://www.w3.org/2000/svg";

function svgEl(name, attrs, content) {
  const el = document.createElementNS(svgNS, name);
  for (const k in attrs) el.setAttribute(k, attrs[k]);
  if (content !== undefined) el.textContent = content;
  return el;
}

// niceTop rounds a maximum up to 1, 2 or 5 times a power of ten, so the
// axis reads in round numbers.
function niceTop(v) {
  if (v <= 1) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function plot(id, series, unit) {
  const svg = $(id);
  const w = 600, h = 160, left = 48, right = 8, top = 8, bottom = 22;
  const ymax = niceTop(Math.max(0, ...series.map((p) => p.v)));
  const now = Date.now();
  const t0 = now - keep * 1000;
  const x = (t) => left + Math.max(0, (t - t0) / (keep * 1000)) * (w - left - right);
  const y = (v) => h - bottom - (v / ymax) * (h - top - bottom);
  const parts = [];
  for (const f of [0, 0.5, 1]) {
    const v = ymax * f;
    parts.push(svgEl("line", { x1: left, x2: w - right, y1: y(v), y2: y(v), class: "grid" }));
    parts.push(svgEl("text", { x: left - 4, y: y(v) + 4, "text-anchor": "end", class: "tick" }, String(+v.toPrecision(3))));
  }
  for (const s of [120, 60, 0]) {
    parts.push(svgEl("text", { x: x(now - s * 1000), y: h - 6, "text-anchor": s === 120 ? "start" : s === 0 ? "end" : "middle", class: "tick" },
      s === 0 ? "now" : "−" + s + " s"));
  }
  parts.push(svgEl("line", { x1: left, x2: left, y1: top, y2: h - bottom, class: "axis" }));
  parts.push(svgEl("line", { x1: left, x2: w - right, y1: h - bottom, y2: h - bottom, class: "axis" }));
  parts.push(svgEl("text", { x: 4, y: top + 4, class: "unit", transform: "rotate(90 4 " + (top + 4) + ")" }, unit));
  parts.push(svgEl("polyline", { class: "series", points: series.map((p) => x(p.t).toFixed(1) + "," + y(p.v).toFixed(1)).join(" ") }));
  svg.replaceChildren(...parts);
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

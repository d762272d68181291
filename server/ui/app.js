// The hearth dashboard: reads the admin API with the user's token (a viewer's or the admin's),
// follows /api/v1/watch (server-sent events, read with fetch so the token goes in a header) and
// re-reads what changed; no page reloads. Every text from the server is written with
// textContent, never as HTML: what a node reports cannot run here.
"use strict";

const state = {
  token: null,
  selected: null, // {kind: "node"|"pool", name}
  refreshes: 0,
  pending: false,
  dirty: false, // a change came while a read was under way: read again after it
  diff: {}, // pool -> [from, to]: the pair the user chose, kept across refreshes
};
// For tests and the curious: how often the data was read, and that the page was loaded once.
window.hearthDashboard = state;

function $(id) { return document.getElementById(id); }

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    const td = document.createElement("td");
    if (c instanceof Node) td.appendChild(c); else td.textContent = c === null || c === undefined ? "" : String(c);
    tr.appendChild(td);
  }
  return tr;
}

async function api(path, text) {
  const r = await fetch(path, { headers: { Authorization: "Bearer " + state.token } });
  if (r.status === 401 || r.status === 403) {
    const body = await r.text();
    throw Object.assign(new Error(body), { auth: true });
  }
  if (!r.ok) throw new Error(path + ": " + r.status + " " + (await r.text()));
  return text ? r.text() : r.json();
}

// The booted image with its digest cut to 12 hex digits (the node's own view has it whole).
function shortImage(os) {
  if (!os) return "-";
  if (!os.imageDigest) return os.image;
  const cut = os.imageDigest.replace(/^(sha256:[0-9a-f]{12})[0-9a-f]+$/, "$1");
  return os.image.endsWith(os.imageDigest) ? os.image.slice(0, -os.imageDigest.length) + cut : os.image + "@" + cut;
}
function short(name) { return name ? String(name).replace(/^(rendered-.*-)([0-9a-f]{8})[0-9a-f]+$/, "$1$2…") : "-"; }

function firstLine(s) {
  if (!s) return "";
  const line = String(s).split("\n")[0];
  return line.length > 140 ? line.slice(0, 140) + "…" : line;
}

function condition(pool, type) {
  const c = (pool.status.conditions || []).find((c) => c.type === type);
  return c && c.status === "True";
}

function renderPools(pools) {
  const body = $("pools").tBodies[0];
  body.replaceChildren();
  for (const p of pools) {
    const s = p.status;
    const bar = el("span", null, "bar");
    const fill = el("span");
    const pct = s.machineCount ? Math.round((100 * s.updatedMachineCount) / s.machineCount) : 100;
    fill.style.width = pct + "%";
    bar.appendChild(fill);
    const progress = el("span");
    progress.append(bar, " " + s.updatedMachineCount + "/" + s.machineCount);
    let status = condition(p, "Degraded") ? "Degraded" : condition(p, "Updating") ? "Updating" : condition(p, "Updated") ? "Updated" : "";
    if (p.spec.paused) status += " (paused)";
    if (s.rolloutHaltedBy) status += " — halted by " + s.rolloutHaltedBy;
    const tr = row([p.metadata.name, el("span", short(s.configuration && s.configuration.name), "mono"),
      s.machineCount, s.readyMachineCount, s.updatedMachineCount, s.degradedMachineCount, progress, status]);
    tr.className = "clickable";
    tr.dataset.pool = p.metadata.name;
    if (state.selected && state.selected.kind === "pool" && state.selected.name === p.metadata.name) tr.classList.add("selected");
    tr.addEventListener("click", () => select("pool", p.metadata.name));
    body.appendChild(tr);
  }
}

function renderNodes(nodes) {
  const body = $("nodes").tBodies[0];
  body.replaceChildren();
  for (const n of nodes) {
    const s = n.status;
    const st = s.state || (s.enrolled ? "Enrolled" : "NotEnrolled");
    const tr = row([n.metadata.name, s.pool || "-", el("span", st, "state-" + st),
      el("span", short(s.current), "mono"), el("span", short(s.desired), "mono"),
      s.driftCount || "", el("span", shortImage(s.os), "mono"), firstLine(s.reason || s.error)]);
    tr.className = "clickable";
    tr.dataset.node = n.metadata.name;
    if (state.selected && state.selected.kind === "node" && state.selected.name === n.metadata.name) tr.classList.add("selected");
    tr.addEventListener("click", () => select("node", n.metadata.name));
    body.appendChild(tr);
  }
}

function renderEvents(events, table) {
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const e of events.slice().reverse()) {
    body.appendChild(row([e.lastTimestamp || e.time || e.eventTime || "", e.type, e.involvedObject ? e.involvedObject.kind + "/" + e.involvedObject.name : e.object, e.reason, e.message]));
  }
}

function dl(pairs) {
  const d = el("dl");
  for (const [k, v] of pairs) {
    d.appendChild(el("dt", k));
    const dd = el("dd");
    if (v instanceof Node) dd.appendChild(v); else dd.textContent = v === null || v === undefined ? "-" : String(v);
    d.appendChild(dd);
  }
  return d;
}

async function renderNodeDetail(name) {
  const [n, ev] = await Promise.all([
    api("/api/v1/nodes/" + encodeURIComponent(name)),
    api("/api/v1/events?object=" + encodeURIComponent("Node/" + name) + "&limit=50"),
  ]);
  const s = n.status;
  const body = el("div");
  const st = s.state || (s.enrolled ? "Enrolled" : "NotEnrolled");
  const progress = s.progress ? s.progress.phase + " (" + s.progress.step + " of " + s.progress.total + ")" : "-";
  body.appendChild(dl([
    ["State", el("span", st, "state-" + st)],
    ["Pool", s.pool],
    ["Current", el("span", s.current || "-", "mono")],
    ["Desired", el("span", s.desired || "-", "mono")],
    ["Progress", progress],
    ["Last report", s.lastReport],
    ["OS image", el("span", s.os ? s.os.image : "-", "mono")],
    ["Image digest", el("span", s.os && s.os.imageDigest ? s.os.imageDigest : "-", "mono")],
    ["OS deployment", el("span", s.os ? s.os.deployment + (s.os.version ? " (version " + s.os.version + ")" : "") : "-", "mono")],
    ["Pinned", s.pinned ? s.pinned.config + " by " + s.pinned.by : "-"],
    ["Excluded", s.excluded ? "by " + s.excluded.by : "-"],
  ]));
  body.appendChild(el("h3", "Reason"));
  body.appendChild(el("pre", s.reason || s.error || "(none)", "reason"));
  if ((s.drift || []).length) {
    body.appendChild(el("h3", "Drift"));
    const ul = el("ul");
    for (const d of s.drift) ul.appendChild(el("li", typeof d === "string" ? d : JSON.stringify(d)));
    body.appendChild(ul);
  }
  body.appendChild(el("h3", "History"));
  const hist = el("table");
  hist.appendChild(row(["Time", "State", "Desired", "Reason"]));
  for (const h of (s.history || []).slice().reverse()) hist.appendChild(row([h.time, h.state, short(h.desired), h.reason || ""]));
  body.appendChild(hist);
  body.appendChild(el("h3", "Events"));
  const evt = el("table");
  evt.appendChild(el("thead"));
  evt.appendChild(el("tbody"));
  renderEvents(ev.items || [], evt);
  body.appendChild(evt);
  $("detail-title").textContent = "Node " + name;
  $("detail-body").replaceChildren(body);
}

async function renderPoolDetail(name) {
  const [p, rendered] = await Promise.all([
    api("/api/v1/pools/" + encodeURIComponent(name)),
    api("/api/v1/renderedconfigs"),
  ]);
  const target = p.spec.configuration && p.spec.configuration.name;
  const mine = (rendered.items || [])
    .map((r) => r.metadata.name)
    .filter((n) => n.startsWith("rendered-" + name + "-"))
    .sort();
  const body = el("div");
  body.appendChild(dl([
    ["Target", el("span", target || "-", "mono")],
    ["Max unavailable", p.spec.maxUnavailable],
    ["Paused", p.spec.paused ? "yes" : "no"],
    ["Maintenance", p.status.maintenance ? p.status.maintenance.message : "-"],
  ]));
  body.appendChild(el("h3", "Diff between two rendered configs"));
  const a = el("select"), b = el("select");
  for (const n of mine) { a.appendChild(el("option", n)); b.appendChild(el("option", n)); }
  const chosen = state.diff[name];
  if (chosen && mine.includes(chosen[0]) && mine.includes(chosen[1])) {
    a.value = chosen[0];
    b.value = chosen[1];
  } else {
    if (mine.length > 1) a.selectedIndex = mine.length - 2;
    b.value = target && mine.includes(target) ? target : mine[mine.length - 1];
  }
  const keep = () => { state.diff[name] = [a.value, b.value]; };
  a.addEventListener("change", keep);
  b.addEventListener("change", keep);
  const go = el("button", "Diff");
  go.type = "button";
  const out = el("pre", "", "mono diff");
  go.addEventListener("click", () => showDiff(a.value, b.value, out));
  body.append(a, " → ", b, " ", go, out);
  body.appendChild(el("h3", "Rendered config " + (target || "")));
  const cfg = el("pre", "", "mono");
  if (target) cfg.textContent = JSON.stringify((await api("/api/v1/renderedconfigs/" + encodeURIComponent(target))).spec, null, 2);
  body.appendChild(cfg);
  $("detail-title").textContent = "Pool " + name;
  $("detail-body").replaceChildren(body);
  if (mine.length > 1) showDiff(a.value, b.value, out);
}

async function showDiff(from, to, out) {
  try {
    const text = await api("/api/v1/renderedconfigs/" + encodeURIComponent(from) + "/diff?to=" + encodeURIComponent(to), true);
    out.replaceChildren();
    for (const line of text.split("\n")) {
      const cls = line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : null;
      out.appendChild(el("span", line + "\n", cls));
    }
    if (!text) out.textContent = "(the same)";
  } catch (e) { out.textContent = String(e.message); }
}

function select(kind, name) {
  state.selected = { kind, name };
  $("detail").hidden = false;
  refresh();
}

// Every node, a page of 500 at a time, in the summary view: without the history, drift lines
// and action runs the table does not show (a node's detail reads them), which the server
// answers from memory.
async function nodePages() {
  const items = [];
  let from = null;
  for (;;) {
    const page = await api("/api/v1/nodes?view=summary&limit=500" +
      (from === null ? "" : "&continue=" + encodeURIComponent(from)));
    for (const n of page.items || []) items.push(n);
    const next = page.metadata && page.metadata.continue;
    if (!next) return { items };
    // Pages go by name: a position that does not move on would never end.
    if (from !== null && next <= from) throw new Error("the server's pages of nodes do not move on");
    from = next;
  }
}

async function refresh() {
  if (state.pending) {
    state.dirty = true;
    return;
  }
  state.pending = true;
  state.dirty = false;
  try {
    const [pools, nodes, events] = await Promise.all([
      api("/api/v1/pools"), nodePages(), api("/api/v1/events?limit=30"),
    ]);
    renderPools(pools.items || []);
    renderNodes(nodes.items || []);
    renderEvents(events.items || [], $("events"));
    if (state.selected) {
      if (state.selected.kind === "node") await renderNodeDetail(state.selected.name);
      else await renderPoolDetail(state.selected.name);
    }
    state.refreshes += 1;
    $("error").textContent = "";
  } catch (e) {
    if (e.auth) return signOut(e.message);
    $("error").textContent = String(e.message);
  } finally {
    state.pending = false;
    if (state.dirty) refresh();
  }
}

// Follows /api/v1/watch; re-reads on every change; reconnects with a growing delay.
async function follow() {
  let delay = 1000;
  for (;;) {
    if (!state.token) return;
    try {
      const r = await fetch("/api/v1/watch", { headers: { Authorization: "Bearer " + state.token } });
      if (r.status === 401 || r.status === 403) return signOut(await r.text());
      if (!r.ok || !r.body) throw new Error("watch: " + r.status);
      $("live").textContent = "live";
      $("live").className = "live";
      delay = 1000;
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const msg = buf.slice(0, i);
          buf = buf.slice(i + 2);
          if (msg.split("\n").includes("event: change")) refresh();
        }
      }
    } catch (e) {
      $("error").textContent = String(e.message);
    }
    $("live").textContent = "reconnecting";
    $("live").className = "live off";
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 30000);
  }
}

function signOut(why) {
  sessionStorage.removeItem("hearth-token");
  state.token = null;
  $("main").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = why || "";
}

function start(token) {
  state.token = token;
  sessionStorage.setItem("hearth-token", token);
  $("login").hidden = true;
  $("main").hidden = false;
  $("logout").hidden = false;
  refresh();
  follow();
}

document.addEventListener("DOMContentLoaded", () => {
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const t = $("token").value.trim();
    if (t) start(t);
  });
  $("logout").addEventListener("click", () => signOut(""));
  // A link may carry the token in its fragment (never sent to the server); it is taken out of
  // the address bar at once.
  const m = location.hash.match(/token=([^&]+)/);
  if (m) history.replaceState(null, "", location.pathname);
  const token = m ? decodeURIComponent(m[1]) : sessionStorage.getItem("hearth-token");
  if (token) start(token); else signOut("");
});

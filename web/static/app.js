// paratune web page: plain JavaScript and SVG, no libraries, nothing fetched
// from anywhere but this server. Talks to the REST API under /v1.
"use strict";

const $ = (sel) => document.querySelector(sel);
const SVGNS = "http://www.w3.org/2000/svg";
const TERMS = [  // breakdown_s terms drawn as segments; they add up to iteration_time_s
  ["compute", "compute", "#4e79a7"], ["recompute", "recompute", "#a0cbe8"],
  ["comm_x", "comm x", "#f28e2b"], ["comm_y", "comm tp/y", "#ffbe7d"], ["comm_z", "comm z", "#59a14f"],
  ["comm_cp", "comm cp", "#8cd17d"], ["comm_data", "comm data", "#b6992d"], ["comm_pp", "comm pp", "#e15759"],
  ["bubble", "bubble", "#ff9d9a"], ["optimizer", "optimizer", "#79706e"], ["offload", "offload", "#d37295"]];
const MEMORY = ["params", "grads", "optimizer", "activations", "buffers", "total", "reserved"];
const STAGE_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
                      "#9c755f", "#bab0ac"];

const state = { doc: null, request: null, selected: 0, compare: [], emit: null, sweep: null };
// A network's step (docs/networks.md) drawn as segments; they add up to step_s.
const NET_TERMS = [["forward", "forward", "#4e79a7"], ["backward", "backward", "#a0cbe8"],
                   ["tensor", "tensor-parallel comm", "#f28e2b"], ["sequence", "sequence all-to-all", "#ff9d9a"],
                   ["halo", "halo exchange", "#8cd17d"],
                   ["sync", "gradient sync (exposed)", "#b6992d"], ["optimizer", "optimizer", "#79706e"]];
const NETWORK_PREFIX = "network:";

// ---------- helpers ----------
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") e.textContent = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}
function svg(tag, attrs = {}, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text != null) e.textContent = text;
  return e;
}
const fmt = (v, d = 3) => (v == null || !isFinite(v) ? "–" : Number(v).toFixed(d));
const fmtInt = (v) => (v == null ? "–" : Math.round(v).toLocaleString("en-US"));
function niceTicks(max, n = 5) {
  if (!(max > 0)) return [0];
  const step0 = max / n, mag = Math.pow(10, Math.floor(Math.log10(step0)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= step0);
  const out = [0];
  while (out[out.length - 1] < max * 0.9999) out.push(+(out[out.length - 1] + step).toPrecision(10));
  return out;  // the last tick is at or above max, so nothing is drawn past the axis
}
// Charts are drawn in CSS pixels at their box's width (viewBox = box), so an
// 11 px label stays 11 px on a phone instead of shrinking with the drawing.
function boxWidth(box, fallback) {
  return Math.max(260, Math.floor(box.clientWidth || fallback));
}
function setStatus(text, error = false) {
  const s = $("#status");
  s.textContent = text;
  s.classList.toggle("error", error);
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const token = $("#token").value.trim();
  if (token) headers.Authorization = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let data = text;
  if (!(res.headers.get("Content-Type") || "").startsWith("text/plain")) {
    try { data = JSON.parse(text); } catch (e) { data = text; }
  }
  if (!res.ok) {
    const p = data && typeof data === "object" ? data : {};
    const where = p.errors && p.errors[0] ? " (" + p.errors[0].pointer + ")" : "";
    const err = new Error((p.title || res.statusText) + ": " + (p.detail || text) + where);
    err.problem = p;
    throw err;
  }
  return data;
}

// ---------- the form ----------
function fillSelect(sel, items, preferred, label = (x) => x.name) {
  sel.replaceChildren(...items.map((x) => el("option", { value: x.name, text: label(x) })));
  if (preferred && items.some((x) => x.name === preferred)) sel.value = preferred;
}

// The model select holds transformer models and, in their own group, the
// networks that are not transformer stacks (value "network:NAME").
function isNetwork() { return $("#model").value.startsWith(NETWORK_PREFIX); }

// A network job (docs/networks.md): one GPU count, the global batch in samples.
function buildNetworkRequest() {
  const req = { network: $("#model").value.slice(NETWORK_PREFIX.length), cluster: $("#cluster").value };
  const g = $("#gpus").value.trim(), gb = $("#global_batch").value.trim(), top = $("#top").value.trim();
  req.gpus = /^\d+$/.test(g) ? parseInt(g, 10) : g;
  req.global_batch = /^\d+$/.test(gb) ? parseInt(gb, 10) : gb;
  if (top) req.top = /^\d+$/.test(top) ? parseInt(top, 10) : top;
  return req;
}

function onModelChange() {
  const net = isNetwork();
  $("#batch-label").textContent = net ? "Global batch (samples)" : "Global batch (sequences)";
  for (const id of ["seq_len", "space", "objective", "fix", "tokens", "gpu_hour_price"]) $("#" + id).disabled = net;
}

function buildRequest() {
  if (isNetwork()) return buildNetworkRequest();
  const req = { model: $("#model").value, cluster: $("#cluster").value, training: {} };
  const g = $("#gpus").value.trim();
  req.gpus = /^\d+$/.test(g) ? parseInt(g, 10) : g;
  const gb = $("#global_batch").value.trim();
  req.training.global_batch = /^\d+$/.test(gb) ? parseInt(gb, 10) : gb;
  const seq = $("#seq_len").value.trim();
  if (seq) req.training.seq_len = /^\d+$/.test(seq) ? parseInt(seq, 10) : seq;
  req.space = $("#space").value;
  req.objective = $("#objective").value;
  const top = $("#top").value.trim();
  if (top) req.top = /^\d+$/.test(top) ? parseInt(top, 10) : top;
  const fix = $("#fix").value.trim();
  if (fix) req.fix = fix;
  // A token budget prices the run to it (docs/rest.md, goodput): each
  // candidate then carries its checkpoint interval, effective fraction, days
  // and GPU-hours, and "time to train" can rank.
  const tokens = $("#tokens").value.trim();
  if (tokens) {
    req.goodput = { tokens: /^[0-9.]+(e[0-9]+)?$/i.test(tokens) ? Number(tokens) : tokens };
    const price = $("#gpu_hour_price").value.trim();
    if (price) req.goodput.gpu_hour_price = Number(price);
  }
  req.pareto = true;
  return req;
}

// One line on a candidate's run to the token budget (docs/model.md, Time to train).
function goodputLine(g) {
  const ck = g.checkpoint;
  const cost = g.cost != null ? `, cost ${fmtInt(g.cost)}` : "";
  return `To the budget: ${fmt(g.time_to_train_days, 2)} days at ${fmt(100 * g.effective_fraction, 1)} % effective ` +
    `(checkpoint every ${fmt(g.interval_s / 60, 1)} min, ${ck.async ? "async" : "sync"}, ${fmt(ck.blocking_s, 2)} s stall), ` +
    `${fmtInt(g.gpu_hours)} GPU-hours${cost}.`;
}

// Rank 1's failures priced three ways (docs/model.md, Spares, waiting or
// continuing on fewer GPUs), as `paratune plan --tokens` prints them.
function policiesLine(f) {
  const what = { spare: "a hot spare", wait: "wait for the node", shrink: "continue on fewer GPUs" };
  const parts = f.policies.map((p) => {
    const spares = p.spare_nodes > 0 ? `, ${p.spare_nodes} spare node${p.spare_nodes > 1 ? "s" : ""} held` : "";
    const onto = p.name === "shrink" && f.shrink_to ?
      ` (${f.shrink_to.gpus} GPUs as ${f.shrink_to.config}, ${fmt(100 * f.shrink_to.relative_tokens_per_s, 1)} % throughput)` : "";
    return `${what[p.name]}${onto}: ${fmt(p.per_failure_min, 1)} min per failure${spares}, ` +
      `${fmt(p.time_to_train_days, 2)} days, ${fmtInt(p.gpu_hours)} GPU-hours`;
  });
  return `When a node fails (rank 1; back after ${fmt(f.repair_s / 3600, 1)} h` +
    `${f.repair_assumed ? ", assumed" : ""}): ${parts.join("; ")}. Trains soonest: ${f.soonest}; ` +
    `fewest GPU-hours, spares included: ${f.fewest_gpu_hours}.`;
}

async function onSubmit(ev) {
  ev.preventDefault();
  const button = $("#submit");
  button.disabled = true;
  document.body.dataset.state = "planning";
  setStatus("searching…");
  const t0 = performance.now();
  try {
    const request = buildRequest();
    const doc = await api("POST", "/v1/plans", request);
    if (doc.schema === "paratune.network_plans/v1") {
      state.netdoc = doc;
      renderNetwork(doc);
      setStatus("done in " + ((performance.now() - t0) / 1000).toFixed(2) + " s");
      document.body.dataset.state = "planned";
      return;
    }
    $("#network-results").hidden = true;
    state.doc = doc;
    state.request = request;
    state.selected = 0;
    state.compare = [];
    state.sweep = null;
    render();
    await applyLinkOptions();
    setStatus("done in " + ((performance.now() - t0) / 1000).toFixed(2) + " s");
    document.body.dataset.state = "planned";
  } catch (e) {
    setStatus(e.message, true);
    document.body.dataset.state = "error";
  } finally {
    button.disabled = false;
  }
}

// ---------- network results ----------
function netTerms(p) {  // [key, label, colour, seconds] adding up to step_s
  const n = p.layout.accumulation;
  const v = { forward: n * p.forward_s, backward: n * p.backward_s, tensor: n * p.tensor_comm_s,
              sequence: n * (p.sequence_comm_s || 0), halo: n * p.halo_s, sync: p.grad_sync_exposed_s,
              optimizer: p.optimizer_s };
  return NET_TERMS.map(([k, label, c]) => [k, label, c, Math.max(0, v[k])]);
}

function netLayout(l) {
  return `${l.sharding}, data ${l.data}` + (l.tensor > 1 ? `, tensor ${l.tensor}` : "") +
    (l.sequence > 1 ? `, sequence ${l.sequence}` : "") +
    (l.spatial > 1 ? `, spatial ${l.spatial}` : "") +
    `, micro-batch ${l.micro_batch}` + (l.accumulation > 1 ? ` × ${l.accumulation}` : "") +
    (l.recompute ? ", blocks recomputed" : "");
}

function netBar(p, width = 160) {
  const s = svg("svg", { width, height: 14, role: "img", "aria-label": "where the step goes" });
  let x = 0;
  for (const [, label, colour, v] of netTerms(p)) {
    const w = width * v / p.step_s;
    if (w <= 0) continue;
    const r = svg("rect", { x, y: 0, width: w, height: 14, fill: colour });
    r.appendChild(svg("title", {}, `${label}: ${fmt(v)} s`));
    s.appendChild(r);
    x += w;
  }
  return s;
}

function renderNetwork(doc) {
  $("#results").hidden = true;
  $("#network-results").hidden = false;
  const j = doc.job;
  $("#network-title").textContent = `Ranked layouts: ${j.network} (${j.family})`;
  $("#network-summary").textContent = `${j.network} (${fmt(j.params / 1e6, 1)} M parameters, ` +
    `${fmt(j.train_flops_per_sample / 1e9, 1)} GFLOP per trained sample) on ${j.gpus} × ${j.gpu} (${j.cluster}), ` +
    `global batch ${fmtInt(j.global_batch)} samples: ${fmtInt(doc.layouts_fit)} layouts fit, ` +
    `${fmtInt(doc.refused_over_memory)} over ${fmt(100 * (1 - doc.headroom), 0)} % of memory.`;
  const rows = doc.plans.map((p, i) => {
    const tr = el("tr", { tabindex: "0" },
      el("td", { text: i + 1 }), el("td", { class: "cfg", text: netLayout(p.layout) }),
      el("td", { text: fmt(p.step_s) }), el("td", { text: fmtInt(p.samples_per_s) }),
      el("td", { text: fmt(100 * p.mfu, 1) + " %" }), el("td", { text: fmt(p.memory_GiB, 1) }),
      el("td", {}, netBar(p)));
    tr.addEventListener("click", () => selectNetwork(i));
    tr.addEventListener("keydown", (e) => { if (e.key === "Enter") selectNetwork(i); });
    return tr;
  });
  $("#network-plans tbody").replaceChildren(...rows);
  $("#network-legend").replaceChildren(...NET_TERMS.map(([, label, c]) => {
    const s = el("span", { text: label });
    s.style.setProperty("--c", c);
    return s;
  }));
  if (!doc.plans.length) {
    $("#network-detail").textContent = "Nothing fits: more GPUs, a smaller global batch, or (3D networks) a spatial split.";
    $("#network-layers tbody").replaceChildren();
    return;
  }
  selectNetwork(0);
}

function selectNetwork(i) {
  const p = state.netdoc.plans[i];
  $("#network-plans tbody").querySelectorAll("tr").forEach((tr, k) => tr.setAttribute("aria-selected", k === i));
  $("#network-detail").textContent = `#${i + 1} ${netLayout(p.layout)}: step ${fmt(p.step_s)} s = ` +
    netTerms(p).filter(([, , , v]) => v > 0).map(([, label, , v]) => `${label} ${fmt(v)} s`).join(" + ") +
    `; ${fmt(p.model_tflops_per_gpu, 1)} model TFLOP/s per GPU; memory ${fmt(p.memory_GiB, 1)} GiB ` +
    `(activations ${fmt(p.activations_GiB, 1)}).`;
  $("#network-layers tbody").replaceChildren(...p.slowest_layers.map((l) => el("tr", {},
    el("td", { class: "cfg", text: l.layer }), el("td", { text: l.op }), el("td", { text: fmt(1e3 * l.seconds, 2) }),
    el("td", { text: l.memory_bound ? "memory" : "math" }))));
}

// ---------- results ----------
function terms(pred) {  // [key, label, colour, seconds]; compute shown without its recompute part
  const b = pred.breakdown_s;
  return TERMS.map(([k, label, c]) => {
    let v = b[k] || 0;
    if (k === "compute") v = Math.max(0, (b.compute || 0) - (b.recompute || 0));
    return [k, label, c, v];
  });
}

function render() {
  const doc = state.doc;
  $("#results").hidden = false;
  const rejected = Object.entries(doc.rejected || {}).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
  $("#summary").textContent = `${doc.model} on ${doc.gpus} GPUs of ${doc.cluster}: searched ${fmtInt(doc.evaluated)} ` +
    `configurations in ${fmt(doc.search_time_s, 2)} s; ${fmtInt(doc.feasible)} fit` +
    (rejected.length ? "; rejected: " + rejected.slice(0, 4).map(([r, n]) => `${fmtInt(n)} ${r}`).join(", ") : "") + ".";
  renderScaling(doc);
  renderTable(doc);
  renderBreakdown(doc);
  renderPareto(doc);
  setupExplore(doc);
  select(0);
  renderCompare();
}

function renderScaling(doc) {
  const box = $("#scaling");
  if (!doc.scaling || doc.scaling.length < 2) { box.hidden = true; return; }
  box.hidden = false;
  const rows = doc.scaling.map((s) => el("tr", {},
    el("td", { text: s.gpus }), el("td", { text: fmt(s.iteration_time_s) }), el("td", { text: fmtInt(s.tokens_per_s) }),
    el("td", { text: fmt(s.tokens_per_s_per_gpu, 1) }), el("td", { text: s.mfu == null ? "–" : fmt(100 * s.mfu, 1) + " %" }),
    el("td", { text: s.pareto ? "★" : "" }), el("td", { class: "cfg", text: s.config_string || "nothing fits" })));
  box.replaceChildren(el("h3", { text: "Scaling: the best plan per GPU count (★ = on the GPUs vs tokens/s front)" }),
    el("table", {}, el("thead", {}, el("tr", {}, ...["GPUs", "time (s)", "tokens/s", "tokens/s/GPU", "MFU", "front", "configuration"]
      .map((h) => el("th", { scope: "col", class: h === "configuration" ? "cfg" : "", text: h })))), el("tbody", {}, ...rows)));
}

function miniBar(pred, width = 160) {
  const s = svg("svg", { viewBox: `0 0 ${width} 12`, width, height: 12, role: "img",
    "aria-label": terms(pred).filter((t) => t[3] > 0).map((t) => `${t[1]} ${fmt(t[3])} s`).join(", ") });
  let x = 0;
  const total = pred.iteration_time_s || 1;
  for (const [, label, c, v] of terms(pred)) {
    const w = (v / total) * width;
    if (w <= 0) continue;
    const r = svg("rect", { x, y: 0, width: w, height: 12, fill: c });
    r.append(svg("title", {}, `${label}: ${fmt(v)} s`));
    s.append(r);
    x += w;
  }
  return s;
}

// The ranked rows as the CLI table shows them: `~` marks a leader (within the
// winner's uncertainty band), ± the row's band, `!` an MFU above the GPU's
// best published one, memory as reserved per GPU; a row ranked above a faster
// one carries its rank_note, and the footer names the fastest row.
function renderTable(doc) {
  const tbody = $("#candidates tbody"), tfoot = $("#candidates tfoot");
  tbody.replaceChildren();
  tfoot.replaceChildren();
  const cols = $("#candidates thead tr").children.length;
  if (!doc.candidates.length) {
    tbody.append(el("tr", {}, el("td", { colspan: cols, class: "cfg bad", text: "No configuration fits; see the rejections above." })));
    const f = doc.fewest_gpus_that_fit;
    if (f) {
      tbody.append(el("tr", {}, el("td", { colspan: cols, class: "cfg",
        text: `Fewest GPUs that fit (doubling from ${doc.gpus}): ${f.gpus}, where the best is ${f.framework} ${f.config_string} at ${fmt(f.tokens_per_s / 1e3, 1)}k tokens/s, ${fmt(f.memory_GiB, 1)} GiB per GPU.` +
          (f.goodput ? " " + goodputLine(f.goodput) : "") })));
    }
    return;
  }
  doc.candidates.forEach((c, i) => {
    const p = c.prediction;
    const box = el("input", { type: "checkbox", "aria-label": "compare candidate " + c.rank });
    box.addEventListener("click", (e) => e.stopPropagation());
    box.addEventListener("change", () => toggleCompare(i, box.checked));
    const rank = el("td", { class: "rank" }, String(c.rank),
      c.within_band ? el("span", { class: "leader", title: "within the winner's uncertainty band", text: "~" }) : null);
    const cfg = el("td", { class: "cfg" }, c.config_string,
      c.rank_note ? el("div", { class: "rank-note", text: c.rank_note }) : null,
      c.goodput ? el("div", { class: "goodput", text: goodputLine(c.goodput) }) : null);
    const mfu = el("td", { class: "mfu" }, fmt(100 * p.mfu, 1) + " %",
      p.above_published_mfu ? el("span", { class: "ceiling bad",
        title: `above the GPU's best published MFU (${fmt(100 * p.published_mfu_ceiling, 1)} %): ranked as if at it`,
        text: " !" }) : null);
    const tr = el("tr", { tabindex: "0", "aria-selected": "false", "data-index": i },
      rank, cfg, el("td", { text: fmt(p.iteration_time_s) }), el("td", { class: "band", text: bandPercent(p) }),
      el("td", { text: fmtInt(p.tokens_per_s) }), mfu, el("td", { class: "mem", text: fmt(p.memory_GiB.reserved, 1) }),
      el("td", {}, miniBar(p)), el("td", {}, box));
    tr.addEventListener("click", () => select(i));
    tr.addEventListener("keydown", (e) => {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); select(i); }
      if (e.key === "ArrowDown" && tr.nextSibling) { e.preventDefault(); tr.nextSibling.focus(); }
      if (e.key === "ArrowUp" && tr.previousSibling) { e.preventDefault(); tr.previousSibling.focus(); }
    });
    tbody.append(tr);
  });
  tfoot.append(el("tr", {}, el("td", { colspan: cols, class: "note", text: tableFooter(doc) })));
  if (doc.failure_policies) {
    tfoot.append(el("tr", {}, el("td", { colspan: cols, class: "note policies",
      text: policiesLine(doc.failure_policies) })));
  }
}

// The band of a prediction in percent (its range's upper end over the time).
function bandPercent(p) {
  const r = p.iteration_time_s_range;
  return r && p.iteration_time_s > 0 ? "±" + fmt(100 * (r[1] / p.iteration_time_s - 1), 0) : "–";
}

// What the CLI prints under its table: how rows are ranked, the fastest row
// (among those shown and those their notes name), the leaders and the rows
// above the published MFU.
function tableFooter(doc) {
  const cands = doc.candidates;
  let fastest = cands[0];
  for (const c of cands) if (c.prediction.iteration_time_s < fastest.prediction.iteration_time_s) fastest = c;
  const parts = [];
  if (doc.ranked_by) parts.push(doc.ranked_by[0].toUpperCase() + doc.ranked_by.slice(1) + ".");
  parts.push(`Fastest: #${fastest.rank} ${fmt(fastest.prediction.iteration_time_s)} s.`);
  const within = cands.filter((c) => c.within_band).length;
  if (within > 1) {
    parts.push(`~ ${within} leaders are within the winner's uncertainty band (${bandPercent(cands[0].prediction)} %): ` +
      "among them the simpler configuration is ranked first.");
  }
  const above = cands.filter((c) => c.prediction.above_published_mfu).length;
  if (above) {
    parts.push(`! ${above} predicted above the best published MFU for this GPU and precision ` +
      `(${fmt(100 * cands[0].prediction.published_mfu_ceiling, 0)} %): ranked as if at it.`);
  }
  parts.push("Memory is reserved per GPU.");
  return parts.join(" ");
}

function renderBreakdown(doc) {
  const cands = doc.candidates.slice(0, 15);
  const box = $("#breakdown-chart");
  box.replaceChildren();
  $("#legend").replaceChildren(...TERMS.map(([, label, c]) => {
    const s = el("span", { text: label });
    s.style.setProperty("--c", c);
    return s;
  }));
  if (!cands.length) return;
  // Wide: the configuration left of its bar. Narrow: above it, bars full width.
  const W = boxWidth(box, 760), narrow = W < 560;
  const rowH = narrow ? 34 : 20, left = narrow ? 4 : 250, right = narrow ? 12 : 20, top = 8;
  const H = top + cands.length * rowH + 40;
  const maxChars = narrow ? Math.floor((W - 8) / 6.5) : 31;
  const max = Math.max(...cands.map((c) => c.prediction.iteration_time_s));
  const ticks = niceTicks(max);
  const xmax = ticks[ticks.length - 1] || max;
  const sx = (v) => left + (v / xmax) * (W - left - right);
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "stacked bars of the time breakdown of the top candidates" });
  const grid = svg("g", { class: "grid" });
  for (const t of ticks) {
    grid.append(svg("line", { x1: sx(t), x2: sx(t), y1: top, y2: H - 32 }));
    s.append(svg("text", { x: sx(t), y: H - 20, "text-anchor": t === 0 && narrow ? "start" : "middle" },
      fmt(t, t < 1 ? 2 : 1)));
  }
  s.prepend(grid);
  cands.forEach((c, i) => {
    const y = top + i * rowH, barY = narrow ? y + 16 : y;
    const name = svg("text", narrow ? { x: left, y: y + 12 } : { x: left - 6, y: y + 13, "text-anchor": "end" },
      `${c.rank}. ${c.config_string.length > maxChars ? c.config_string.slice(0, maxChars - 1) + "…" : c.config_string}`);
    name.append(svg("title", {}, c.config_string));
    s.append(name);
    let x = 0;
    for (const [, label, color, v] of terms(c.prediction)) {
      if (v <= 0) continue;
      const r = svg("rect", { x: sx(x), y: barY + 3, width: Math.max(0.5, sx(x + v) - sx(x)), height: 14, fill: color });
      r.append(svg("title", {}, `#${c.rank} ${label}: ${fmt(v)} s`));
      s.append(r);
      x += v;
    }
  });
  s.append(svg("text", { x: (left + W - right) / 2, y: H - 3, "text-anchor": "middle" }, "seconds per iteration"));
  box.append(s);
}

function renderPareto(doc) {
  const box = $("#pareto-chart");
  box.replaceChildren();
  const pts = doc.candidates.map((c, i) => ({ i, t: c.prediction.iteration_time_s, m: c.prediction.memory_GiB.reserved, label: c.config_string }));
  const front = (doc.pareto || []).map((p) => ({ t: p.iteration_time_s, m: p.memory_GiB, label: p.config_string }));
  const all = pts.concat(front);
  if (!all.length) return;
  const W = boxWidth(box, 520), H = Math.round(Math.min(330, Math.max(240, W * 0.65)));
  const L = 56, R = 14, T = 10, B = 42;
  const tmax = Math.max(...all.map((p) => p.t)), mmax = Math.max(...all.map((p) => p.m));
  const xt = niceTicks(mmax, W < 420 ? 4 : 5), yt = niceTicks(tmax);
  const X = xt[xt.length - 1] || 1, Y = yt[yt.length - 1] || 1;
  const sx = (m) => L + (m / X) * (W - L - R), sy = (t) => H - B - (t / Y) * (H - T - B);
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "scatter of iteration time against memory per GPU" });
  const g = svg("g", { class: "grid" });
  for (const t of xt) { g.append(svg("line", { x1: sx(t), x2: sx(t), y1: T, y2: H - B })); s.append(svg("text", { x: sx(t), y: H - B + 14, "text-anchor": "middle" }, fmt(t, 0))); }
  for (const t of yt) { g.append(svg("line", { x1: L, x2: W - R, y1: sy(t), y2: sy(t) })); s.append(svg("text", { x: L - 5, y: sy(t) + 4, "text-anchor": "end" }, fmt(t, t < 1 ? 2 : 1))); }
  s.prepend(g);
  s.append(svg("text", { x: (L + W) / 2, y: H - 6, "text-anchor": "middle" }, "memory per GPU (GiB)"));
  s.append(svg("text", { x: 12, y: (T + H - B) / 2, transform: `rotate(-90 12 ${(T + H - B) / 2})`, "text-anchor": "middle" }, "seconds per iteration"));
  if (front.length) {
    const sorted = front.slice().sort((a, b) => a.m - b.m);
    s.append(svg("polyline", { class: "front", points: sorted.map((p) => `${sx(p.m)},${sy(p.t)}`).join(" ") }));
    for (const p of sorted) {
      const d = svg("rect", { x: sx(p.m) - 3.5, y: sy(p.t) - 3.5, width: 7, height: 7, fill: "#2a5bd7" });
      d.append(svg("title", {}, `Pareto: ${p.label}\n${fmt(p.t)} s, ${fmt(p.m, 1)} GiB`));
      s.append(d);
    }
  }
  for (const p of pts) {
    const c = svg("circle", { class: "pt" + (p.i === state.selected ? " sel" : ""), cx: sx(p.m), cy: sy(p.t), r: 4.5,
      fill: p.i === 0 ? "#e15759" : "#f28e2b", "data-index": p.i });
    c.append(svg("title", {}, `#${p.i + 1} ${p.label}\n${fmt(p.t)} s, ${fmt(p.m, 1)} GiB`));
    c.addEventListener("click", () => select(p.i));
    s.append(c);
  }
  box.append(s);
}

function select(i) {
  const doc = state.doc;
  if (!doc || !doc.candidates[i]) return;
  state.selected = i;
  document.querySelectorAll("#candidates tbody tr").forEach((tr) =>
    tr.setAttribute("aria-selected", String(Number(tr.dataset.index) === i)));
  document.querySelectorAll("#pareto-chart circle").forEach((c) => c.classList.toggle("sel", Number(c.dataset.index) === i));
  const c = doc.candidates[i], p = c.prediction;
  $("#detail-summary").textContent = `#${c.rank} ${c.config_string}: ${fmt(p.iteration_time_s)} s per iteration, ` +
    `${fmtInt(p.tokens_per_s)} tokens/s, MFU ${fmt(100 * p.mfu, 1)} %, ${fmt(p.memory_GiB.reserved, 1)} GiB reserved of ` +
    `${fmt(p.memory_GiB.usable, 1)} usable per GPU, ${p.micro_batches} micro-batches.`;
  renderTopology(doc, c);
  renderEmit();
}

// ---------- topology ----------
function degrees(cfg) {
  return { x: cfg.gx || 1, y: cfg.gy || cfg.tp || 1, cp: cfg.cp || 1, z: cfg.gz || 1, data: cfg.dp || 1, pp: cfg.pp || 1 };
}
function renderTopology(doc, cand) {
  const box = $("#topology");
  box.replaceChildren();
  const cluster = doc.job && doc.job.cluster ? doc.job.cluster : {};
  const gpn = cluster.gpus_per_node || 8, gpus = doc.gpus;
  const deg = degrees(cand.config);
  const order = (cand.config.placement || "x-y-cp-z-data-pp").split("-");
  const coords = (r) => { const c = {}; for (const d of order) { const n = deg[d] || 1; c[d] = r % n; r = Math.floor(r / n); } return c; };
  const nodes = Math.ceil(gpus / gpn), shown = Math.min(nodes, 16);
  // Cells shrink (to 30 px) so a node fits the box; nodes go two to a row where they fit.
  const avail = boxWidth(box, 628), pad = 8, cols = Math.min(gpn, 8), rowsPerNode = Math.ceil(gpn / cols);
  const cell = Math.max(30, Math.min(34, Math.floor((avail - 10 - pad * 2) / cols)));
  const nodeW = cols * cell + pad * 2, nodeH = rowsPerNode * cell + pad * 2 + 14;
  const perRow = Math.max(1, Math.min(shown, 2, Math.floor(avail / (nodeW + 10))));
  const W = perRow * (nodeW + 10), H = Math.ceil(shown / perRow) * (nodeH + 10) + (nodes > shown ? 18 : 0);
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": `${shown} of ${nodes} nodes; each GPU coloured by pipeline stage and labelled with its tensor-parallel rank` });
  for (let n = 0; n < shown; ++n) {
    const ox = (n % perRow) * (nodeW + 10), oy = Math.floor(n / perRow) * (nodeH + 10);
    s.append(svg("rect", { x: ox, y: oy, width: nodeW, height: nodeH, rx: 6, fill: "#f3f5f9", stroke: "#c5cbd6" }));
    s.append(svg("text", { x: ox + pad, y: oy + 12 }, `node ${n}`));
    for (let g = 0; g < gpn && n * gpn + g < gpus; ++g) {
      const r = n * gpn + g, c = coords(r);
      const x = ox + pad + (g % cols) * cell, y = oy + 16 + pad + Math.floor(g / cols) * cell;
      const tp = c.x * deg.y + c.y;
      const rect = svg("rect", { x: x + 1, y: y + 1, width: cell - 2, height: cell - 2, rx: 4,
        fill: STAGE_COLORS[c.pp % STAGE_COLORS.length], stroke: c.data === 0 ? "#000" : "none", "stroke-width": 1.2 });
      rect.append(svg("title", {}, `rank ${r}: pipeline stage ${c.pp}, tensor rank ${tp}` +
        (deg.cp > 1 ? `, context rank ${c.cp}` : "") + (deg.z > 1 ? `, z ${c.z}` : "") + `, data replica ${c.data}`));
      s.append(rect);
      s.append(svg("text", { x: x + cell / 2, y: y + cell / 2 + 4, "text-anchor": "middle", fill: "#fff" },
        deg.cp > 1 ? `t${tp}c${c.cp}` : `t${tp}`));
    }
  }
  if (nodes > shown) s.append(svg("text", { x: 4, y: H - 4 }, `… and ${nodes - shown} more nodes of ${gpn} GPUs`));
  // Drawn at its own size (no wider than the box), not stretched to fill it.
  s.style.width = W + "px";
  s.style.maxWidth = "100%";
  box.append(s);
  $("#topology-caption").textContent = `Where each rank runs on ${cluster.name || doc.cluster} (${gpn} GPUs per node): ` +
    `colour = pipeline stage (${deg.pp}), label = tensor-parallel rank, outlined = data replica 0; placement ${order.join("→")}, innermost first.`;
}

// ---------- framework configuration ----------
async function setupEmit() {
  // The emit route exists when this build has the emitters; the OpenAPI document says.
  try {
    const spec = await api("GET", "/v1/openapi.json");
    const op = spec.paths && spec.paths["/v1/emit"];
    if (op) {
      const schema = spec.components.schemas.EmitRequest;
      state.emit = (schema && schema.properties && schema.properties.format && schema.properties.format.enum) || [];
    }
  } catch (e) { state.emit = null; }
  const sel = $("#emit-format");
  const formats = state.emit && state.emit.length ? ["framework default"].concat(state.emit) : ["config-json", "cli"];
  sel.replaceChildren(...formats.map((f) => el("option", { value: f, text: f })));
  sel.addEventListener("change", renderEmit);
  $("#emit-note").textContent = state.emit && state.emit.length ? "" :
    "This build has no framework emitters (POST /v1/emit); shown: the candidate's configuration as JSON and the " +
    "paratune command that reproduces it.";
}

async function renderEmit() {
  const doc = state.doc, c = doc && doc.candidates[state.selected];
  if (!c) return;
  const format = $("#emit-format").value;
  const pre = $("#emit-text");
  if (state.emit && state.emit.length) {
    pre.textContent = "…";
    // The plan request, not the whole document: the server answers it from its plan cache.
    const body = { request: state.request, rank: c.rank };
    if (format !== "framework default") body.format = format;
    try {
      const out = await api("POST", "/v1/emit", body);
      pre.textContent = typeof out === "string" ? out : JSON.stringify(out, null, 2);
      pre.classList.remove("bad");
    } catch (e) {
      pre.textContent = e.message;  // e.g. the framework would reject this plan, and why
      pre.classList.add("bad");
    }
    return;
  }
  if (format === "cli") {
    const t = doc.job.training;
    pre.textContent = `paratune predict --model ${doc.model} --cluster ${doc.cluster} --gpus ${doc.gpus} ` +
      `--global-batch ${t.global_batch} --seq ${t.seq_len} \\\n  --config "${configSpec(c.config)}" --format table`;
  } else {
    pre.textContent = JSON.stringify(c.config, null, 2);
  }
}
function configSpec(cfg) {
  return Object.entries(cfg).filter(([k, v]) => k !== "placement" && v !== false && v !== 0 && !(k === "cp_kind" && cfg.cp === 1))
    .map(([k, v]) => `${k}=${v}`).join(",");
}

// ---------- explore ----------
const SWEEPS = { tp: [1, 2, 4, 8, 16, 32, 64], pp: [1, 2, 4, 8, 16, 32, 64], cp: [1, 2, 4, 8, 16],
  mbs: [1, 2, 4, 8, 16], zero: [0, 1, 2, 3], recompute: ["none", "selective", "full"], vpp: [1, 2, 3, 4, 6, 8],
  gz: [1, 2, 4, 8, 16], gx: [1, 2, 4, 8] };

function varyingDims(doc) {
  const cands = doc.candidates;
  if (!cands.length) return [];
  return Object.keys(cands[0].config).filter((k) => new Set(cands.map((c) => String(c.config[k]))).size > 1);
}

function setupExplore(doc) {
  const dims = varyingDims(doc);
  const filters = $("#filters");
  filters.replaceChildren(...dims.map((d) => {
    const values = [...new Set(doc.candidates.map((c) => String(c.config[d])))].sort((a, b) => (+a - +b) || a.localeCompare(b));
    const sel = el("select", { "data-dim": d }, el("option", { value: "", text: "any" }),
      ...values.map((v) => el("option", { value: v, text: v })));
    sel.addEventListener("change", renderGroups);
    return el("label", {}, d, sel);
  }));
  const gb = $("#group-by");
  gb.replaceChildren(...dims.map((d) => el("option", { value: d, text: d })));
  gb.onchange = renderGroups;
  const sd = $("#sweep-dim");
  const cfg0 = doc.candidates[0] ? doc.candidates[0].config : {};
  sd.replaceChildren(...Object.keys(SWEEPS).filter((k) => k in cfg0 || k === "tp")
    .map((d) => el("option", { value: d, text: d })));
  renderGroups();
}

function renderGroups() {
  const doc = state.doc;
  const dim = $("#group-by").value;
  const active = [...document.querySelectorAll("#filters select")].filter((s) => s.value !== "");
  const kept = doc.candidates.filter((c) => active.every((s) => String(c.config[s.dataset.dim]) === s.value));
  const thead = $("#groups thead"), tbody = $("#groups tbody");
  thead.replaceChildren(el("tr", {}, ...[dim || "group", "candidates", "best time (s)", "best tokens/s", "least memory (GiB)", "best configuration"]
    .map((h, i) => el("th", { scope: "col", class: i === 5 ? "cfg" : "", text: h }))));
  const groups = new Map();
  for (const c of kept) {
    const k = dim ? String(c.config[dim]) : "all";
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(c);
  }
  const rows = [...groups.entries()].sort((a, b) => (+a[0] - +b[0]) || a[0].localeCompare(b[0])).map(([k, cs]) => {
    const best = cs.reduce((a, b) => (b.prediction.iteration_time_s < a.prediction.iteration_time_s ? b : a));
    return el("tr", {}, el("td", { text: k }), el("td", { text: cs.length }), el("td", { text: fmt(best.prediction.iteration_time_s) }),
      el("td", { text: fmtInt(Math.max(...cs.map((c) => c.prediction.tokens_per_s))) }),
      el("td", { text: fmt(Math.min(...cs.map((c) => c.prediction.memory_GiB.reserved)), 1) }),
      el("td", { class: "cfg", text: "#" + best.rank + " " + best.config_string }));
  });
  tbody.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 6, text: "no candidate matches the filters" }))]));
}

async function runSweep() {
  const doc = state.doc, c = doc && doc.candidates[state.selected];
  if (!c) return;
  const dim = $("#sweep-dim").value;
  const base = { model: doc.job.model, cluster: doc.job.cluster, gpus: doc.gpus, training: doc.job.training };
  const rows = [];
  const button = $("#sweep");
  button.disabled = true;
  for (const v of SWEEPS[dim]) {
    const cfg = Object.assign({}, c.config);
    if (dim === "tp" && "gx" in cfg) { delete cfg.gx; delete cfg.gy; }
    cfg[dim] = v;
    delete cfg.dp;  // derived from the GPU count, so the product stays right
    if (cfg.pp === 1) cfg.vpp = 1;  // interleaving needs a pipeline
    try {
      const p = await api("POST", "/v1/predict", Object.assign({}, base, { config: cfg }));
      rows.push({ v, p });
    } catch (e) {
      rows.push({ v, err: e.problem && e.problem.detail ? e.problem.detail : e.message });
    }
  }
  button.disabled = false;
  $("#sweep-table thead").replaceChildren(el("tr", {}, ...[dim, "time (s)", "memory (GiB)", "fits", "note"]
    .map((h) => el("th", { scope: "col", text: h }))));
  $("#sweep-table tbody").replaceChildren(...rows.map((r) => el("tr", {}, el("td", { text: String(r.v) }),
    el("td", { text: r.p ? fmt(r.p.iteration_time_s) : "–" }), el("td", { text: r.p ? fmt(r.p.memory_GiB.reserved, 1) : "–" }),
    el("td", { text: r.p ? (r.p.fits ? "yes" : "no") : "–" }),
    el("td", { class: "cfg", text: r.err ? r.err.replace(/^.*?: /, "") : (r.p.fits ? "" : r.p.reason_detail || "") }))));
  drawSweep(dim, rows.filter((r) => r.p));
}

function drawSweep(dim, rows) {
  state.sweep = { dim, rows };
  const box = $("#sweep-chart");
  box.replaceChildren();
  if (!rows.length) return;
  const W = boxWidth(box, 480), H = 200, L = 50, R = 50, T = 10, B = 34;
  const tmax = Math.max(...rows.map((r) => r.p.iteration_time_s)), mmax = Math.max(...rows.map((r) => r.p.memory_GiB.reserved));
  const yt = niceTicks(tmax), mt = niceTicks(mmax);
  const Y = yt[yt.length - 1] || 1, M = mt[mt.length - 1] || 1;
  const sx = (i) => L + (rows.length === 1 ? 0.5 : i / (rows.length - 1)) * (W - L - R);
  const sy = (t) => H - B - (t / Y) * (H - T - B), sm = (m) => H - B - (m / M) * (H - T - B);
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `time and memory as ${dim} changes` });
  for (const t of yt) s.append(svg("text", { x: L - 5, y: sy(t) + 4, "text-anchor": "end" }, fmt(t, t < 1 ? 2 : 1)));
  for (const m of mt) s.append(svg("text", { x: W - R + 5, y: sm(m) + 4 }, fmt(m, 0)));
  rows.forEach((r, i) => s.append(svg("text", { x: sx(i), y: H - B + 14, "text-anchor": "middle" }, String(r.v))));
  s.append(svg("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, `${dim} (left: s, right: GiB per GPU)`));
  s.append(svg("polyline", { fill: "none", stroke: "#4e79a7", "stroke-width": 2, points: rows.map((r, i) => `${sx(i)},${sy(r.p.iteration_time_s)}`).join(" ") }));
  s.append(svg("polyline", { fill: "none", stroke: "#e15759", "stroke-width": 2, "stroke-dasharray": "5 3", points: rows.map((r, i) => `${sx(i)},${sm(r.p.memory_GiB.reserved)}`).join(" ") }));
  rows.forEach((r, i) => {
    const a = svg("circle", { cx: sx(i), cy: sy(r.p.iteration_time_s), r: 3.5, fill: r.p.fits ? "#4e79a7" : "#fff", stroke: "#4e79a7" });
    a.append(svg("title", {}, `${dim}=${r.v}: ${fmt(r.p.iteration_time_s)} s${r.p.fits ? "" : " (does not fit)"}`));
    s.append(a);
  });
  box.append(s);
}

function toggleCompare(i, on) {
  state.compare = state.compare.filter((x) => x !== i);
  if (on) state.compare.push(i);
  while (state.compare.length > 2) {
    const drop = state.compare.shift();
    const box = document.querySelector(`#candidates tbody tr[data-index="${drop}"] input`);
    if (box) box.checked = false;
  }
  renderCompare();
}

function renderCompare() {
  const thead = $("#compare thead"), tbody = $("#compare tbody");
  if (state.compare.length !== 2) {
    thead.replaceChildren(); tbody.replaceChildren();
    $("#compare-note").hidden = false;
    return;
  }
  $("#compare-note").hidden = true;
  const [a, b] = state.compare.map((i) => state.doc.candidates[i]);
  thead.replaceChildren(el("tr", {}, el("th", { scope: "col", class: "cfg", text: "term" }),
    el("th", { scope: "col", class: "cfg", text: `#${a.rank} ${a.config_string}` }),
    el("th", { scope: "col", class: "cfg", text: `#${b.rank} ${b.config_string}` }), el("th", { scope: "col", text: "second − first" })));
  const row = (name, x, y, d) => el("tr", {}, el("td", { class: "cfg", text: name }), el("td", { text: fmt(x, d) }), el("td", { text: fmt(y, d) }),
    el("td", { class: Math.abs(y - x) > 1e-9 ? (y > x ? "bad" : "") : "", text: (y - x >= 0 ? "+" : "") + fmt(y - x, d) }));
  const rows = [row("iteration time (s)", a.prediction.iteration_time_s, b.prediction.iteration_time_s, 3)];
  for (const [k, label] of TERMS) {
    const x = a.prediction.breakdown_s[k] || 0, y = b.prediction.breakdown_s[k] || 0;
    if (x || y) rows.push(row(label + " (s)", x, y, 3));
  }
  for (const k of MEMORY) rows.push(row(`memory ${k} (GiB)`, a.prediction.memory_GiB[k], b.prediction.memory_GiB[k], 2));
  tbody.replaceChildren(...rows);
}

// ?select=RANK, ?compare=RANK,RANK and ?sweep=FIELD open a plan the way a
// shared link describes it.
async function applyLinkOptions() {
  const q = new URLSearchParams(location.search);
  const n = state.doc.candidates.length;
  const sel = parseInt(q.get("select") || "", 10);
  if (sel >= 1 && sel <= n) select(sel - 1);
  const cmp = (q.get("compare") || "").split(",").map((x) => parseInt(x, 10)).filter((x) => x >= 1 && x <= n);
  for (const r of cmp.slice(0, 2)) {
    const box = document.querySelector(`#candidates tbody tr[data-index="${r - 1}"] input`);
    if (box) { box.checked = true; toggleCompare(r - 1, true); }
  }
  const dim = q.get("sweep");
  if (dim && SWEEPS[dim]) {
    $("#sweep-dim").value = dim;
    await runSweep();
  }
}

// A new width redraws the charts for it (a phone turned, a window resized).
function redrawCharts() {
  const doc = state.doc;
  if (!doc) return;
  renderBreakdown(doc);
  renderPareto(doc);
  if (doc.candidates[state.selected]) renderTopology(doc, doc.candidates[state.selected]);
  if (state.sweep) drawSweep(state.sweep.dim, state.sweep.rows);
}
let drawnWidth = window.innerWidth, redrawTimer = 0;
window.addEventListener("resize", () => {
  if (window.innerWidth === drawnWidth) return;
  drawnWidth = window.innerWidth;
  clearTimeout(redrawTimer);
  redrawTimer = setTimeout(redrawCharts, 150);
});

// ---------- start ----------
async function init() {
  $("#plan-form").addEventListener("submit", onSubmit);
  $("#sweep").addEventListener("click", runSweep);
  $("#copy").addEventListener("click", () => navigator.clipboard && navigator.clipboard.writeText($("#emit-text").textContent));
  const q = new URLSearchParams(location.search);
  if (q.get("token")) $("#token").value = q.get("token");
  try {
    const presets = await api("GET", "/v1/presets");
    fillSelect($("#model"), presets.models, q.get("model") || "llama3-8b",
      (m) => `${m.name} (${m.params_B.toFixed(m.params_B < 10 ? 1 : 0)} B)`);
    // Networks that are not transformer stacks, in their own group (?network=NAME selects one).
    const group = el("optgroup", { label: "U-Nets, diffusion transformers, CNNs" },
      ...(presets.networks || []).map((n) => el("option", { value: NETWORK_PREFIX + n.name,
        text: `${n.name} (${n.family}, ${fmt(n.params_M, n.params_M < 100 ? 1 : 0)} M)` })));
    $("#model").appendChild(group);
    if (q.get("network")) $("#model").value = NETWORK_PREFIX + q.get("network");
    $("#model").addEventListener("change", onModelChange);
    onModelChange();
    fillSelect($("#cluster"), presets.clusters, q.get("cluster") || "dgx-h100", (c) => `${c.name} (${c.gpus_per_node}× ${c.gpu})`);
  } catch (e) {
    setStatus("cannot load presets: " + e.message, true);
    document.body.dataset.state = "error";
    return;
  }
  for (const k of ["gpus", "global_batch", "seq_len", "space", "objective", "top", "fix", "tokens", "gpu_hour_price"]) {
    if (q.get(k) != null) $("#" + k).value = q.get(k);
  }
  await setupEmit();
  document.body.dataset.state = "ready";
  // ?autorun=1 submits the form as a person pressing "Plan" would (used by the browser test and for links).
  if (q.get("autorun") === "1") $("#plan-form").requestSubmit();
}

init();

// The explorer page: asks the server for profiles (progress arrives as server-sent events) and
// draws the library's charts of them (the server sends each chart as Plotly JSON).
"use strict";

const TOKEN = new URLSearchParams(location.search).get("token");
const $ = (id) => document.getElementById(id);
let MODELS = [];
let RUNS = []; // [{label, id, profile, pane}]
let ABORT = null;
let GENERATION = 0; // which Run the page shows; an older one still finishing is ignored

function withToken(url) {
  if (!TOKEN) return url;
  return url + (url.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(TOKEN);
}

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (TOKEN) h["x-entropy-lens-token"] = TOKEN;
  return h;
}

async function getJson(url) {
  const r = await fetch(url, { headers: headers() });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || r.status + " " + r.statusText);
  return body;
}

function setStatus(text, isError) {
  const s = $("status");
  s.textContent = text;
  s.className = isError ? "error" : "";
}

function currentModel() {
  return MODELS.find((m) => m.name === $("model").value) || MODELS[0];
}

function buildModelControls() {
  const m = currentModel();
  const lens = $("lens");
  lens.replaceChildren(new Option("logit lens", "logit"));
  if (m && m.tuned_lens) lens.append(new Option("tuned lens", "tuned"));
  const box = $("skip-blocks");
  box.replaceChildren();
  for (let b = 1; m && b <= m.n_blocks; b++) {
    const label = document.createElement("label");
    const cb = document.createElement("input");
    cb.type = "checkbox";
    cb.name = "skip";
    cb.value = String(b);
    label.append(cb, " " + b);
    box.append(label);
  }
}

async function init() {
  let info;
  try {
    info = await getJson("/api/models");
  } catch (e) {
    setStatus(e.message, true);
    return;
  }
  MODELS = info.models;
  for (const m of MODELS) $("model").append(new Option(m.name + " (" + m.n_blocks + " blocks)", m.name));
  const metric = $("metric");
  metric.append(new Option("Shannon entropy", "shannon"));
  for (const a of info.alphas) metric.append(new Option("Rényi entropy α = " + a, "renyi:" + a));
  metric.append(new Option("top-p candidate count (p = " + info.top_p + ")", "top_p"));
  $("generate").max = String(info.limits.max_generate);
  $("model").addEventListener("change", buildModelControls);
  $("metric").addEventListener("change", () => {
    RUNS.filter((r) => r.id).forEach(drawHeatmap);
    updateReportLink();
  });
  $("run").addEventListener("click", run);
  buildModelControls();
  document.body.dataset.ready = "1";
}

// Reads a server-sent-event stream from a POST; calls onEvent(name, data) per event.
async function postEvents(body, onEvent, signal) {
  const r = await fetch("/api/profile", {
    method: "POST",
    headers: headers({ "content-type": "application/json" }),
    body: JSON.stringify(body),
    signal,
  });
  if (!r.ok) {
    const e = await r.json().catch(() => ({}));
    throw new Error(e.error || r.status + " " + r.statusText);
  }
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message";
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data) onEvent(name, JSON.parse(data));
    }
  }
}

function makePane(label) {
  const pane = document.createElement("section");
  pane.className = "pane";
  pane.dataset.state = "waiting";
  const h = document.createElement("h2");
  h.textContent = label;
  const out = document.createElement("div");
  out.className = "output";
  out.textContent = "waiting…";
  const heat = document.createElement("div");
  heat.className = "heatmap";
  const detail = document.createElement("div");
  detail.className = "detail";
  pane.append(h, out, heat, detail);
  $("panes").append(pane);
  return { pane, out, heat, detail };
}

function showOutput(run) {
  const p = run.profile;
  run.pane.out.replaceChildren();
  const prompt = document.createElement("span");
  prompt.textContent = p.prompt;
  const gen = document.createElement("span");
  gen.className = "gen";
  gen.textContent = p.generated_text;
  run.pane.out.append(prompt, gen);
}

async function drawHeatmap(run) {
  const metric = encodeURIComponent($("metric").value);
  try {
    const fig = await getJson("/api/result/" + run.id + "/chart?kind=heatmap&metric=" + metric);
    await Plotly.react(run.pane.heat, fig.data, fig.layout, { responsive: true, displaylogo: false });
    if (!run.pane.heat.dataset.clickable) {
      run.pane.heat.dataset.clickable = "1";
      run.pane.heat.on("plotly_click", (ev) => {
        const pt = ev.points && ev.points[0];
        if (pt) showDetail(run, Array.isArray(pt.pointNumber) ? pt.pointNumber[1] : pt.pointIndex);
      });
    }
    run.pane.pane.dataset.state = "done";
  } catch (e) {
    run.pane.out.append(errorLine(e.message));
  }
}

function errorLine(text) {
  const d = document.createElement("div");
  d.className = "error";
  d.textContent = text;
  return d;
}

async function showDetail(run, position) {
  run.pane.detail.replaceChildren();
  for (const kind of ["delta", "target"]) {
    const div = document.createElement("div");
    div.className = kind;
    run.pane.detail.append(div);
    try {
      const fig = await getJson("/api/result/" + run.id + "/chart?kind=" + kind + "&position=" + position);
      await Plotly.newPlot(div, fig.data, fig.layout, { responsive: true, displaylogo: false });
    } catch (e) {
      div.replaceWith(errorLine(e.message));
    }
  }
  run.pane.pane.dataset.detail = String(position);
  run.position = position;
  updateReportLink();
}

// The report: every run of the view, each at the position last clicked (its last one otherwise).
function updateReportLink() {
  const ok = RUNS.filter((r) => r.id);
  const ids = ok.map((r) => r.id).join(",");
  const positions = ok.map((r) => (r.position === undefined ? "" : String(r.position))).join(",");
  $("download-report").href = withToken(
    "/api/report?ids=" + ids + "&positions=" + positions + "&metric=" + encodeURIComponent($("metric").value)
  );
}

async function run() {
  // Running again cancels what is still running (the server stops those requests).
  if (ABORT) ABORT.abort();
  const generation = ++GENERATION;
  ABORT = new AbortController();
  const signal = ABORT.signal;
  $("panes").replaceChildren();
  $("downloads").hidden = true;
  RUNS = [];
  const base = {
    model: $("model").value,
    chat: $("chat").checked,
    generate: Number($("generate").value),
    temperature: Number($("temperature").value),
    seed: Number($("seed").value),
    lens: $("lens").value,
  };
  const skip = [...document.querySelectorAll("input[name=skip]:checked")].map((c) => Number(c.value));
  const prompts = [["A", $("prompt-a").value]];
  if ($("prompt-b").value.trim()) prompts.push(["B", $("prompt-b").value]);
  const jobs = [];
  for (const [name, prompt] of prompts) {
    jobs.push({ label: name, body: Object.assign({ prompt, skip: [] }, base) });
    if (skip.length) {
      jobs.push({ label: name + " without blocks " + skip.join(", "), body: Object.assign({ prompt, skip }, base) });
    }
  }
  const total = jobs.reduce((n, j) => n + Math.max(j.body.generate, 1), 0);
  const done = new Array(jobs.length).fill(0);
  const bar = $("progress");
  bar.hidden = false;
  bar.max = total;
  bar.value = 0;
  setStatus("queued…");
  const results = jobs.map((job, k) => {
    const pane = makePane(job.label);
    const entry = { label: job.label, pane, id: null, profile: null };
    RUNS.push(entry);
    return postEvents(job.body, (name, data) => {
      if (name === "queued") pane.out.textContent = data.ahead ? "queued behind " + data.ahead + " request(s)…" : "starting…";
      else if (name === "started") pane.out.textContent = "running (batch of " + data.batch + ")…";
      else if (name === "token") {
        done[k] = data.done;
        bar.value = done.reduce((a, b) => a + b, 0);
        pane.out.textContent = "generating: " + data.done + " / " + data.total + " tokens";
      } else if (name === "result") {
        entry.id = data.id;
        entry.profile = data.profile;
        showOutput(entry);
      } else if (name === "error") throw new Error(data.error);
    }, signal).then(() => {
      if (!entry.id) throw new Error("the server closed the stream early");
      return drawHeatmap(entry);
    }).catch((e) => {
      if (e.name !== "AbortError") {
        pane.out.replaceChildren(errorLine(e.message));
        pane.pane.dataset.state = "error";
      }
    });
  });
  await Promise.all(results);
  if (generation !== GENERATION) return;
  bar.hidden = true;
  const ok = RUNS.filter((r) => r.id);
  if (ok.length) {
    setStatus(compareText(ok));
    updateReportLink();
    const json = $("download-json");
    json.replaceChildren("JSON (profile --json): ");
    for (const [k, r] of ok.entries()) {
      const a = document.createElement("a");
      a.href = withToken("/api/result/" + r.id + "/profile");
      a.download = "profile-" + (k + 1) + ".json";
      a.textContent = r.label;
      if (json.childElementCount) json.append(" · ");
      json.append(a);
    }
    $("downloads").hidden = false;
  } else {
    setStatus("nothing could be run", true);
  }
}

// Says whether skipping blocks changed the outputs.
function compareText(runs) {
  const parts = [];
  for (const r of runs) {
    const twin = runs.find((o) => o !== r && o.label.startsWith(r.label + " without"));
    if (twin) {
      const same = twin.profile.generated_text === r.profile.generated_text;
      parts.push(r.label + ": output " + (same ? "unchanged" : "changed") + " without the skipped blocks");
    }
  }
  return parts.length ? parts.join("; ") : "done";
}

window.addEventListener("pagehide", () => { if (ABORT) ABORT.abort(); });
init();

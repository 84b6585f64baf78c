// The booth page: reeld's state pushed by reel-web over EventSource (/api/events, never polled),
// hold-to-record on the Record button or the space bar (pointerdown/keydown start or resume,
// release pauses), Pause/Resume, Retake (undo) and Stop as POSTs to /api/*, the take list, the
// length cap's progress, the audio level per channel, free space and the finished recordings.
// window.reel.trace keeps the page's own timestamps of its inputs and requests (performance.now
// and Date.now) for the browser tests and the measurements in docs/PERFORMANCE.md.
"use strict";

const $ = (id) => document.getElementById(id);
const el = {
  preview: $("preview"), live: $("live"), state: $("state"), error: $("error"), free: $("free"),
  progress: $("progress"), clock: $("clock"), record: $("record"), pause: $("pause"), undo: $("undo"),
  stop: $("stop"), label: $("label"), cap: $("cap"), takes: $("takes"), takesNone: $("takes-none"),
  meters: $("meters"), metersNone: $("meters-none"), player: $("player"), playerName: $("player-name"),
  recordings: $("recordings"), recordingsNone: $("recordings-none"),
};

const reel = { trace: [], firstStatusAt: null, statuses: 0 };
window.reel = reel;
function trace(kind, extra) {
  reel.trace.push(Object.assign({ kind, t: performance.now(), wall: Date.now() }, extra));
  if (reel.trace.length > 1000) reel.trace.splice(0, reel.trace.length - 1000);
}

let status = null;      // reeld's last status object
let statusAt = 0;       // performance.now() when it came
let down = null;        // why reeld cannot be seen (null: it can)
let actionError = null; // the last refused or failed request, in words
let pending = 0;        // requests queued or in flight
let predicted = null;   // the state those requests lead to (status lags behind them)

// ---------------------------------------------------------------- formatting

function fmtNs(ns) {
  const tenths = Math.floor(Math.max(0, ns) / 1e8);
  const m = Math.floor(tenths / 600), s = Math.floor(tenths / 10) % 60, d = tenths % 10;
  return `${m}:${String(s).padStart(2, "0")}.${d}`;
}

function fmtBytes(n) {
  if (n == null) return "unknown";
  const units = ["bytes", "kB", "MB", "GB", "TB"];
  let i = 0, v = n;
  while (v >= 1000 && i < units.length - 1) { v /= 1000; i++; }
  return i === 0 ? `${n} bytes` : `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

const commandWords = { start: "Record", resume: "Resume", pause: "Pause", undo: "Retake", stop: "Stop" };

// ---------------------------------------------------------------- requests

// One request at a time, in the order the user asked: a release that comes before the start's
// reply still pauses after it. `when` (run just before sending) can drop a request whose reason
// went away (the pause of a hold whose start was refused).
let queue = Promise.resolve();
function post(cmd, body, when) {
  pending++;
  const job = async () => {
    try {
      if (when && !when()) return null;
      return await send(cmd, body);
    } finally {
      if (--pending === 0) predicted = null;
      render();
    }
  };
  queue = queue.then(job, job);
  return queue;
}

async function send(cmd, body) {
  const t0 = performance.now();
  trace("send", { cmd });
  let reply;
  try {
    const res = await fetch(`/api/${cmd}`, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify(body || {}),
    });
    if (res.status === 401 || (res.redirected && new URL(res.url).pathname === "/signin")) {
      location.assign("/signin");
      return null;
    }
    const text = await res.text();
    try { reply = JSON.parse(text); } catch {
      reply = { ok: false, error: { code: "failed", message: `reel-web answered ${res.status} ${res.statusText}: ${text.slice(0, 200)}` } };
    }
  } catch (err) {
    reply = { ok: false, error: { code: "failed", message: `cannot reach reel-web (${err.message}); check that it runs` } };
  }
  trace("reply", { cmd, ok: !!reply.ok, rtt: performance.now() - t0 });
  if (reply.ok) {
    actionError = null;
    if (cmd === "stop") loadRecordings();
  } else {
    const e = reply.error || {};
    actionError = `${commandWords[cmd] || cmd} failed: ${e.message || "no reason given"}`;
  }
  return reply;
}

function effectiveState() {
  if (predicted) return predicted;
  return status ? status.state : null;
}

function startBody() {
  const body = {};
  const label = el.label.value.trim();
  if (label) body.label = label;
  const cap = el.cap.value.trim();
  if (cap !== "" && Number.isFinite(Number(cap)) && Number(cap) >= 0) body.maxDurationNs = Math.round(Number(cap) * 1000) * 1e6;
  return body;
}

function labelBody() {
  const label = el.label.value.trim();
  return label ? { label } : {};
}

// A take begins: start when idle, resume when paused. Returns the request's promise.
function begin() {
  const s = effectiveState();
  let p = null;
  if (s === "idle") p = post("start", startBody());
  else if (s === "paused") p = post("resume", labelBody());
  else return null;
  predicted = "recording";
  p.then((r) => { if (r && r.ok) el.label.value = ""; });
  return p;
}

function pause() {
  if (effectiveState() !== "recording") return null;
  predicted = "paused";
  return post("pause");
}

// ---------------------------------------------------------------- hold to record

let held = null;    // {how: "pointer" | "key", begun: promise of the start/resume reply}

function holdStart(how) {
  if (held || down || !status) return;
  const s = effectiveState();
  if (s !== "idle" && s !== "paused") return;   // recording hands-free (or stopping): a press changes nothing
  held = { how, begun: begin() };
  el.record.classList.add("held");
  el.record.setAttribute("aria-pressed", "true");
  trace("hold-start", { how });
  render();
}

function holdEnd(how) {
  if (!held || held.how !== how) return;
  const begun = held.begun;
  let ok = false;
  if (begun) begun.then((r) => { ok = !!(r && r.ok); });
  held = null;
  el.record.classList.remove("held");
  el.record.removeAttribute("aria-pressed");
  trace("hold-end", { how });
  predicted = "paused";
  post("pause", {}, () => ok === true);
}

el.record.addEventListener("pointerdown", (e) => {
  if (e.pointerType === "mouse" && e.button !== 0) return;
  e.preventDefault();       // no text selection, no emulated mouse events, no long-press menu
  el.record.focus({ preventScroll: true });
  trace("pointerdown", { pointerType: e.pointerType });
  holdStart("pointer");
});
for (const type of ["pointerup", "pointercancel", "pointerleave"]) {
  el.record.addEventListener(type, () => {
    if (held && held.how === "pointer") trace(type);
    holdEnd("pointer");
  });
}
el.record.addEventListener("contextmenu", (e) => e.preventDefault());
// Enter on a focused Record (a click with detail 0) records hands-free, or pauses.
el.record.addEventListener("click", (e) => {
  if (e.detail !== 0 || held) return;
  trace("record-key");
  if (effectiveState() === "recording") pause(); else begin();
});

function typingIn(target) {
  if (!(target instanceof Element)) return false;
  if (target.isContentEditable || target.tagName === "TEXTAREA" || target.tagName === "VIDEO" || target.tagName === "SELECT") return true;
  return target.tagName === "INPUT" && !["button", "submit", "checkbox", "radio", "range"].includes(target.type);
}
const isSpace = (e) => e.code === "Space" || e.key === " ";
// Space held anywhere but in a text field records (key repeat ignored). Its default is
// prevented, so it never also clicks the focused button.
document.addEventListener("keydown", (e) => {
  if (!isSpace(e) || typingIn(e.target) || e.ctrlKey || e.altKey || e.metaKey) return;
  e.preventDefault();
  if (e.repeat) return;
  trace("keydown");
  holdStart("key");
});
document.addEventListener("keyup", (e) => {
  if (!isSpace(e) || typingIn(e.target)) return;
  e.preventDefault();
  trace("keyup");
  holdEnd("key");
});
window.addEventListener("blur", () => { holdEnd("key"); holdEnd("pointer"); });

el.pause.addEventListener("click", () => {
  if (held) return;
  trace("click", { button: el.pause.textContent });
  if (effectiveState() === "paused") begin(); else pause();
});
el.undo.addEventListener("click", () => {
  if (held) return;
  trace("click", { button: "Retake" });
  predicted = "paused";
  post("undo");
});
el.stop.addEventListener("click", () => {
  if (held) return;
  trace("click", { button: "Stop" });
  predicted = "idle";
  post("stop");
});

// ---------------------------------------------------------------- rendering

function liveWords() {
  if (down) return ["down", "reeld down"];
  if (!status) return ["connecting", "Connecting…"];
  switch (status.state) {
    case "recording": return ["recording", "Recording"];
    case "paused": return ["paused", "Paused"];
    case "stopping": return ["stopping", "Finishing the file…"];
    default:
      if (status.standby === "warm") return ["standby", "Standby"];
      if (status.standby === "opening") return ["standby", "Standby (opening the camera)"];
      if (status.standby === "failed") return ["idle", "Idle (standby failed)"];
      return ["idle", "Idle"];
  }
}

function stateSentence() {
  if (down) return `reeld down: ${down}`;
  if (!status) return "Connecting to reel-web…";
  const takes = status.takes || [];
  const n = takes.length;
  switch (status.state) {
    case "recording": return `Recording take ${Math.max(n, 1)}.`;
    case "paused": return n ? `Paused after ${n} take${n === 1 ? "" : "s"}. Hold Record to add one, Retake to remove the last, Stop to finish.` : "Paused, no take kept. Hold Record to record.";
    case "stopping": return "Finishing the file…";
    default:
      if (status.standby !== "warm") return "Idle: ready to record.";
      // With a pre-roll (reeld's pre_roll setting) status says what a start now would get.
      return status.preRollNs != null
        ? "Standby: ready to record at once; a recording keeps the seconds before you press Record (pre-roll)."
        : "Standby: ready to record at once.";
  }
}

function setText(node, text) { if (node.textContent !== text) node.textContent = text; }

function render() {
  const [live, words] = liveWords();
  setText(el.live, words);
  if (el.live.dataset.state !== live) el.live.dataset.state = live;
  setText(el.state, stateSentence());
  if (el.state.dataset.state !== live) el.state.dataset.state = live;

  const errors = [];
  if (actionError) errors.push(actionError);
  if (status && status.lastError && !down) errors.push(`reeld reports: ${status.lastError}`);
  const errorText = errors.join("\n");
  if (el.error.textContent !== errorText) {
    el.error.textContent = errorText;
    el.error.hidden = !errorText;
  }

  const s = effectiveState();
  const usable = !!status && !down;
  el.record.disabled = !usable || s === "stopping";
  setText(el.pause, s === "paused" ? "Resume" : "Pause");
  el.pause.disabled = !usable || !!held || (s !== "recording" && s !== "paused");
  el.undo.disabled = !usable || !!held || !(s === "recording" || (s === "paused" && status.takes && status.takes.length > 0));
  el.stop.disabled = !usable || !!held || (s !== "recording" && s !== "paused");

  if (status) setText(el.free, `Free space: ${fmtBytes(status.freeBytes)}`);
  renderTakes();
  renderClock();
}

let takesKey = "";
function renderTakes() {
  const takes = (status && status.takes) || [];
  const key = JSON.stringify(takes.map((t) => [t.number, t.title, t.durationNs]));
  if (key === takesKey) return;
  takesKey = key;
  const items = takes.map((t) => {
    const li = document.createElement("li");
    li.dataset.take = t.number;
    const num = document.createElement("span"); num.className = "num"; num.textContent = `${t.number}.`;
    const title = document.createElement("span"); title.className = "title"; title.textContent = t.title;
    const dur = document.createElement("span"); dur.className = "dur";
    dur.textContent = t.durationNs == null ? "recording" : fmtNs(t.durationNs);
    if (t.durationNs != null) dur.dataset.ns = t.durationNs;
    li.append(num, title, dur);
    return li;
  });
  el.takes.replaceChildren(...items);
  el.takesNone.hidden = takes.length > 0;
}

// The recorded time goes on between status events while recording (a status comes with every
// reeld event, not every frame): it is reckoned from the last status and the page's clock.
function recordedNow() {
  if (!status) return 0;
  let ns = status.recordedNs || 0;
  if (status.state === "recording" && !down) ns += Math.round((performance.now() - statusAt) * 1e6);
  if (status.remainingNs != null) ns = Math.min(ns, status.recordedNs + status.remainingNs);
  return ns;
}

let progressKey = "";
function renderClock() {
  if (!status) return;
  const recorded = recordedNow();
  const cap = status.remainingNs != null ? status.recordedNs + status.remainingNs : null;
  if (cap == null || cap <= 0) {
    el.progress.hidden = true;
    setText(el.clock, `${fmtNs(recorded)} recorded`);
    return;
  }
  el.progress.hidden = false;
  setText(el.clock, `${fmtNs(cap - recorded)} left of ${fmtNs(cap)} (${fmtNs(recorded)} recorded)`);
  // One segment per take, as wide as its share of the cap; the open take grows with the clock.
  const takes = status.takes || [];
  const closed = takes.filter((t) => t.durationNs != null).reduce((a, t) => a + t.durationNs, 0);
  const widths = takes.map((t) => t.durationNs != null ? t.durationNs : Math.max(0, recorded - closed));
  const key = widths.map((w) => (100 * w / cap).toFixed(1)).join(",");
  if (key === progressKey) return;
  progressKey = key;
  const spans = takes.map((t, i) => {
    const span = document.createElement("span");
    span.style.width = `${(100 * widths[i] / cap).toFixed(2)}%`;
    span.title = `${t.title}: ${fmtNs(widths[i])}`;
    if (t.durationNs == null) span.className = "open";
    return span;
  });
  el.progress.replaceChildren(...spans);
}
setInterval(() => { if (status && status.state === "recording") renderClock(); }, 100);

// ---------------------------------------------------------------- levels

let meters = [];
function onLevels(lv) {
  const peaks = lv.peakDbfs || [];
  if (meters.length !== peaks.length) {
    meters = peaks.map((_, i) => {
      const label = document.createElement("label");
      const name = document.createElement("span");
      name.textContent = peaks.length === 1 ? "Level" : `Channel ${i + 1}`;
      const meter = document.createElement("meter");
      meter.min = -60; meter.max = 0; meter.low = -18; meter.high = -6; meter.optimum = -24;
      meter.value = -60;
      const out = document.createElement("output");
      label.append(name, meter, out);
      return { label, meter, out };
    });
    el.meters.replaceChildren(...meters.map((m) => m.label));
  }
  peaks.forEach((db, i) => {
    const m = meters[i];
    m.meter.value = Math.max(-60, Math.min(0, db));
    m.meter.dataset.dbfs = db;
    setText(m.out, db <= -120 ? "silent" : `${db.toFixed(1)} dB`);
  });
}

function clearLevels() {
  meters = [];
  el.meters.replaceChildren(el.metersNone);
}

// ---------------------------------------------------------------- recordings

let recordingsKey = "";
async function loadRecordings() {
  let list;
  try {
    const res = await fetch("/api/recordings", { credentials: "same-origin" });
    if (!res.ok) return;
    list = await res.json();
  } catch { return; }
  const key = JSON.stringify(list);
  if (key === recordingsKey) return;
  recordingsKey = key;
  el.recordings.replaceChildren(...list.map((r) => {
    const url = `/recordings/${encodeURIComponent(r.name)}`;
    const li = document.createElement("li");
    const name = document.createElement("span"); name.className = "name"; name.textContent = r.name;
    const meta = document.createElement("span"); meta.className = "meta";
    const parts = [];
    if (r.durationNs != null) parts.push(fmtNs(r.durationNs));
    parts.push(fmtBytes(r.bytes));
    if (r.modifiedNs != null) parts.push(new Date(r.modifiedNs / 1e6).toLocaleString());
    meta.textContent = parts.join(" · ");
    const play = document.createElement("button");
    play.type = "button"; play.textContent = "Play"; play.setAttribute("aria-label", `Play ${r.name}`);
    play.addEventListener("click", () => { show(r.name, url); el.player.play().catch(() => {}); });
    const dl = document.createElement("a");
    dl.href = url; dl.download = r.name; dl.textContent = "Download";
    dl.setAttribute("aria-label", `Download ${r.name}`);
    li.append(name, meta, play, dl);
    return li;
  }));
  el.recordingsNone.hidden = list.length > 0;
  if (list.length && el.player.paused) show(list[0].name, `/recordings/${encodeURIComponent(list[0].name)}`);
}

function show(name, url) {
  if (el.player.getAttribute("src") !== url) el.player.src = url;
  el.player.hidden = false;
  el.playerName.hidden = false;
  setText(el.playerName, `Showing ${name}`);
}

// ---------------------------------------------------------------- preview

// The page reads /preview.mjpg itself (fetch, each part by its Content-Length) and shows each JPEG
// as soon as its last byte came. Given the stream as its src, Chromium shows a part only once the
// NEXT part's headers have arrived: one frame interval late (100 ms at 10 fps; docs/PERFORMANCE.md).
// reel.preview says what is shown: its X-Captured-Ns and when (performance.now).
const PREVIEW_URL = "/preview.mjpg?width=640&fps=10";
reel.preview = { frames: 0, capturedNs: null, shownAt: null, dropped: 0 };
let previewAbort = null, previewRetry = null, previewGen = 0;
let shownURL = null, decoding = false, waiting = null;

function showFrame(jpeg, capturedNs) {
  if (decoding) {            // the previous frame is still decoding: the newest waits, older ones go
    if (waiting) reel.preview.dropped++;
    waiting = [jpeg, capturedNs];
    return;
  }
  decoding = true;
  const url = URL.createObjectURL(new Blob([jpeg], { type: "image/jpeg" }));
  const img = el.preview;
  const done = () => {
    img.removeEventListener("load", done);
    img.removeEventListener("error", done);
    if (shownURL) URL.revokeObjectURL(shownURL);
    shownURL = url;
    reel.preview.frames++;
    reel.preview.capturedNs = capturedNs;
    reel.preview.shownAt = performance.now();
    decoding = false;
    if (waiting) { const [j, c] = waiting; waiting = null; showFrame(j, c); }
  };
  img.addEventListener("load", done);
  img.addEventListener("error", done);
  img.src = url;
}

const BOUNDARY = new TextEncoder().encode("--reelframe");
function indexOf(buf, pat, from) {
  outer: for (let i = from; i <= buf.length - pat.length; i++) {
    for (let j = 0; j < pat.length; j++) if (buf[i + j] !== pat[j]) continue outer;
    return i;
  }
  return -1;
}
const CRLF2 = new Uint8Array([13, 10, 13, 10]);

async function streamPreview(gen) {
  previewAbort = new AbortController();
  const res = await fetch(PREVIEW_URL, { credentials: "same-origin", cache: "no-store", signal: previewAbort.signal });
  if (!res.ok || !res.body) throw new Error(`preview answered ${res.status}`);
  const reader = res.body.getReader();
  const text = new TextDecoder();
  let buf = new Uint8Array(0);
  for (;;) {
    const { value, done } = await reader.read();
    if (done || gen !== previewGen) return;
    const joined = new Uint8Array(buf.length + value.length);
    joined.set(buf); joined.set(value, buf.length);
    buf = joined;
    for (;;) {                               // every complete part in the buffer
      const start = indexOf(buf, BOUNDARY, 0);
      if (start < 0) break;
      const headEnd = indexOf(buf, CRLF2, start);
      if (headEnd < 0) break;
      const headers = text.decode(buf.subarray(start, headEnd));
      const length = Number((/content-length:\s*(\d+)/i.exec(headers) || [])[1]);
      if (!Number.isFinite(length)) { buf = buf.subarray(headEnd + 4); continue; }
      const body = headEnd + 4;
      if (buf.length < body + length) break;
      const captured = (/x-captured-ns:\s*(\d+)/i.exec(headers) || [])[1];
      showFrame(buf.slice(body, body + length), captured ? Number(captured) : null);
      buf = buf.subarray(body + length);
    }
  }
}

function reloadPreview() {
  clearTimeout(previewRetry);
  previewRetry = null;
  if (previewAbort) previewAbort.abort();
  const gen = ++previewGen;
  if (!window.ReadableStream || !("body" in Response.prototype)) {   // no streaming fetch: the browser's own
    el.preview.src = `${PREVIEW_URL}&t=${Date.now()}`;
    return;
  }
  streamPreview(gen).catch(() => {}).finally(() => {
    if (gen === previewGen && !previewRetry) previewRetry = setTimeout(reloadPreview, 2000);
  });
}

// ---------------------------------------------------------------- events

function applyStatus(st) {
  const wasDown = down;
  status = st;
  statusAt = performance.now();
  down = null;
  reel.statuses++;
  render();
  if (reel.firstStatusAt == null) {
    reel.firstStatusAt = performance.now();
    performance.mark("reel-first-status");
  }
  if (wasDown) reloadPreview();
}

function setDown(message) {
  if (down === message) return;
  down = message;
  if (held) { held = null; el.record.classList.remove("held"); el.record.removeAttribute("aria-pressed"); }
  clearLevels();
  render();
}

let source = null, backoff = 1000;
function connect() {
  source = new EventSource("/api/events");
  source.addEventListener("open", () => { backoff = 1000; trace("events-open"); });
  source.addEventListener("status", (e) => applyStatus(JSON.parse(e.data)));
  source.addEventListener("levels", (e) => onLevels(JSON.parse(e.data)));
  source.addEventListener("down", (e) => {
    let msg = "reel-web cannot reach reeld";
    try { msg = JSON.parse(e.data).message || msg; } catch { /* keep the default */ }
    setDown(msg);
  });
  source.addEventListener("reel", (e) => {
    const ev = JSON.parse(e.data);
    if (ev.event === "finished" || (ev.event === "state" && ev.state === "idle")) loadRecordings();
  });
  source.addEventListener("error", () => {
    setDown("lost the connection to reel-web; reconnecting");
    if (source.readyState === EventSource.CLOSED) {   // the browser gave up: an HTTP error
      source.close();
      setTimeout(recheck, backoff);
      backoff = Math.min(backoff * 2, 10000);
    }
  });
}

// After the event stream was refused: signed out (the session expired) goes to the sign-in page,
// anything else tries again.
async function recheck() {
  try {
    const res = await fetch("/api/status", { credentials: "same-origin" });
    if (res.status === 401 || (res.redirected && new URL(res.url).pathname === "/signin")) {
      location.assign("/signin");
      return;
    }
  } catch { /* reel-web unreachable: try again */ }
  connect();
}

connect();
loadRecordings();
render();
reloadPreview();

"""A browser plays the file (issue 12, "independent readers agree"): Debian's headless Chromium
loads a finished recording with pauses into a `<video>` element over HTTP (from a tiny server that
answers Range requests as any web server does; a finished file keeps its moov at the end), plays
it, reports its duration, and lands a seek to the middle on the right frame.

The page's own event handlers decide when it is done (loadedmetadata, timeupdate past 1 s, pause,
seeked, the seeked frame drawn to a canvas); it hands its results to this test through a
DevTools binding (`Runtime.addBinding`) over `--remote-debugging-pipe`, so nothing here sleeps
or polls the page. The timecode strip of the seeked frame is read back from the canvas pixels
and compared with the frame FFmpeg shows at that output time: after the resumes, output time and
source time differ, so a reader that mishandled them would land elsewhere.

Audio: Chromium has no `audioTracks`; `webkitAudioDecodedByteCount` (bytes of AAC packets its
decoder consumed) after a second of playback must cover at least the file's AAC packets up to
0.1 s before the playback position (FFprobe's packet sizes), which include the beep at 1 s. The
audio renderer is the playback clock (a null sink when there is no sound device), so the clock
cannot pass audio that was not decoded.

Chromium's `<video src>` path demuxes and decodes with its own bundled copy of FFmpeg (not
Debian's libavformat/libavcodec), so this is an independent *player* (its own duration, seeking,
clock and rendering) more than an independent parser; GStreamer's qtdemux
(test_plays_elsewhere.py) is the independent parser."""

import http.server
import json
import os
import select
import shutil
import subprocess
import threading
import time

import numpy as np
import pytest

import reel_verify as rv

W, H, FPS = 640, 360, 30
FRAME = 1 / FPS
CHROMIUM = shutil.which("chromium")   # make deps installs Debian's chromium package
TIMEOUT = 90                          # Chromium start-up on two loaded cores takes 10-20 s

PAGE = """<!doctype html>
<html><body>
<video id="v" src="/rec.mp4" preload="auto" playsinline></video>
<canvas id="c"></canvas>
<script>
const v = document.getElementById("v"), c = document.getElementById("c");
const r = {events: []};
let finished = false;
function finish(extra) {
  if (finished) return;
  finished = true;
  Object.assign(r, extra || {});
  reelDone(JSON.stringify(r));   // Runtime.addBinding: the test receives this as Runtime.bindingCalled
}
for (const e of ["loadedmetadata", "loadeddata", "canplay", "playing", "pause", "seeking", "seeked", "ended", "error"])
  v.addEventListener(e, () => r.events.push([e, v.currentTime]));
v.addEventListener("error", () => finish({error: v.error ? v.error.code + " " + v.error.message : "error"}));
v.addEventListener("loadedmetadata", () => {
  r.duration = v.duration;
  r.videoWidth = v.videoWidth;
  r.videoHeight = v.videoHeight;
  v.play().catch(e => finish({error: "play(): " + e}));
});
v.addEventListener("timeupdate", function played() {
  if (v.paused || v.currentTime < 1.0) return;     // a second of playback
  v.removeEventListener("timeupdate", played);
  const q = v.getVideoPlaybackQuality();
  r.played = {currentTime: v.currentTime, audioBytes: v.webkitAudioDecodedByteCount,
              videoBytes: v.webkitVideoDecodedByteCount, frames: q.totalVideoFrames,
              dropped: q.droppedVideoFrames};
  v.addEventListener("pause", () => {
    r.target = v.duration / 2;
    v.addEventListener("seeked", () => {
      const w = v.videoWidth, h = v.videoHeight;
      c.width = w; c.height = h;
      const g = c.getContext("2d", {willReadFrequently: true});
      g.drawImage(v, 0, 0, w, h);
      const px = g.getImageData(0, 0, w, h).data;
      const luma = (x, y) => { const i = 4 * (y * w + x); return 0.299 * px[i] + 0.587 * px[i + 1] + 0.114 * px[i + 2]; };
      // the timecode strip: the mean luma of a block in the middle of each of the 32 cells
      const sh = Math.floor(h / 8), cw = w / 32, cells = [];
      for (let i = 0; i < 32; i++) {
        const cx = Math.floor((i + 0.5) * cw);
        let s = 0, n = 0;
        for (let y = Math.floor(sh / 2) - 2; y <= Math.floor(sh / 2) + 2; y++)
          for (let x = cx - 2; x <= cx + 2; x++) { s += luma(x, y); n++; }
        cells.push(s / n);
      }
      // below the strip: mean and spread of luma, and how far from grey the colours are
      let s = 0, s2 = 0, chroma = 0, n = 0;
      for (let y = sh + 2; y < h; y += 4)
        for (let x = 0; x < w; x += 4) {
          const i = 4 * (y * w + x), l = luma(x, y);
          s += l; s2 += l * l; n++;
          chroma += Math.max(px[i], px[i + 1], px[i + 2]) - Math.min(px[i], px[i + 1], px[i + 2]);
        }
      finish({seeked: {currentTime: v.currentTime, cells: cells, mean: s / n,
                       std: Math.sqrt(Math.max(0, s2 / n - (s / n) ** 2)), chroma: chroma / n}});
    }, {once: true});
    v.currentTime = r.target;
  }, {once: true});
  v.pause();
});
</script>
</body></html>
"""


def record(bindir, out):
    """5 s of source time with a 0.5 s pause every 1.5 s: 3.5 s of output in 3 segments, and the
    middle (1.75 s) lies after the first resume (source time 2.25 s)."""
    p = subprocess.run([os.path.join(bindir, "reeld"), "record", "--video", "test", "--audio", "test", "--unpaced",
                        "--size", f"{W}x{H}", "--fps", str(FPS), "--output", out,
                        "--duration", "5", "--pause-every", "1.5", "--pause-for", "0.5"],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, REEL_CONFIG="/dev/null"))
    assert p.returncode == 0, p.stderr


class Server:
    """A tiny HTTP/1.1 server on 127.0.0.1 serving the page and the file, with byte ranges
    (Chromium fetches the moov at the end of the file, and seeks, with Range requests)."""

    def __init__(self, files):
        self.ranges = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_HEAD(self):
                self.do_GET(body=False)

            def do_GET(self, body=True):
                if self.path not in files:
                    self.send_error(404)
                    return
                data, ctype = files[self.path]
                start, end, status = 0, len(data) - 1, 200
                rng = self.headers.get("Range")
                if rng and rng.startswith("bytes="):
                    a, _, b = rng[6:].split(",")[0].strip().partition("-")
                    if a:
                        start, end = int(a), min(int(b), end) if b else end
                    else:
                        start = max(0, len(data) - int(b))
                    if start > end:
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    status = 206
                    outer.ranges.append((self.path, start, end))
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(end - start + 1))
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
                self.end_headers()
                if body:
                    try:
                        self.wfile.write(data[start:end + 1])
                    except (BrokenPipeError, ConnectionResetError):
                        pass    # Chromium drops connections it no longer needs

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class Chromium:
    """Headless Chromium driven over --remote-debugging-pipe (fd 3: commands in, fd 4: replies and
    events out, each a JSON message ended by NUL)."""

    def __init__(self, profile):
        cmd_r, self.cmd_w = os.pipe()
        self.ev_r, ev_w = os.pipe()
        argv = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
                "--autoplay-policy=no-user-gesture-required", "--remote-debugging-pipe",
                f"--user-data-dir={profile}", "--no-first-run", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "about:blank"]
        # the pipe ends onto fds 3 and 4 of the browser (bash: dash takes no fd numbers above 9)
        sh = f'exec "$@" 3<&{cmd_r} 4>&{ev_w} {cmd_r}<&- {ev_w}>&-'
        self.stderr = open(os.path.join(profile, "..", "chromium.log"), "w+")
        self.proc = subprocess.Popen(["/bin/bash", "-c", sh, "bash", *argv], pass_fds=(cmd_r, ev_w),
                                     stdin=subprocess.DEVNULL, stdout=self.stderr, stderr=self.stderr)
        os.close(cmd_r)
        os.close(ev_w)
        self.buf, self.next_id, self.events = b"", 0, []

    def send(self, method, session=None, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def wait(self, pred, deadline):
        """The first message (reply or event) for which pred is true; others are kept in events."""
        while True:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                m = json.loads(raw)
                if pred(m):
                    return m
                self.events.append(m)
            left = deadline - time.monotonic()
            assert left > 0, f"Chromium did not answer in time; last messages {self.events[-5:]}\n{self.log()}"
            ready, _, _ = select.select([self.ev_r], [], [], left)
            if ready:
                chunk = os.read(self.ev_r, 1 << 16)
                assert chunk, f"Chromium closed its DevTools pipe (exit {self.proc.poll()})\n{self.log()}"
                self.buf += chunk

    def call(self, method, deadline, session=None, **params):
        i = self.send(method, session, **params)
        m = self.wait(lambda m: m.get("id") == i, deadline)
        assert "error" not in m, (method, m)
        return m["result"]

    def log(self):
        self.stderr.seek(0)
        return "".join(self.stderr.read().splitlines(True)[-30:])

    def close(self):
        try:
            self.send("Browser.close")
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        os.close(self.cmd_w)
        os.close(self.ev_r)
        self.stderr.close()


def play_in_chromium(url, tmp):
    """Opens url in a fresh headless Chromium; returns what the page handed to reelDone."""
    deadline = time.monotonic() + TIMEOUT
    os.makedirs(tmp / "profile")
    b = Chromium(str(tmp / "profile"))
    try:
        target = b.call("Target.createTarget", deadline, url="about:blank")["targetId"]
        session = b.call("Target.attachToTarget", deadline, targetId=target, flatten=True)["sessionId"]
        b.call("Runtime.enable", deadline, session)
        b.call("Runtime.addBinding", deadline, session, name="reelDone")
        b.call("Page.navigate", deadline, session, url=url)
        m = b.wait(lambda m: m.get("method") in ("Runtime.bindingCalled", "Runtime.exceptionThrown")
                   and m.get("sessionId") == session, deadline)
        assert m["method"] == "Runtime.bindingCalled", m["params"]
        return json.loads(m["params"]["payload"])
    finally:
        b.close()


def audio_packet_bytes(path, before):
    """Bytes of the audio packets whose pts is before `before` seconds, and of all of them."""
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "a", "-show_entries", "packet=pts_time,size",
                          "-of", "csv=p=0", path], capture_output=True, text=True, timeout=30, check=True).stdout
    pk = [(float(t), int(n)) for t, n in (line.split(",")[:2] for line in out.split())]
    return sum(n for t, n in pk if t < before), sum(n for _, n in pk)


def ffprobe_durations(path):
    out = json.loads(subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration:stream=codec_type,duration",
                                     "-of", "json", path], capture_output=True, text=True, timeout=30, check=True).stdout)
    return float(out["format"]["duration"]), {s["codec_type"]: float(s["duration"]) for s in out["streams"]}


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make deps installs Debian's chromium package)")
def test_chromium_plays_seeks_and_times_a_finished_recording(reel_bin_dir, tmp_path, note):
    path = str(tmp_path / "rec.mp4")
    record(reel_bin_dir, path)
    rep = rv.analyze(path)
    assert len(rep["segments"]) >= 2 and not rv.defects(rep), rv.defects(rep)
    fmt_dur, stream_dur = ffprobe_durations(path)

    with open(path, "rb") as f:
        data = f.read()
    srv = Server({"/": (PAGE.encode(), "text/html; charset=utf-8"), "/rec.mp4": (data, "video/mp4")})
    t0 = time.monotonic()
    try:
        r = play_in_chromium(srv.url + "/", tmp_path)
    finally:
        srv.close()
    took = time.monotonic() - t0
    print("chromium:", json.dumps(r))
    print("range requests:", srv.ranges)

    assert "error" not in r, r
    assert (r["videoWidth"], r["videoHeight"]) == (W, H), r
    # plays: the clock advanced a second while playing, frames and audio were decoded
    p = r["played"]
    assert p["currentTime"] >= 1.0 and p["frames"] > 0 and p["videoBytes"] > 0, p
    need, total = audio_packet_bytes(path, p["currentTime"] - 0.1)
    assert need <= p["audioBytes"] <= total, (f"Chromium decoded {p['audioBytes']} bytes of AAC by "
                                              f"{p['currentTime']:.3f} s; the file has {need} before it, {total} in all")
    # duration: as ffprobe reports it, within one frame
    assert abs(r["duration"] - fmt_dur) <= FRAME, (r["duration"], fmt_dur, stream_dur)
    assert abs(r["duration"] - stream_dur["video"]) <= FRAME, (r["duration"], stream_dur)
    # the seek to the middle lands within one frame
    s = r["seeked"]
    assert abs(s["currentTime"] - r["target"]) <= FRAME, (s["currentTime"], r["target"])
    # the seeked frame is a picture, not blank or black
    assert s["std"] > 5 and s["mean"] > 20, s
    # its timecode is the one FFmpeg shows at that output time, within one frame
    ms = sum(1 << (31 - i) for i, c in enumerate(s["cells"]) if c > rv.STRIP_THRESHOLD)
    frames = rep["video"]["frames"]
    shown = max(i for i, f in enumerate(frames) if f["t"] <= s["currentTime"] + 1e-6)
    near = [f["ms"] for f in frames[max(0, shown - 1):shown + 2]]
    assert ms in near, (f"Chromium shows source time {ms} ms at output {s['currentTime']:.3f} s; "
                        f"FFmpeg shows {frames[shown]['ms']} ms there (cells {[round(c) for c in s['cells']]})")
    note(f"Chromium duration {r['duration']:.6f} s (ffprobe format {fmt_dur:.6f}, video {stream_dur['video']:.6f}, "
         f"audio {stream_dur['audio']:.6f}); seek to {r['target']:.4f} landed at {s['currentTime']:.4f} on source "
         f"{ms} ms (FFmpeg: {frames[shown]['ms']} ms); {p['audioBytes']} bytes of AAC decoded by "
         f"{p['currentTime']:.2f} s (file: {need} before {p['currentTime'] - 0.1:.2f} s, {total} in all); "
         f"{len(srv.ranges)} range requests; browser {took:.1f} s")

"""reel-web's preview and levels fan-out (issue 24) against a fake reeld that speaks the
contract (web_fake_reeld.py): one reeld preview subscription per (width, fps) shared by its
viewers and dropped when the last leaves; a slow viewer loses frames without delaying the
others; one levels subscription for every event-stream client; reel-web's memory idle and with
a viewer."""

import json
import os
import re
import socket
import tempfile
import threading
import time

import pytest

from web_fake_reeld import FakeReeld
from web_harness import EventReader, Web


@pytest.fixture
def fake_web(reel_bin_dir):
    if not os.access(os.path.join(reel_bin_dir, "reel-web"), os.X_OK):
        pytest.skip(f"REEL_BIN_DIR={reel_bin_dir} lacks reel-web")
    d = tempfile.mkdtemp(prefix="reel-web-", dir="/tmp")
    os.mkdir(os.path.join(d, "out"))
    made = []

    def start(**kw):
        fake = FakeReeld(os.path.join(d, "ctl.sock"), **kw)
        w = Web(reel_bin_dir, fake.path, os.path.join(d, "out"), d)
        made.append((fake, w))
        assert w.sign_in()[0] == 303
        return fake, w

    yield start
    for fake, w in made:
        w.stop()
        print(w.log_text())
        fake.close()


class Viewer:
    """Reads /preview.mjpg's parts on a thread (or not at all while `paused`)."""

    def __init__(self, web, query="width=320&fps=10", read=True):
        self.conn, self.resp = web.open_stream(f"/preview.mjpg?{query}")
        assert self.resp.status == 200, self.resp.status
        assert self.resp.headers["Content-Type"] == "multipart/x-mixed-replace; boundary=reelframe"
        self.parts = []  # (seq, headers)
        self.reading = threading.Event()
        if read:
            self.reading.set()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            while True:
                self.reading.wait()
                line = self.resp.fp.readline()
                if not line:
                    return
                if line.strip() != b"--reelframe":
                    continue
                headers = {}
                while (h := self.resp.fp.readline().strip()):
                    k, v = h.decode().split(":", 1)
                    headers[k.strip()] = v.strip()
                body = self.resp.fp.read(int(headers["Content-Length"]))
                self.resp.fp.read(2)
                seq = int(re.match(rb"\xff\xd8frame (\d+) ", body).group(1))
                self.parts.append((seq, headers))
        except (OSError, ValueError, AttributeError):
            return

    def wait_parts(self, n, timeout=10):
        deadline = time.monotonic() + timeout
        while len(self.parts) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(self.parts) >= n, f"{len(self.parts)} parts, wanted {n}"

    def close(self):
        self.conn.sock.shutdown(socket.SHUT_RDWR)
        self.conn.close()


def wait_for(pred, what, timeout=10):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"not {what} within {timeout} s"
        time.sleep(0.05)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(l for l in f if l.startswith("VmRSS:")).split()[1])


def test_one_preview_subscription_per_size_shared_by_its_viewers(fake_web, note):
    fake, w = fake_web()
    note(f"reel-web RSS idle, signed in: {rss_kib(w.proc.pid)} KiB")
    a = Viewer(w)
    b = Viewer(w)
    a.wait_parts(5)
    b.wait_parts(5)
    assert fake.preview_subscriptions() == [(320, 10)]
    seq, headers = a.parts[-1]
    assert headers["Content-Type"] == "image/jpeg" and int(headers["X-Captured-Ns"]) == seq * 1000, headers
    note(f"reel-web RSS with two viewers of one feed: {rss_kib(w.proc.pid)} KiB")
    c = Viewer(w, "width=640&fps=5")
    c.wait_parts(2)
    assert sorted(fake.preview_subscriptions()) == [(320, 10), (640, 5)]
    a.close()
    b.wait_parts(len(b.parts) + 3)  # the other viewer of the feed goes on
    assert sorted(fake.preview_subscriptions()) == [(320, 10), (640, 5)]
    b.close()
    wait_for(lambda: fake.preview_subscriptions() == [(640, 5)], "the 320x10 subscription dropped after its last viewer left")
    c.close()
    wait_for(lambda: fake.preview_subscriptions() == [], "no preview subscription left")
    assert [s for s in fake.subscriptions if s[0] == "preview"] == [("preview", (320, 10)), ("preview", (640, 5))]
    status, _, _ = w.get("/preview.mjpg?width=8&fps=10")
    assert status == 400


def test_one_viewer_with_rss(fake_web, note):
    fake, w = fake_web(frame_bytes=30_000)
    idle = rss_kib(w.proc.pid)
    v = Viewer(w, "width=640&fps=10")
    v.wait_parts(50, timeout=15)
    one = rss_kib(w.proc.pid)
    note(f"reel-web RSS idle {idle} KiB, with one 640 px 10 fps viewer (30 kB frames, after 5 s) {one} KiB")
    v.close()
    assert one < 200 * 1024, one


@pytest.mark.serial  # counts frames against the wall clock
def test_a_slow_viewer_loses_frames_and_never_delays_the_others(fake_web, note):
    fake, w = fake_web(frame_bytes=200_000)
    fast = Viewer(w, "width=320&fps=15")
    slow = Viewer(w, "width=320&fps=15", read=False)  # a browser that stopped reading
    fast.wait_parts(3)
    start_seq = fast.parts[-1][0]
    time.sleep(6)  # 90 frames of 200 kB: far more than the slow viewer's socket buffers hold
    end_seq = fast.parts[-1][0]
    got = [s for s, _ in fast.parts if start_seq < s <= end_seq]
    assert len(got) >= 0.9 * (end_seq - start_seq), (len(got), start_seq, end_seq)
    assert end_seq - start_seq >= 75, f"the feed slowed down: {end_seq - start_seq} frames in 6 s"
    assert fake.blocked_sends <= 3, f"reel-web held reeld up {fake.blocked_sends} times"
    slow.reading.set()
    slow.wait_parts(len(slow.parts) + 5)
    seqs = [s for s, _ in slow.parts]
    gaps = sum(1 for x, y in zip(seqs, seqs[1:]) if y - x > 1)
    note(f"slow viewer: {len(seqs)} parts, {gaps} gaps; fast viewer: {len(got)} of {end_seq - start_seq} frames")
    assert gaps >= 1, seqs
    fast.close()
    slow.close()


def test_levels_reach_every_event_stream_through_one_subscription(fake_web):
    fake, w = fake_web()
    a, b = EventReader(w), EventReader(w)
    try:
        for ev in (a, b):
            ev.wait(lambda es: sum(1 for n, _ in es if n == "levels") >= 5, "levels")
            assert ev.events[0][0] == "status" and json.loads(ev.events[0][1])["video"] == "fake", ev.events[0]
        data = json.loads(next(d for n, d in a.events if n == "levels"))
        assert data == {"peakDbfs": [-6.0, -7.1], "rmsDbfs": [-12.3, -120.0], "capturedNs": data["capturedNs"]}, data
        assert fake.levels_subscriptions() == 1
    finally:
        a.close()
        b.close()
    wait_for(lambda: fake.levels_subscriptions() == 0, "the levels subscription dropped after the last client left")

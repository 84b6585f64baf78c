"""The disk really fills during a recording (issue 6): a small tmpfs, min_free_mb = 0 so the
free-space guard cannot act first, and a filler file leaving 600 kB for a high-bitrate recording
of the synthetic sources. The write that fails with ENOSPC must end the recording cleanly: the
file cut back to its last complete fragment, renamed to NAME.mp4 and decoding clean; status,
the `error` event and the log say the disk is full and what was kept; reeld keeps answering;
and once the filler is deleted, a new recording works and verifies.

Every wait is for an event (the `reelctl events` stream, notify datagrams), with a timeout."""

import json
import os
import re
import subprocess
import tempfile
import threading
import time

import pytest

import reel_verify as rv
from test_finish import assert_finished
from reel_harness import recording_for  # scripts/, on sys.path through conftest.py

WAIT = 30.0
LEFT_FREE = 600_000  # bytes left beside the filler: ~5 s at the ~120 kB/s below


class Events:
    """`reelctl events`, its JSON lines collected by a thread as they arrive."""

    def __init__(self, r):
        self.argv = [os.path.join(r.bindir, "reelctl"), "--socket", r.socket, "events"]
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines = []
        self.eof = False
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.proc.stdout:
            with self.cond:
                self.lines.append(json.loads(raw))
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def wait(self, pred, what, after=0, timeout=WAIT):
        """The first event at index `after` or later for which pred holds."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                got = next((e for e in self.lines[after:] if pred(e)), None)
                if got:
                    return got
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    raise AssertionError(f"no {what} within {timeout} s (eof={self.eof}): {self.lines!r}")
                self.cond.wait(left)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def small_tmpfs():
    mnt = tempfile.mkdtemp(prefix="reel-full-", dir="/tmp")
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", mnt], capture_output=True, text=True)
    if m.returncode != 0:
        os.rmdir(mnt)
        pytest.skip(f"cannot mount a small tmpfs to fill ({m.stderr.strip()}); needs root")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", mnt])
        os.rmdir(mnt)


def ffprobe_duration(path, stream):
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", stream, "-show_entries", "stream=duration",
                          "-of", "csv=p=0", path], capture_output=True, text=True, timeout=30).stdout.strip()
    return float(out)


def test_disk_full_ends_the_recording_cleanly_and_reeld_recovers(reeld, small_tmpfs, note):
    mnt = small_tmpfs
    # on_finish records each file it is handed and how it was finished (outside the full disk).
    hooks = tempfile.mkdtemp(prefix="reel-fullhook-", dir="/tmp")
    hook, ran = os.path.join(hooks, "hook.sh"), os.path.join(hooks, "ran")
    with open(hook, "w") as f:
        f.write(f'#!/bin/sh\nprintf "%s %s %s\\n" "$1" "$REEL_FINISHED_BY" "$REEL_RECOVERED" >> {ran}\n')
    os.chmod(hook, 0o755)
    r = reeld("diskfull", **{"output-dir": mnt, "min-free-mb": "0", "bitrate": "20000", "on-finish": hook})
    ev = Events(r)
    try:
        ev.wait(lambda e: e.get("subscribed"), "subscription confirmation")
        st = os.statvfs(mnt)
        filler = os.path.join(mnt, "filler")
        with open(filler, "wb") as f:
            f.write(b"\xa5" * (st.f_bavail * st.f_frsize - LEFT_FREE))
        final = os.path.join(mnt, "full.mp4")
        t0 = time.monotonic()
        r.ctl("start", "--name", "full")

        err = ev.wait(lambda e: e.get("event") == "error", "error event")
        fin = ev.wait(lambda e: e.get("event") == "finished", "finished event")
        ev.wait(lambda e: e.get("event") == "state" and e.get("state") == "idle", "state idle")
        took = time.monotonic() - t0
        msg = err["message"]
        assert msg.startswith(f"no space left on device writing {final}.part: the disk is full; kept the first "), msg
        assert msg.endswith(f" as {final} (free space in {mnt}, or lower the bitrate)"), msg
        assert fin["file"] == final, fin
        kept = float(re.search(r"kept the first (\d+\.\d) s", msg).group(1))

        # The file: renamed, no .part left, decodes clean, holds what the message says.
        assert os.path.isfile(final) and not os.path.exists(final + ".part"), os.listdir(mnt)
        dec = subprocess.run(["ffmpeg", "-v", "error", "-xerror", "-i", final, "-f", "null", "-"],
                             capture_output=True, text=True, timeout=60)
        assert dec.returncode == 0 and not dec.stderr.strip(), dec.stderr
        # Cutting the incomplete fragment off freed room for the index: a standard MP4 like any
        # stopped recording (ftyp, mdat, moov; no mvex), with its chapter.
        assert_finished(final)
        video_s = ffprobe_duration(final, "v:0")
        assert kept >= 1.0, f"only {kept} s kept before the disk filled ({took:.1f} s after start)"
        assert abs(video_s - kept) <= 0.15, f"video lasts {video_s} s, the message says {kept} s"
        # Its content is right to its last frame: flashes and beeps in sync, no jump, the timecode
        # intact. Only the tracks' ends differ (the last complete fragment holds audio x264's delay
        # past the video).
        rep = rv.analyze(final)
        bad = rv.defects_cut_short(rep)
        assert bad == [], f"{bad}\n{rv.format_report(rep)}\n{r.log_tail()}"
        assert len(rep["sync"]["pairs"]) >= int(kept) - 1, rep["sync"]

        # reeld answers; status and the log say the disk is full and name the file kept.
        s = r.status()
        assert s["state"] == "idle", s
        assert s["lastFile"] == final, s
        assert s["lastError"] == msg, s
        log = open(r.log_path, errors="replace").read()
        assert f"recording cut short: {msg}" in log, r.log_tail()
        assert "frames left in the queue" not in log, r.log_tail()
        note(f"disk full after {took:.1f} s; kept {kept} s ({os.path.getsize(final)} bytes), video {video_s:.3f} s, "
             f"max A/V offset {rep['sync']['max_abs_offset_ms']} ms")

        # With no byte free, a new recording cannot write its first fragment: it ends at once,
        # said the same way, and leaves no file behind.
        with open(filler, "ab") as f:
            try:
                while True:
                    f.write(b"\xa5" * 65536)
                    f.flush()
            except OSError:
                pass
        assert os.statvfs(mnt).f_bavail == 0
        mark = len(ev.lines)
        r.ctl("start", "--name", "none")
        err2 = ev.wait(lambda e: e.get("event") == "error", "second error event", after=mark)
        ev.wait(lambda e: e.get("event") == "state" and e.get("state") == "idle", "state idle", after=mark)
        part2 = os.path.join(mnt, "none.mp4.part")
        assert err2["message"] == (f"no space left on device writing {part2}: the disk is full; nothing could be kept "
                                   f"(no fragment was complete), so {part2} was removed (free space in {mnt}, or lower the bitrate)"), err2
        assert sorted(os.listdir(mnt)) == ["filler", "full.mp4"], os.listdir(mnt)
        s = r.status()
        assert s["state"] == "idle" and s["lastError"] == err2["message"] and s["lastFile"] == final, s

        # Free the space: a new recording works and verifies clean.
        os.unlink(filler)
        mark = len(r.notifications)
        r.ctl("start", "--name", "after")
        # 2 s or more recorded (a late tick may skip a second's line).
        assert r.wait_notify_after(mark, recording_for(2), WAIT), \
            r.notifications[mark:]
        dropped = r.status()["droppedFrames"]
        after = r.ctl("stop").out.strip()
        assert after == os.path.join(mnt, "after.mp4")
        rep2 = rv.analyze(after)
        assert rv.defects(rep2) == [], f"{rv.defects(rep2)} ({dropped} frames dropped)\n{r.log_tail()}"
        assert r.status()["lastError"] is None
        # Each file was handed on once, saying how it was finished (reeld waits for its hooks on SIGTERM).
        assert r.terminate() == 0, r.log_tail()
        assert open(ran).read().splitlines() == [f"{final} write-failed 0", f"{after} stop 0"], r.log_tail()
    finally:
        ev.close()
        r.terminate()


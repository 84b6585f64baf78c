"""End-to-end tests of the live view (issue 4): `reelctl status --watch` and `reelctl events`
against the real reeld recording its synthetic sources (a 0.5-amplitude 1 kHz beep at each
second, see test-sources.md).

Every wait is for output lines, with a timeout; nothing sleeps to synchronise. The watch
interval (0.2 s) is the feature under test, not synchronisation."""

import os
import re
import signal
import subprocess
import threading
import time

WAIT = 20.0


class Lines:
    """A running reelctl whose stdout lines are collected by a thread as they arrive."""

    def __init__(self, r, *args):
        self.argv = [os.path.join(r.bindir, "reelctl"), "--socket", r.socket, *args]
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.lines = []
        self.eof = False
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for raw in self.proc.stdout:
            with self.cond:
                self.lines.append(raw.decode().rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def wait(self, pred, timeout=WAIT, what="a line"):
        """Waits until pred(lines) returns something truthy; returns it."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                got = pred(self.lines)
                if got:
                    return got
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    raise AssertionError(f"{' '.join(self.argv)}: no {what} within {timeout} s "
                                         f"(eof={self.eof}); got {self.lines!r}; stderr so far: {self.stderr_if_done()}")
                self.cond.wait(left)

    def stderr_if_done(self):
        return self.proc.stderr.read().decode() if self.proc.poll() is not None else "(running)"

    def finish(self, sig=None, timeout=WAIT):
        if sig is not None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=timeout)
        self.thread.join(timeout)
        return rc, self.proc.stderr.read().decode()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def blocks(lines):
    """The complete blocks of a non-TTY `status --watch`: dicts of label -> value. A block is
    complete once the blank line after it (or a later line) has arrived."""
    out, cur = [], {}
    for line in lines:
        if line == "":
            out.append(cur)
            cur = {}
        else:
            label, _, value = line.partition(":")
            cur[label.strip()] = value.strip()
    return out


def peak_dbfs(block):
    m = re.match(r"ch1 (-?\d+\.\d) dBFS", block.get("audio peak", ""))
    return float(m.group(1)) if m else None


def test_status_watch_redraws_with_frames_peak_and_free_space(reeld):
    r = reeld("watch")
    r.ctl("start", "--name", "watch")
    w = Lines(r, "status", "--watch", "--interval", "0.2")
    try:
        def ready(lines):
            bs = blocks(lines)
            rec = [b for b in bs if b.get("state") == "recording"]
            if len(rec) < 3:
                return None
            if not any((peak_dbfs(b) or -200) > -7 for b in rec):
                return None  # the beep has not been within the last second of a block yet
            return rec
        rec = w.wait(ready, what="3 recording blocks, one with the beep's peak above -7 dBFS")
        frames = [int(b["frames"]) for b in rec]
        assert frames == sorted(frames) and frames[-1] > frames[0], f"frames do not increase: {frames}"
        assert len(set(frames)) >= 3, f"fewer than 3 distinct frame counts: {frames}"
        peaks = [peak_dbfs(b) for b in rec]
        assert max(p for p in peaks if p is not None) <= 0.0, peaks
        for b in rec:
            assert re.fullmatch(r"\d+\.\d MB", b["free"]), b
            assert b["file"].endswith("/watch.mp4.part"), b
            assert b["segments"] == "1", b
            for key in ("elapsed", "fps", "dropped frames", "bitrate", "written"):
                assert key in b, (key, b)
        # fps is measured between redraws: near 30 once a second has passed.
        fps = [float(b["fps"]) for b in rec if b["fps"] != "-"]
        assert fps, rec
        rc, err = w.finish(signal.SIGINT)
        assert rc == 0, f"status --watch after SIGINT: rc={rc} stderr={err!r}"
    finally:
        w.kill()
    r.ctl("stop")


def test_status_watch_exits_2_when_reeld_goes_away(reeld):
    r = reeld("watch-gone")
    w = Lines(r, "status", "--watch", "--interval", "0.2")
    try:
        w.wait(lambda lines: len(blocks(lines)) >= 1, what="a first block")
        r.terminate()
        rc, err = w.finish()
        assert rc == 2, f"rc={rc} stderr={err!r}"
        assert err.startswith("reelctl: lost reeld:"), err
    finally:
        w.kill()


def test_events_stream_start_pause_resume_stop_in_order(reeld):
    import json
    r = reeld("events")
    ev = Lines(r, "events")
    try:
        first = ev.wait(lambda lines: lines[:1], what="the subscription confirmation")[0]
        assert json.loads(first) == {"v": 1, "id": 1, "ok": True, "subscribed": True}, first

        def events():
            return [json.loads(l) for l in ev.lines[1:]]

        def wait_event(pred, what):
            return ev.wait(lambda _: next((e for e in events() if pred(e)), None), what=what)

        part = os.path.join(r.out_dir, "ev.mp4.part")
        final = os.path.join(r.out_dir, "ev.mp4")
        r.ctl("start", "--name", "ev")
        wait_event(lambda e: e["event"] == "state" and e["state"] == "recording", "state recording")
        r.ctl("pause")
        wait_event(lambda e: e["event"] == "state" and e["state"] == "paused", "state paused")
        r.ctl("resume")
        wait_event(lambda e: e["event"] == "segment", "segment")
        stop = r.ctl("stop")
        assert stop.out.strip() == final
        wait_event(lambda e: e["event"] == "state" and e["state"] == "idle", "state idle")

        # take_kept (one per take, as each closes) interleaves with these; checked on its own
        kept = [e for e in events() if e["event"] == "take_kept"]
        assert [(e["take"], e["title"], e["file"]) for e in kept] == [(1, "Take 1", part), (2, "Take 2", part)], kept
        got = [e for e in events() if e["event"] != "take_kept"]
        kinds = [(e["event"], e.get("state")) for e in got]
        assert kinds == [("state", "recording"), ("state", "paused"), ("segment", None), ("state", "recording"),
                         ("state", "stopping"), ("finished", None), ("state", "idle")], kinds
        assert [e["file"] for e in got[:5]] == [part] * 5, got
        assert got[2]["segment"] == 1, got[2]
        assert got[5]["file"] == final, got[5]
        assert os.path.isfile(final)
        ats = [e["at"] for e in got]
        assert all(isinstance(a, int) for a in ats) and ats == sorted(ats), ats
        assert all(e["v"] == 1 for e in got)

        rc, err = ev.finish(signal.SIGINT)
        assert rc == 0, f"events after SIGINT: rc={rc} stderr={err!r}"
    finally:
        ev.kill()


def test_events_ends_with_exit_2_when_reeld_stops(reeld):
    r = reeld("events-gone")
    ev = Lines(r, "events")
    try:
        ev.wait(lambda lines: lines[:1], what="the subscription confirmation")
        r.terminate()
        rc, err = ev.finish()
        assert rc == 2, f"rc={rc} stderr={err!r}"
        assert "reeld closed the event stream" in err, err
    finally:
        ev.kill()


def test_events_report_errors(reeld):
    import json
    r = reeld("events-error", **{"min-free-mb": "9999999"})
    ev = Lines(r, "events")
    try:
        ev.wait(lambda lines: lines[:1], what="the subscription confirmation")
        c = r.ctl("start", expect_ok=False)
        assert c.rc == 1, c
        line = ev.wait(lambda lines: next((l for l in lines[1:] if json.loads(l)["event"] == "error"), None),
                       what="an error event")
        e = json.loads(line)
        assert "below min_free_mb 9999999" in e["message"], e
        assert isinstance(e["at"], int)
        # The watch screen shows the same error as the status's lastError.
        w = Lines(r, "status", "--watch", "--interval", "0.2")
        try:
            b = w.wait(lambda lines: blocks(lines)[:1], what="a block")[0]
            assert "below min_free_mb 9999999" in b.get("last error", ""), b
            assert b["state"] == "idle" and b["audio peak"] == "-", b
        finally:
            w.kill()
    finally:
        ev.kill()

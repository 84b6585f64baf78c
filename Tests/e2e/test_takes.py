"""Labels, the takes list and the length cap (issue 13, items 2 and 3). Take labels given to
`start --label` and `resume --label` become the chapter titles of the finished file; `status`,
`takes` and the event stream list the takes; `--max-duration` (or max_duration) stops a recording
by itself exactly at the cap: checked on the decoded file (packets and samples ffprobe and
reel_verify count), never on reeld's own counters. Sleeps only shape the schedule."""

import json
import os
import socket
import subprocess
import time
from fractions import Fraction

import reel_verify as rv
from test_liveview import Lines
from test_chapters import chapters

RATE = 48000
AAC_FRAME = 1024


def packets(path, stream):
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", stream, "-count_packets", "-count_frames",
                          "-show_entries", "stream=nb_read_packets,nb_read_frames", "-of", "json", path],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    s = json.loads(out)["streams"][0]
    return int(s["nb_read_packets"]), int(s["nb_read_frames"])


def events_of(ev, kind):
    out = []
    for line in ev.lines[1:]:
        e = json.loads(line)
        if e.get("event") == kind:
            out.append(e)
    return out


def wait_event(ev, kind, timeout=20):
    return ev.wait(lambda _: events_of(ev, kind), timeout=timeout, what=f"a {kind} event")


def raw(r, request):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(r.socket)
        s.sendall((json.dumps(request) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)


def test_labels_become_chapter_titles_and_takes_lists_them(reeld):
    r = reeld("labels", size="320x180", fps="15")
    ev = Lines(r, "events")
    ev.wait(lambda ls: ls, what="the subscribed reply")
    t0 = r.ctl("start", "--name", "lab", "--label", "intro").mid
    plan = [(1.2, ("pause",)), (1.8, ("resume", "--label", "second take")), (3.0, ("pause",)), (3.5, ("resume",))]
    for at, args in plan:
        time.sleep(max(0.0, t0 + at - time.monotonic()))
        r.ctl(*args)
    time.sleep(max(0.0, t0 + 4.6 - time.monotonic()))
    st = r.status()
    assert [(t["number"], t["label"], t["title"]) for t in st["takes"]] == \
        [(1, "intro", "intro"), (2, "second take", "second take"), (3, None, "Take 3")], st
    assert st["takes"][0]["startNs"] == 0 and st["takes"][2]["durationNs"] is None, st
    assert st["remainingNs"] is None, st
    table = r.ctl("takes").out
    print(table)
    assert table.splitlines()[0].split() == ["#", "title", "start", "duration"], table
    assert "second take" in table and "Take 3" in table, table
    listed = json.loads(r.ctl("takes", "--json").out)["takes"]
    assert [t["title"] for t in listed] == ["intro", "second take", "Take 3"], listed
    stop = r.ctl("stop", "--json")
    final = os.path.join(r.out_dir, "lab.mp4")
    assert os.path.isfile(final), os.listdir(r.out_dir)
    ch = chapters(final)
    print("ffprobe -show_chapters:", json.dumps(ch))
    assert [c["tags"]["title"] for c in ch] == ["intro", "second take", "Take 3"], ch
    # the chapters start where the takes do (as status listed them at the stop; ns are rounded)
    done = json.loads(stop.out)["takes"]
    assert all(t["durationNs"] is not None for t in done), done
    for c, t in zip(ch, done):
        assert abs(Fraction(c["start"]) * Fraction(c["time_base"]) - Fraction(t["startNs"], 10**9)) <= Fraction(1, 10**9), (c, t)
    ev.wait(lambda _: len(events_of(ev, "take_kept")) == 3, what="three take_kept events")
    kept = events_of(ev, "take_kept")
    assert [(e["take"], e["title"]) for e in kept] == [(1, "intro"), (2, "second take"), (3, "Take 3")], kept
    assert [e["durationNs"] for e in kept] == [t["durationNs"] for t in done], (kept, done)
    ev.kill()


def test_bad_labels_are_refused_naming_the_field(reeld):
    r = reeld("bad-labels")
    c = r.ctl("start", "--label", "", expect_ok=False)
    assert c.rc == 2 and "--label" in c.err and "empty" in c.err, c
    c = r.ctl("start", "--label", "x" * 256, expect_ok=False)
    assert c.rc == 2 and "--label" in c.err and "255" in c.err, c
    c = r.ctl("start", "--max-duration", "1.2345", expect_ok=False)
    assert c.rc == 2 and "--max-duration" in c.err and "3 decimals" in c.err, c
    rep = raw(r, {"v": 1, "id": 3, "cmd": "start", "label": "a\u0007b"})
    assert not rep["ok"] and rep["error"]["code"] == "bad_request" and '"label"' in rep["error"]["message"] \
        and "control characters" in rep["error"]["message"], rep
    rep = raw(r, {"v": 1, "id": 4, "cmd": "start", "label": 5})
    assert rep["error"]["code"] == "bad_request" and '"label"' in rep["error"]["message"], rep
    rep = raw(r, {"v": 1, "id": 5, "cmd": "start", "maxDurationNs": -1})
    assert rep["error"]["code"] == "bad_request" and "maxDurationNs" in rep["error"]["message"], rep
    assert r.status()["state"] == "idle"
    assert raw(r, {"v": 1, "id": 6, "cmd": "takes"}) == {"v": 1, "id": 6, "ok": True, "takes": []}


def check_capped(r, ev, final, cap_s, fps, takes):
    """The file holds exactly cap_s of video (cap_s * fps packets and decoded frames) and the
    audio within one AAC frame of it, in `takes` chapters; the recording ended by itself."""
    ev.wait(lambda _: events_of(ev, "finished"), timeout=30, what="the finished event")
    cap = events_of(ev, "cap_reached")
    assert len(cap) == 1 and cap[0]["maxDurationNs"] == int(cap_s * 10**9), cap
    st = r.status()
    assert st["state"] == "idle" and st["lastFile"] == final and st["lastError"] is None, st
    assert os.path.isfile(final) and not os.path.exists(final + ".part"), os.listdir(r.out_dir)
    want = Fraction(cap_s) * fps
    assert want.denominator == 1
    assert packets(final, "v:0") == (want, want), packets(final, "v:0")
    rep = rv.analyze(final)
    assert rv.defects(rep) == [], rv.format_report(rep)
    v, a = rep["video"], rep["audio"]
    tb = Fraction(rep["streams"]["video"]["time_base"])
    assert len(v["frames"]) == want, len(v["frames"])
    end = (v["last_pts"] + Fraction(v["frame_ticks"]).limit_denominator(1001)) * tb
    assert end == Fraction(cap_s), (end, cap_s)
    assert abs(a["samples"] - cap_s * RATE) < AAC_FRAME, (a["samples"], cap_s * RATE)
    ch = chapters(final)
    print("ffprobe -show_chapters:", json.dumps(ch))
    assert len(ch) == takes, ch
    assert Fraction(ch[-1]["end"]) * Fraction(ch[-1]["time_base"]) == Fraction(cap_s), ch
    kept = events_of(ev, "take_kept")
    cap_ns = int(cap_s * 10**9)
    # the last take ends exactly at the cap; each take's start and length are rounded to the ns
    # on their own (a take's start may be 1 ns past the previous one's rounded end)
    assert len(kept) == takes and kept[-1]["startNs"] + kept[-1]["durationNs"] == cap_ns, kept
    assert abs(sum(e["durationNs"] for e in kept) - cap_ns) < takes, kept
    assert f"reached its length cap of" in r.log_tail(200), r.log_tail()
    return rep


def test_max_duration_stops_exactly_at_the_cap(reeld, note):
    r = reeld("cap", size="320x180", fps="30")
    ev = Lines(r, "events")
    ev.wait(lambda ls: ls, what="the subscribed reply")
    t0 = r.ctl("start", "--name", "cap", "--max-duration", "2").mid
    time.sleep(0.5)
    st = r.status()
    assert st["state"] == "recording" and 0 < st["remainingNs"] <= 2 * 10**9, st
    ev.wait(lambda _: events_of(ev, "finished"), timeout=30, what="the finished event")
    note(f"cap of 2 s: finished {time.monotonic() - t0:.2f} s after start")
    rep = check_capped(r, ev, os.path.join(r.out_dir, "cap.mp4"), 2, 30, 1)
    assert len(rep["segments"]) == 1, rep["segments"]
    ev.kill()


def test_cap_inside_the_second_take_from_the_setting(reeld):
    # the cap from the setting (the flag); its start takes no --max-duration
    r = reeld("cap-pause", size="320x180", fps="30", **{"max-duration": "2.5"})
    ev = Lines(r, "events")
    ev.wait(lambda ls: ls, what="the subscribed reply")
    t0 = r.ctl("start", "--name", "cp").mid
    for at, cmd in [(1.0, "pause"), (1.6, "resume")]:
        time.sleep(max(0.0, t0 + at - time.monotonic()))
        r.ctl(cmd)
    rep = check_capped(r, ev, os.path.join(r.out_dir, "cp.mp4"), Fraction(5, 2), 30, 2)
    assert len(rep["segments"]) == 2, rep["segments"]
    ev.kill()


def test_start_zero_overrides_the_setting(reeld):
    r = reeld("cap-off", size="320x180", fps="15", **{"max-duration": "1"})
    r.ctl("start", "--name", "off", "--max-duration", "0")
    time.sleep(1.6)
    st = r.status()
    assert st["state"] == "recording" and st["remainingNs"] is None, st
    r.ctl("stop")

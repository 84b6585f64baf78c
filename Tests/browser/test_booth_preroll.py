"""The booth page with a pre-roll (issue 25: reeld's pre_roll, standby): the page says that a
recording keeps the seconds before the press, and a take held with the mouse is as long as the
hold plus the pre-roll, shown so in the take list (the pre-roll is part of the first take)."""

import time

from test_booth import first, hold_record, take_durations

PRE_ROLL_S = 1.0
BOOTH_OPTIONS = {"pre-roll": str(PRE_ROLL_S)}
FRAME_MS = 1000 / 30


def test_the_page_says_so_and_the_first_take_holds_the_preroll(page_factory, booth, note):
    r, _ = booth
    p = page_factory()
    text = p.until("document.getElementById('state').textContent.includes('pre-roll') && "
                   "document.getElementById('state').textContent", what="the pre-roll sentence")
    assert "seconds before you press Record" in text, text
    # The whole pre-roll held (reeld's status says what a start now would get).
    deadline = time.monotonic() + 10
    while r.status()["preRollNs"] != int(PRE_ROLL_S * 1e9):
        assert time.monotonic() < deadline, r.status()
        time.sleep(0.05)
    trace = hold_record(p, 1.2)
    down, up = first(trace, "pointerdown"), first(trace, "pointerup")
    start, pause = first(trace, "reply", cmd="start"), first(trace, "reply", cmd="pause")
    assert start["ok"] and pause["ok"], trace
    held_ms = up["t"] - down["t"]
    (_, _, dur_ns), = take_durations(p, 1)
    dur_ms = dur_ns / 1e6
    reaction = max(start["rtt"], pause["rtt"])
    note(f"held {held_ms:.1f} ms with a {PRE_ROLL_S:.1f} s pre-roll: the take lasts {dur_ms:.1f} ms "
         f"(start/pause round trips {start['rtt']:.1f}/{pause['rtt']:.1f} ms)")
    # The hold plus the pre-roll, within a frame plus the reaction (as test_booth's takes).
    assert abs(dur_ms - (held_ms + PRE_ROLL_S * 1000)) <= FRAME_MS + reaction, (dur_ms, held_ms, reaction)
    r.ctl("stop")

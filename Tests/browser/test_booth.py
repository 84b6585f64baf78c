"""The booth page in a real browser (issue 24): sign-in, the live preview, hold-to-record, Retake,
Stop and the file it leaves, a second browser following every change, the level meter.

reeld runs its synthetic sources (test-sources.md: a timecode strip on every frame, a 1 kHz
beep at each whole second) with standby, so the preview and the levels flow while idle. Times
of the user's actions are the page's own (window.reel.trace: performance.now and Date.now at
the pointer events), not Selenium's."""

import os

import pytest

import reel_verify as rv
from conftest import PASSWORD, STRIP_JS, WAIT

FPS = 30
FRAME_MS = 1000 / FPS


@pytest.fixture(autouse=True)
def idle_first(booth):
    """Each test starts from idle (a failed test may leave a recording open)."""
    r, _ = booth
    if r.status()["state"] != "idle":
        r.ctl("stop", expect_ok=False)
    yield


def trace_since(page, n):
    return page.js("return window.reel.trace.slice(arguments[0])", n)


def trace_len(page):
    return page.js("return window.reel.trace.length")


def first(entries, kind, **match):
    for e in entries:
        if e["kind"] == kind and all(e.get(k) == v for k, v in match.items()):
            return e
    raise AssertionError(f"no {kind} {match} in the page's trace: {entries}")


def hold_record(page, seconds):
    """Holds Record with the mouse for about `seconds` (Selenium's pause); returns the page's
    trace of it: pointerdown, pointerup and the start/resume and pause requests with their
    round trips."""
    from selenium.webdriver.common.action_chains import ActionChains
    n = trace_len(page)
    ActionChains(page.driver).click_and_hold(page.button("Record")).pause(seconds).release().perform()
    # the pause request's reply ends the gesture
    page.until("window.reel.trace.slice(%d).some(e => e.kind === 'reply' && e.cmd === 'pause')" % n,
               what="the reply to the pause that the release sent")
    return trace_since(page, n)


def take_durations(page, count):
    """The page's take list once it shows `count` closed takes: [(number, title, durationNs)]."""
    page.until(f"document.querySelectorAll('#takes li').length === {count} && "
               f"document.querySelectorAll('#takes .dur[data-ns]').length === {count}", what=f"{count} closed takes in the list")
    return page.js("""return [...document.querySelectorAll('#takes li')].map(li =>
        [Number(li.dataset.take), li.querySelector('.title').textContent, Number(li.querySelector('.dur').dataset.ns)])""")


def test_sign_in_refuses_a_wrong_password_and_admits_the_right_one(page_factory):
    p = page_factory(signed_in=False)
    p.get("/")
    assert p.path() == "/signin", p.driver.current_url
    p.sign_in("not the password")
    p.until("!document.getElementById('signin-error').hidden", timeout=WAIT, what="the wrong-password message")
    assert p.path() == "/signin", p.driver.current_url
    assert "Wrong password" in p.js("return document.getElementById('signin-error').textContent")
    cookies = {c["name"] for c in p.driver.get_cookies()}
    assert "reel_session" not in cookies, cookies
    p.get("/")                                  # still signed out
    assert p.path() == "/signin", p.driver.current_url
    p.sign_in(PASSWORD)
    p.wait_path("/")
    p.until("location.pathname === '/' && window.reel && window.reel.statuses > 0", what="the booth with a status")
    assert p.js("return document.getElementById('live').textContent") == "Standby"
    session = [c for c in p.driver.get_cookies() if c["name"] == "reel_session"]
    assert session and session[0]["httpOnly"] and session[0].get("sameSite") == "Strict", session
    for name in ("Record", "Pause", "Retake", "Stop"):
        p.button(name)                          # exactly one button of that accessible name
    p.button("Sign out").click()                # a form POST from the page's own origin
    p.wait_path("/signin")
    p.get("/")
    assert p.path() == "/signin", p.driver.current_url


def test_preview_moves_while_idle_with_standby(page_factory, booth):
    r, _ = booth
    assert r.status()["standby"] == "warm"
    p = page_factory()
    img = p.js("""const i = [...document.images].find(i => (i.alt || i.getAttribute('aria-label')) === 'Live preview');
                  return i ? [i.dataset.stream, getComputedStyle(i).objectFit] : null""")
    assert img is not None, "no <img> named 'Live preview'"
    assert img == ["/preview.mjpg?width=640&fps=10", "contain"], img
    p.js(STRIP_JS)
    p.until("document.getElementById('preview').naturalWidth > 0", what="a preview frame")
    size = p.js("const i = document.getElementById('preview'); return [i.naturalWidth, i.naturalHeight]")
    assert size == [640, 360], size
    # the frames shown are the parts of reel-web's /preview.mjpg (each with its X-Captured-Ns)
    assert p.js("return window.reel.preview.capturedNs") > 0, p.js("return window.reel.preview")
    # Two frames as the page shows them, read from the pixels: the source time advances.
    seen = p.driver.execute_async_script("""
        const done = arguments[0], img = document.getElementById('preview');
        let a = readStrip(img);
        const t0 = performance.now();
        const step = () => {
          const b = readStrip(img);
          if (b !== null && a !== null && b !== a) return done([a, b, performance.now() - t0]);
          if (a === null) a = b;
          if (performance.now() - t0 > 3000) return done([a, b, null]);
          requestAnimationFrame(step);
        };
        requestAnimationFrame(step);""")
    a, b, after = seen
    assert after is not None, f"the preview did not change in 3 s (timecode {a} ms)"
    uptime_ms = r.status()["uptimeNs"] / 1e6
    assert 0 < a < b <= uptime_ms and b - a < 1000, seen   # a real timecode, moving forward
    assert p.js("return document.getElementById('live').textContent") == "Standby"


def test_hold_record_retake_stop(page_factory, booth, note):
    r, web = booth
    p = page_factory()
    label = p.driver.find_element("id", "label")

    # Take 1: held ~1.5 s. Its length is the time held, to within a frame plus the reaction
    # (the larger of the start's and the pause's round trips, measured by the page).
    label.send_keys("first")
    t1 = hold_record(p, 1.5)
    down, up = first(t1, "pointerdown"), first(t1, "pointerup")
    start, pause = first(t1, "reply", cmd="start"), first(t1, "reply", cmd="pause")
    assert start["ok"] and pause["ok"], t1
    held_ms = up["t"] - down["t"]
    takes = take_durations(p, 1)
    assert takes[0][:2] == [1, "first"], takes
    st = r.status()
    assert st["state"] == "paused" and [t["durationNs"] for t in st["takes"]] == [takes[0][2]], st
    reaction = max(start["rtt"], pause["rtt"])
    got_ms = takes[0][2] / 1e6
    note(f"held {held_ms:.1f} ms, take {got_ms:.1f} ms, start/pause round trips {start['rtt']:.1f}/{pause['rtt']:.1f} ms")
    assert abs(got_ms - held_ms) <= FRAME_MS + reaction, (held_ms, got_ms, reaction)
    assert label.get_attribute("value") == "", "the label field keeps the used label"

    # Take 2, then Retake removes it.
    label.send_keys("second")
    t2 = hold_record(p, 0.8)
    take_durations(p, 2)
    n = trace_len(p)
    p.button("Retake").click()
    p.until("window.reel.trace.slice(%d).some(e => e.kind === 'reply' && e.cmd === 'undo')" % n, what="undo's reply")
    assert first(trace_since(p, n), "reply", cmd="undo")["ok"]
    assert take_durations(p, 1)[0][:2] == [1, "first"]
    assert [t["title"] for t in r.status()["takes"]] == ["first"]

    # Take 3 (number 2 again), then Stop: the file holds takes 1 and 3, nothing of take 2.
    label.send_keys("third")
    t3 = hold_record(p, 1.0)
    takes = take_durations(p, 2)
    assert [t[:2] for t in takes] == [[1, "first"], [2, "third"]], takes
    n = trace_len(p)
    p.button("Stop").click()
    p.until("window.reel.trace.slice(%d).some(e => e.kind === 'reply' && e.cmd === 'stop')" % n, what="stop's reply")
    assert first(trace_since(p, n), "reply", cmd="stop")["ok"]
    st = r.status()
    final = st["lastFile"]
    assert st["state"] == "idle" and final and final.endswith(".mp4") and os.path.isfile(final), st
    rep = rv.analyze(final)
    segs = rep["segments"]
    assert len(segs) == 2, rv.format_report(rep)
    for seg, (_, title, dur) in zip(segs, takes):
        assert abs(seg["frames"] * FRAME_MS - dur / 1e6) <= FRAME_MS + 0.5, (title, seg, dur)
    # The second segment starts where take 3 began, not take 2: the source time between the
    # segments' starts is the time between the presses of takes 1 and 3.
    d13 = first(t3, "pointerdown")["t"] - down["t"]
    d12 = first(t2, "pointerdown")["t"] - down["t"]
    gap = (segs[1]["source_start"] - segs[0]["source_start"]) * 1000
    tol = FRAME_MS + max(e["rtt"] for e in t1 + t3 if e["kind"] == "reply")
    assert abs(gap - d13) <= tol and abs(gap - d12) > tol, (gap, d13, d12, tol)

    # The page lists it (finished files only), plays it and offers it for download.
    name = os.path.basename(final)
    p.until(f"[...document.querySelectorAll('#recordings .name')].some(e => e.textContent === {name!r})",
            what=f"{name} in the recordings")
    names = p.js("return [...document.querySelectorAll('#recordings .name')].map(e => e.textContent)")
    assert all(n.endswith(".mp4") for n in names) and names[0] == name, names
    href = p.js(f"return [...document.querySelectorAll('#recordings a[download]')].map(a => a.getAttribute('href'))")
    assert f"/recordings/{name}" in href, href
    dur = p.driver.execute_async_script("""
        const done = arguments[1], v = document.getElementById('player');
        v.src = arguments[0];
        v.addEventListener('loadedmetadata', () => done(v.duration), {once: true});
        v.addEventListener('error', () => done('error ' + (v.error && v.error.message)), {once: true});
        v.load();""", f"/recordings/{name}")
    total = sum(t[2] for t in takes) / 1e9
    assert isinstance(dur, (int, float)) and abs(dur - total) < 0.1, (dur, total)
    size = p.driver.execute_async_script("""
        fetch(arguments[0]).then(r => r.arrayBuffer().then(b => arguments[1]([r.status, b.byteLength])))""",
                                         f"/recordings/{name}")
    assert size == [200, os.path.getsize(final)], size


def test_a_second_browser_sees_every_change_within_200_ms(page_factory, note):
    a, b = page_factory(), page_factory()
    b.js("""
        window.seen = [];
        const live = document.getElementById('live'), takes = document.getElementById('takes');
        let lastLive = live.dataset.state, lastTakes = null;
        const takesKey = () => takes.children.length + '/' + takes.querySelectorAll('.dur[data-ns]').length;
        lastTakes = takesKey();
        new MutationObserver(() => {
          if (live.dataset.state !== lastLive) { lastLive = live.dataset.state; seen.push({what: 'live', v: lastLive, wall: Date.now()}); }
        }).observe(live, {attributes: true, childList: true, characterData: true, subtree: true});
        new MutationObserver(() => {
          const k = takesKey();
          if (k !== lastTakes) { lastTakes = k; seen.push({what: 'takes', v: k, wall: Date.now()}); }
        }).observe(takes, {childList: true, subtree: true, attributes: true});""")
    n = trace_len(a)

    def click(name):
        a.until("[...document.querySelectorAll('button')].some(b => b.textContent === %r && !b.disabled)" % name,
                what=f"an enabled {name} button")
        a.button(name).click()
        a.until("window.reel.trace.slice(%d).some(e => e.kind === 'reply' && e.cmd === %r)" % (n, cmd_of[name]),
                what=f"{name}'s reply")

    cmd_of = {"Retake": "undo", "Resume": "resume", "Pause": "pause", "Stop": "stop"}
    hold_record(a, 1.0)
    click("Retake")
    n2 = trace_len(a)
    click("Resume")
    b.until("window.seen.some(s => s.what === 'live' && s.v === 'recording' && s.wall >= %d)" %
            a.js("return window.reel.trace[arguments[0]].wall", n2), what="recording again in the second browser")
    click("Pause")
    click("Stop")
    b.until("window.seen.some(s => s.what === 'live' && s.v === 'standby')", what="standby in the second browser")
    trace = trace_since(a, n)
    seen = b.js("return window.seen")
    # (A's action, what B must then show)
    actions = [(first(trace, "pointerdown"), "live", "recording"),
               (first(trace, "pointerup"), "live", "paused"),
               (first(trace, "pointerup"), "takes", "1/1"),
               (first(trace, "click", button="Retake"), "takes", "0/0"),
               (first(trace, "click", button="Resume"), "live", "recording"),
               (first(trace, "click", button="Pause"), "live", "paused"),
               (first(trace, "click", button="Pause"), "takes", "1/1"),
               (first(trace, "click", button="Stop"), "live", "standby")]
    delays = []
    for act, what, v in actions:
        shown = next((s for s in seen if s["what"] == what and s["v"] == v and s["wall"] >= act["wall"] - 5), None)
        assert shown is not None, f"second browser never showed {what}={v} after {act}: {seen}"
        delays.append((act["kind"] + ("/" + act["button"] if "button" in act else ""), what, v, shown["wall"] - act["wall"]))
    note("second browser: " + ", ".join(f"{k} -> {w}={v} {d} ms" for k, w, v, d in delays))
    assert all(d <= 200 for *_, d in delays), delays


def test_level_meter_follows_the_beeps(page_factory, note):
    p = page_factory()
    p.until("document.querySelector('#meters meter') !== null", what="a level meter")
    values = p.driver.execute_async_script("""
        const done = arguments[0], m = document.querySelector('#meters meter'), out = [];
        new MutationObserver(() => out.push([performance.now(), m.value])).observe(m, {attributes: true, attributeFilter: ['value']});
        setTimeout(() => done(out), 3500);   // the span observed: three beeps and more""")
    assert len(values) >= 6, values
    hi = [v for _, v in values if v > -20]
    lo = [v for _, v in values if v < -50]
    assert hi and lo and max(hi) >= -10, values       # the beep is 0.5 of full scale: -6 dBFS
    onsets = [t for (t0, v0), (t, v) in zip(values, values[1:]) if v0 <= -20 < v]
    gaps = [b - a for a, b in zip(onsets, onsets[1:])]
    note(f"meter: {len(values)} changes in 3.5 s, beep onsets {len(onsets)}, spacing {[round(g) for g in gaps]} ms")
    assert len(onsets) >= 3 and all(abs(g - 1000) <= 150 for g in gaps), (onsets, values)


def test_space_bar_and_touch_hold_at_360_px(page_factory, booth):
    """A phone-sized window: nothing wider than the screen; holding the space bar (its key
    repeat ignored) and a finger on Record each record a take as long as the hold."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions import interaction
    from selenium.webdriver.common.actions.action_builder import ActionBuilder
    from selenium.webdriver.common.actions.pointer_input import PointerInput
    from selenium.webdriver.common.keys import Keys
    r, _ = booth
    p = page_factory()
    p.driver.set_window_size(360, 780)
    width = p.js("return [document.documentElement.clientWidth, document.documentElement.scrollWidth]")
    print("viewport and page width:", width)
    assert width[0] <= 360 and width[1] <= width[0], f"the page is wider than a 360 px screen: {width}"
    rec = p.button("Record")
    assert p.js("const b = arguments[0].getBoundingClientRect(); return b.width >= 44 && b.height >= 44", rec)

    # Space held (with key repeats, as a held key sends them): one start, one pause.
    p.js("document.activeElement && document.activeElement.blur()")
    n = trace_len(p)
    ActionChains(p.driver).key_down(Keys.SPACE).pause(0.3).perform()
    p.js("""for (let i = 0; i < 5; i++) document.dispatchEvent(new KeyboardEvent('keydown', {key: ' ', code: 'Space', repeat: true, bubbles: true}));""")
    ActionChains(p.driver).pause(0.5).key_up(Keys.SPACE).perform()
    p.until("window.reel.trace.slice(%d).some(e => e.kind === 'reply' && e.cmd === 'pause')" % n, what="the pause the key-up sent")
    t = trace_since(p, n)
    assert [e["cmd"] for e in t if e["kind"] == "send"] == ["start", "pause"], t
    held = first(t, "keyup")["t"] - first(t, "keydown")["t"]
    take = take_durations(p, 1)[0][2] / 1e6
    reaction = max(e["rtt"] for e in t if e["kind"] == "reply")
    assert abs(take - held) <= FRAME_MS + reaction, (held, take, reaction)

    # A finger on Record.
    n = trace_len(p)
    touch = PointerInput(interaction.POINTER_TOUCH, "finger")
    actions = ActionBuilder(p.driver, mouse=touch)
    actions.pointer_action.move_to(rec).pointer_down().pause(0.6).pointer_up()
    actions.perform()
    p.until("window.reel.trace.slice(%d).some(e => e.kind === 'reply' && e.cmd === 'pause')" % n, what="the pause the lifted finger sent")
    t = trace_since(p, n)
    assert first(t, "pointerdown")["pointerType"] == "touch", t
    held = first(t, "pointerup")["t"] - first(t, "pointerdown")["t"]
    take = take_durations(p, 2)[1][2] / 1e6
    reaction = max(e["rtt"] for e in t if e["kind"] == "reply")
    assert abs(take - held) <= FRAME_MS + reaction, (held, take, reaction)
    assert [x["durationNs"] / 1e6 for x in r.status()["takes"]][1] == take
    r.ctl("stop")


def test_length_cap_shows_takes_as_segments_and_the_time_left(page_factory, booth):
    r, _ = booth
    p = page_factory()
    assert p.js("return document.getElementById('progress').offsetParent") is None, "a progress bar without a cap"
    p.driver.find_element("id", "cap").send_keys("4")
    hold_record(p, 1.0)
    hold_record(p, 0.5)
    takes = take_durations(p, 2)
    st = r.status()
    cap = st["recordedNs"] + st["remainingNs"]
    assert cap == 4_000_000_000, st
    p.until("document.querySelectorAll('#progress span').length === 2", what="two segments in the progress bar")
    shares = p.js("""const bar = document.getElementById('progress');
        return [bar.offsetParent !== null, [...bar.children].map(s => s.getBoundingClientRect().width / bar.clientWidth)]""")
    assert shares[0], "the progress bar is hidden"
    for share, (_, _, dur) in zip(shares[1], takes):
        assert abs(share - dur / cap) < 0.02, (shares, takes)
    clock = p.js("return document.getElementById('clock').textContent")
    tenths = (cap - st["recordedNs"]) // 100_000_000
    assert f"0:0{tenths // 10}.{tenths % 10} left of 0:04.0" in clock, (clock, tenths)
    r.ctl("stop")

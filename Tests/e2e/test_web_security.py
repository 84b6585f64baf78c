"""reel-web (issue 24) against the real reeld (`--video test --audio test --standby`): without a
session every URL is refused; a wrong password is refused and slowed; a cross-origin POST is
refused; nothing outside the finished recordings can be downloaded; reel-web holds no descriptor
of the recordings directory open for writing; signed in, the page's commands work and
/api/events pushes the state changes."""

import json
import os
import shutil
import time

import pytest

from web_harness import EventReader, Web


@pytest.fixture
def web(reeld, reel_bin_dir):
    if not os.access(os.path.join(reel_bin_dir, "reel-web"), os.X_OK):
        pytest.skip(f"REEL_BIN_DIR={reel_bin_dir} lacks reel-web")
    started = []

    def start(name="web", **opts):
        r = reeld(name, standby=True, **opts)
        w = Web(reel_bin_dir, r.socket, r.out_dir, r.dir)
        started.append(w)
        return r, w

    yield start
    for w in started:
        w.stop()
        print(w.log_text())


PROTECTED_GETS = ["/", "/index.html", "/static/app.js", "/static/index.html", "/api/status", "/api/events",
                  "/api/recordings", "/preview.mjpg", "/preview.mjpg?width=320&fps=5", "/recordings/clip.mp4",
                  "/recordings/..%2fout%2fclip.mp4", "/nothing-here"]
PROTECTED_POSTS = ["/api/start", "/api/pause", "/api/resume", "/api/undo", "/api/stop", "/signout"]


def test_without_a_session_every_url_is_refused(web):
    r, w = web()
    shutil.copy(__file__, os.path.join(r.out_dir, "clip.mp4"))
    for cookie in (None, "0" * 64, "not-a-token"):
        w.cookie = cookie
        for path in PROTECTED_GETS:
            status, headers, body = w.get(path)
            if path in ("/", "/index.html"):  # the page sends the browser to sign in
                assert status == 303 and headers["Location"] == "/signin", (path, status)
            else:
                assert status == 401, (cookie, path, status, body[:200])
            assert b"Reel booth" not in body and b"def test_" not in body, path
        for path in PROTECTED_POSTS:
            status, _, _ = w.post(path, {"name": "sneaky"})
            assert status == 401, (cookie, path, status)
    assert r.status()["state"] == "idle"
    assert not any(n.startswith("sneaky") for n in os.listdir(r.out_dir))
    # The sign-in page itself is open, and no session was made by asking.
    w.cookie = None
    status, headers, body = w.get("/signin")
    assert status == 200 and b'name="password"' in body, status
    assert "default-src 'self'" in headers["Content-Security-Policy"]


def test_a_wrong_password_is_refused_and_slowed_and_the_right_one_signs_in(web):
    r, w = web()
    status, t1 = w.sign_in("wrong")
    assert status == 401 and t1 >= 0.45, (status, t1)
    status, t2 = w.sign_in("booth secret ")  # a near miss
    assert status == 401 and t2 >= 0.95, (status, t2)
    assert w.cookie is None
    status, _ = w.sign_in()
    assert status == 303, status
    cookie = w.set_cookie_header
    assert cookie.startswith("reel_session=") and len(w.cookie) == 64, cookie
    for attr in ("HttpOnly", "SameSite=Strict", "Path=/"):
        assert attr in cookie, cookie
    assert "Secure" not in cookie, cookie
    status, _, body = w.get("/api/status")
    assert status == 200 and json.loads(body)["state"] == "idle", (status, body)
    status, _, body = w.get("/")
    assert status == 200 and b"Reel" in body
    # Signing out ends the session on the server, not only in the browser.
    old = w.cookie
    status, headers, _ = w.post("/signout")
    assert status == 303 and "Max-Age=0" in headers["Set-Cookie"]
    w.cookie = old
    assert w.get("/api/status")[0] == 401


def test_a_cross_origin_post_is_refused(web):
    r, w = web()
    assert w.sign_in()[0] == 303
    for origin in ("http://evil.example", f"http://127.0.0.1:{w.port + 1}", f"https://127.0.0.1:{w.port}", "null"):
        status, _, body = w.post("/api/start", {"name": "csrf"}, origin=origin)
        assert status == 403, (origin, status, body)
    status, _, _ = w.post("/api/start", {"name": "csrf"}, origin=None)  # neither Origin nor Referer
    assert status == 403
    status, _, _ = w.post("/api/start", {"name": "csrf"}, origin=None, headers={"Referer": "http://evil.example/x"})
    assert status == 403
    status, _, _ = w.post("/signin", b"password=booth+secret", origin="http://evil.example", cookie=False)
    assert status == 403
    assert r.status()["state"] == "idle"
    # The page's own origin passes the check (then reeld answers: idle, nothing to pause).
    status, _, body = w.post("/api/pause", origin=None, headers={"Referer": w.origin + "/"})
    assert status == 409 and json.loads(body)["error"]["code"] == "wrong_state", (status, body)


def test_nothing_outside_the_finished_recordings_can_be_downloaded(web):
    r, w = web()
    assert w.sign_in()[0] == 303
    data = os.urandom(100_000)
    with open(os.path.join(r.out_dir, "clip.mp4"), "wb") as f:
        f.write(data)
    with open(os.path.join(r.dir, "secret.mp4"), "wb") as f:
        f.write(b"SECRET")
    with open(os.path.join(r.out_dir, "busy.mp4.part"), "wb") as f:
        f.write(b"PART")
    os.symlink(os.path.join(r.dir, "secret.mp4"), os.path.join(r.out_dir, "planted.mp4"))
    os.symlink("../secret.mp4", os.path.join(r.out_dir, "relative.mp4"))
    os.mkdir(os.path.join(r.out_dir, "folder.mp4"))
    for path in ["/recordings/..%2fsecret.mp4", "/recordings/%2e%2e%2fsecret.mp4", "/recordings/%2e%2e",
                 "/recordings/..", "/recordings/../secret.mp4", "/recordings/%2E%2E%2Fsecret.mp4",
                 "/recordings/%2fetc%2fpasswd", "/recordings/planted.mp4", "/recordings/relative.mp4",
                 "/recordings/busy.mp4.part", "/recordings/busy.mp4%2epart", "/recordings/folder.mp4",
                 "/recordings/clip.mp4%00", "/recordings/", "/static/..%2f..%2fPackage.swift"]:
        status, _, body = w.get(path)
        assert status in (404, 400), (path, status)
        assert b"SECRET" not in body and b"PART" not in body, path
    status, _, body = w.get("/api/recordings")
    assert status == 200, status
    assert [e["name"] for e in json.loads(body)] == ["clip.mp4"], body
    assert json.loads(body)[0]["bytes"] == len(data)
    status, headers, body = w.get("/recordings/clip.mp4")
    assert status == 200 and body == data and headers["Accept-Ranges"] == "bytes"
    status, headers, body = w.get("/recordings/clip.mp4", headers={"Range": "bytes=1000-1999"})
    assert status == 206 and body == data[1000:2000], status
    assert headers["Content-Range"] == f"bytes 1000-1999/{len(data)}"
    status, headers, _ = w.get("/recordings/clip.mp4", headers={"Range": f"bytes={len(data)}-"})
    assert status == 416 and headers["Content-Range"] == f"bytes */{len(data)}"


def test_reel_web_holds_no_recordings_descriptor_open_for_writing(web):
    r, w = web()
    assert w.sign_in()[0] == 303
    big = os.path.join(r.out_dir, "big.mp4")
    with open(big, "wb") as f:
        f.truncate(256 << 20)  # sparse: reel-web blocks on the socket long before the end
    conn, resp = w.open_stream("/recordings/big.mp4")
    try:
        assert resp.status == 200
        resp.read(65536)  # the download is under way; the rest waits in reel-web
        out = os.path.realpath(r.out_dir)
        seen = []
        fd_dir = f"/proc/{w.proc.pid}/fd"
        for fd in os.listdir(fd_dir):
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except FileNotFoundError:
                continue
            if target == out or target.startswith(out + "/"):
                with open(f"/proc/{w.proc.pid}/fdinfo/{fd}") as f:
                    flags = int(next(l for l in f if l.startswith("flags:")).split()[1], 8)
                seen.append((target, oct(flags)))
                assert flags & os.O_ACCMODE == os.O_RDONLY, (target, oct(flags))
        assert any(t == os.path.realpath(big) for t, _ in seen), f"no descriptor of big.mp4 open while downloading: {seen}"
    finally:
        conn.close()


def test_signed_in_the_commands_work_and_events_push_the_state_changes(web):
    r, w = web()
    assert w.sign_in()[0] == 303
    ev = EventReader(w)
    try:
        ev.wait(lambda es: any(n == "status" for n, _ in es), "first status")
        assert ev.states()[0] == "idle"

        def command(cmd, body=None, want=200):
            status, _, raw = w.post(f"/api/{cmd}", body if body is not None else b"")
            reply = json.loads(raw)
            assert status == want, (cmd, status, reply)
            assert reply["ok"] == (want == 200), reply
            return reply

        def wait_state(state):
            ev.wait(lambda es: any(n == "reel" and json.loads(d).get("state") == state for n, d in es[seen:]),
                    f"state {state}")

        seen = len(ev.events)
        start = command("start", {"name": "webtake", "label": "Intro"})
        assert start["file"].endswith("webtake.mp4.part"), start
        wait_state("recording")
        ev.wait(lambda es: "recording" in ev.states(), "a status saying recording")
        time.sleep(1.0)  # a take with some frames in it
        seen = len(ev.events)
        command("pause")
        wait_state("paused")
        seen = len(ev.events)
        command("resume", {"label": "Second"})
        wait_state("recording")
        time.sleep(0.5)
        seen = len(ev.events)
        undo = command("undo")
        assert undo["ok"], undo
        ev.wait(lambda es: any(n == "reel" and json.loads(d)["event"] == "take_undone" for n, d in es[seen:]), "take_undone")
        seen = len(ev.events)
        stop = command("stop")
        assert stop["file"].endswith("webtake.mp4"), stop
        wait_state("idle")
        ev.wait(lambda es: [json.loads(d)["state"] for n, d in es if n == "status"][-1:] == ["idle"], "a status after the last event")
        command("stop", want=409)  # idle: reeld says why
        # Every reeld event is followed by a fresh status.
        names = [n for n, _ in ev.events if n in ("reel", "status")]
        for i, n in enumerate(names):
            if n == "reel":
                assert "status" in names[i + 1:i + 3], names
        status, _, body = w.get("/api/recordings")
        assert [e["name"] for e in json.loads(body)] == ["webtake.mp4"], body
        status, _, body = w.get("/recordings/webtake.mp4", headers={"Range": "bytes=4-7"})
        assert status == 206 and body == b"ftyp", (status, body)
    finally:
        ev.close()


def test_events_say_when_reeld_is_gone(web):
    r, w = web()
    assert w.sign_in()[0] == 303
    ev = EventReader(w)
    try:
        ev.wait(lambda es: any(n == "status" for n, _ in es), "first status")
        r.terminate()
        ev.wait(lambda es: any(n == "down" for n, _ in es), "down")
        status, _, body = w.get("/api/status")
        assert status == 502 and json.loads(body)["ok"] is False
        status, _, body = w.post("/api/start", {})
        assert status == 502 and "reeld" in json.loads(body)["error"]["message"], body
    finally:
        ev.close()

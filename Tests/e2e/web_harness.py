"""reel-web for the e2e tests: started on a free loopback port against a reeld's socket and
recordings, spoken to with urllib only (no redirects followed, cookies by hand)."""

import http.client
import json
import os
import queue
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

READY_TIMEOUT = 30


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def hash_password(bindir, password):
    p = subprocess.run([os.path.join(bindir, "reel-web"), "hash-password"], input=password + "\n",
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


class Web:
    """A running reel-web. `get`/`post` return (status, headers, body bytes)."""

    def __init__(self, bindir, socket_path, recordings, workdir, password="booth secret", extra=()):
        self.password = password
        self.password_file = os.path.join(workdir, "web-password")
        with open(self.password_file, "w") as f:
            f.write(hash_password(bindir, password) + "\n")
        self.argv = [os.path.join(bindir, "reel-web"), "--listen", "127.0.0.1:0", "--socket", socket_path,
                     "--recordings", recordings, "--password-file", self.password_file, *extra]
        self.log_path = os.path.join(workdir, "reel-web.log")
        self.lines = queue.Queue()
        self.log = []
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()
        self.port = None
        deadline = time.monotonic() + READY_TIMEOUT
        while self.port is None:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"reel-web did not say where it listens within {READY_TIMEOUT} s:\n" + self.log_text())
            if line is None:
                raise AssertionError(f"reel-web exited ({self.proc.wait()}):\n" + self.log_text())
            if "reel-web listening on 127.0.0.1:" in line:
                self.port = int(line.rsplit(":", 1)[1].strip())
        self.origin = f"http://127.0.0.1:{self.port}"
        self.cookie = None

    def _read(self):
        for line in self.proc.stderr:
            self.log.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def log_text(self):
        return "".join(self.log[-80:])

    def request(self, method, path, body=None, headers=None, cookie=True, timeout=30):
        h = dict(headers or {})
        if cookie and self.cookie:
            h["Cookie"] = f"reel_session={self.cookie}"
        req = urllib.request.Request(self.origin + path, data=body, method=method, headers=h)
        try:
            with OPENER.open(req, timeout=timeout) as resp:
                return resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, data=b"", origin="own", headers=None, **kw):
        h = dict(headers or {})
        if origin == "own":
            h["Origin"] = self.origin
        elif origin is not None:
            h["Origin"] = origin
        if isinstance(data, (dict, list)):
            data = json.dumps(data).encode()
            h.setdefault("Content-Type", "application/json")
        return self.request("POST", path, body=data, headers=h, **kw)

    def sign_in(self, password=None):
        body = urllib.parse.urlencode({"password": self.password if password is None else password}).encode()
        t0 = time.monotonic()
        status, headers, _ = self.post("/signin", body, headers={"Content-Type": "application/x-www-form-urlencoded"},
                                       cookie=False)
        elapsed = time.monotonic() - t0
        if status == 303:
            cookie = headers["Set-Cookie"]
            self.set_cookie_header = cookie
            self.cookie = cookie.split(";", 1)[0].split("=", 1)[1]
        return status, elapsed

    def open_stream(self, path):
        """A raw connection reading `path`'s body as it comes (SSE, MJPEG, a slow download)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.request("GET", path, headers={"Cookie": f"reel_session={self.cookie}"} if self.cookie else {})
        resp = conn.getresponse()
        return conn, resp

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


class EventReader:
    """Reads /api/events on a thread: `events` collects (event, data) pairs."""

    def __init__(self, web):
        self.conn, self.resp = web.open_stream("/api/events")
        assert self.resp.status == 200, self.resp.status
        self.events = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        name, data = None, []
        try:
            for raw in self.resp:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data.append(line[6:])
                elif line == "" and name:
                    with self.cond:
                        self.events.append((name, "\n".join(data)))
                        self.cond.notify_all()
                    name, data = None, []
        except Exception:
            pass

    def wait(self, pred, what, timeout=20):
        with self.cond:
            ok = self.cond.wait_for(lambda: pred(self.events), timeout=timeout)
        assert ok, f"no {what} in /api/events within {timeout} s: {self.events[-10:]}"
        return ok

    def states(self):
        return [json.loads(d)["state"] for n, d in self.events if n == "status"]

    def close(self):
        self.conn.close()

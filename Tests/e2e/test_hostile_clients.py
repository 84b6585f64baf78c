"""Hostile control clients while recording: reeld must never crash or hang, must answer every
well-formed client promptly, must keep its memory bounded, and the recording must be unharmed."""

import json
import os
import random
import socket
import threading
import time

import reel_verify as rv


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def connect(path, timeout=10.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    return s


def read_lines(s, n):
    """Reads n reply lines (or fewer if the server closes)."""
    buf, lines = b"", []
    while len(lines) < n:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
        *done, buf = buf.split(b"\n")
        lines += done
    return lines


class Probe(threading.Thread):
    """A well-behaved client: one status request every 20 ms on its own connection, timing each."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path, self.rtts, self.errors = path, [], []
        self.done = threading.Event()

    def run(self):
        s = connect(self.path)
        f = s.makefile("rwb", buffering=0)
        i = 0
        while not self.done.is_set():
            t0 = time.monotonic()
            f.write(json.dumps({"v": 1, "id": i, "cmd": "status"}).encode() + b"\n")
            line = f.readline()
            self.rtts.append(time.monotonic() - t0)
            try:
                reply = json.loads(line)
                if not reply.get("ok") or reply.get("id") != i:
                    self.errors.append(reply)
            except ValueError:
                self.errors.append(line)
            i += 1
            self.done.wait(0.02)  # pacing of the probe's own requests, not synchronisation
        s.close()


def hostile_lines(rng, n):
    """n request lines, each with the reply it must get: True (ok) or the error code."""
    kinds = [
        # random bytes (never a blank line: the protocol ignores those without a reply)
        (lambda: b"#" + bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200))).replace(b"\n", b" "), "bad_request"),
        (lambda: b'{"v":1,"cmd":"status"', "bad_request"),                        # truncated JSON
        (lambda: b'{"v":1,"cmd":"format-disk"}', "bad_request"),                  # unknown command
        (lambda: b'{"v":99,"cmd":"status"}', "bad_request"),                      # wrong version
        (lambda: b'[1,2,3]', "bad_request"),
        (lambda: b'{"v":1,"cmd":"start","name":"../../etc/passwd"}', "bad_request"),
        (lambda: b'{"v":1,"cmd":"pause","id":"x"}', "bad_request"),
        # well formed, with a field this version does not know: served (forward compatibility)
        (lambda: json.dumps({"v": 1, "cmd": "status", "pad": "x" * rng.randrange(1000)}).encode(), True),
    ]
    out = []
    for _ in range(n):
        make, expect = rng.choice(kinds)
        out.append((make(), expect))
    return out


def test_hostile_clients_while_recording(reeld):
    r = reeld("hostile", size="320x180", fps="15")
    r.ctl("start", "--name", "hostile")
    pid = r.proc.pid
    rss_before = rss_kib(pid)
    probe = Probe(r.socket)
    probe.start()
    rng = random.Random(1234)

    # 10 000 hostile requests over 50 pipelined connections: each gets exactly its reply, in order.
    def flood(k):
        s = connect(r.socket)
        lines = hostile_lines(random.Random(k), 200)
        s.sendall(b"\n".join(line for line, _ in lines) + b"\n")
        replies = read_lines(s, len(lines))
        s.close()
        return lines, replies

    results = [None] * 50
    threads = [threading.Thread(target=lambda k=k: results.__setitem__(k, flood(k))) for k in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(res is not None for res in results), "a flooding client got no (or too few) replies"
    checked = 0
    for lines, replies in results:
        assert len(replies) == len(lines), (len(replies), len(lines))
        for (line, expect), raw in zip(lines, replies):
            reply = json.loads(raw)
            if expect is True:
                assert reply["ok"] and reply["status"]["state"] == "recording", (line[:80], reply)
            else:
                assert not reply["ok"] and reply["error"]["code"] == expect, (line[:80], reply)
            checked += 1
    assert checked == 10_000

    # A 10 MB line: answered with bad_request and closed once it passes the 64 KiB limit.
    s = connect(r.socket)
    sent, closed_by_server = 0, False
    chunk = b"x" * 65536
    while sent < 10 * 1024 * 1024:
        try:
            s.sendall(chunk)
            sent += len(chunk)
        except OSError:  # EPIPE / ECONNRESET: the server hung up, as it should
            closed_by_server = True
            break
    got = b""
    try:
        while not got.endswith(b"\n"):
            data = s.recv(65536)
            if not data:
                break
            got += data
    except OSError:
        pass
    s.close()
    assert closed_by_server or got, "the server neither answered nor closed a 10 MB line"
    if got:
        assert json.loads(got.split(b"\n")[0])["error"]["code"] == "bad_request", got[:200]

    # 100 clients that vanish halfway through a request.
    for k in range(100):
        s = connect(r.socket)
        s.sendall(b'{"v":1,"cmd":"sta')
        s.close()

    # 200 concurrent clients, each with one well-formed status request.
    socks = [connect(r.socket) for _ in range(200)]
    for i, s in enumerate(socks):
        s.sendall(json.dumps({"v": 1, "id": i, "cmd": "status"}).encode() + b"\n")
    for i, s in enumerate(socks):
        reply = json.loads(read_lines(s, 1)[0])
        assert reply["ok"] and reply["id"] == i and reply["status"]["state"] == "recording", reply
        s.close()

    probe.done.set()
    probe.join(10)
    assert r.proc.poll() is None, "reeld died\n" + r.log_tail()
    assert not probe.errors, probe.errors[:3]
    worst = max(probe.rtts)
    print(f"probe: {len(probe.rtts)} status requests during the abuse, worst round trip {worst * 1000:.1f} ms")
    assert worst < 0.1, f"a well-formed client waited {worst * 1000:.1f} ms (limit 100 ms)"
    growth = rss_kib(pid) - rss_before
    print(f"reeld RSS {rss_before} KiB -> {rss_before + growth} KiB")
    assert growth < 16 * 1024, f"reeld grew by {growth} KiB during the abuse"

    final = r.ctl("stop").out.strip()
    rep = rv.analyze(final)
    problems = rv.defects(rep)
    assert not problems and len(rep["segments"]) == 1, problems

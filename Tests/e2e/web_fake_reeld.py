"""A small fake reeld for reel-web's preview and levels tests: a Unix socket server speaking the
issue 24 contract (`status`, `events`, `levels`, `preview`), in threads of the test process. It
counts the subscriptions it holds and the frames it sends, and never waits for a slow reader
(a send that would block drops that line, as reeld's latest-wins rule does)."""

import base64
import json
import os
import select
import socket
import threading
import time

STATUS = {"state": "idle", "file": None, "segments": [], "recordedNs": 0, "frames": 0, "droppedFrames": 0,
          "audioSamples": 0, "lastFile": None, "lastError": None, "video": "fake", "audio": "fake", "uptimeNs": 1}


class FakeReeld:
    def __init__(self, path, frame_bytes=2000):
        self.path = path
        self.frame_bytes = frame_bytes
        self.lock = threading.Lock()
        self.active = {"preview": [], "levels": 0, "events": 0}  # preview: list of (width, fps)
        self.subscriptions = []  # every subscription ever made: (cmd, args)
        self.sent = {}  # (width, fps) -> frames sent
        self.blocked_sends = 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(64)
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.closed = True
        self.sock.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def _accept(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        f = conn.makefile("rb")
        try:
            line = f.readline()
            if not line:
                return
            req = json.loads(line)
            cmd, rid = req.get("cmd"), req.get("id")
            if cmd == "status":
                self._send(conn, {"v": 1, "id": rid, "ok": True, "status": STATUS})
            elif cmd == "events":
                self._hold(conn, "events", {"v": 1, "id": rid, "ok": True, "subscribed": True})
            elif cmd == "levels":
                self._stream(conn, "levels", {"v": 1, "id": rid, "ok": True, "subscribed": True}, 0.05, self._levels)
            elif cmd == "preview":
                key = (req.get("width", 640), req.get("fps", 10))
                reply = {"v": 1, "id": rid, "ok": True, "subscribed": True,
                         "preview": {"width": key[0], "height": key[0] * 9 // 16 // 2 * 2, "fps": key[1]}}
                self._stream(conn, key, reply, 1.0 / key[1], lambda seq: self._frame(key, seq))
            else:
                self._send(conn, {"v": 1, "id": rid, "ok": False,
                                  "error": {"code": "bad_request", "message": f"unknown command {cmd!r}"}})
        except (OSError, ValueError):
            pass
        finally:
            conn.close()

    @staticmethod
    def _send(conn, obj):
        conn.sendall((json.dumps(obj) + "\n").encode())

    def _count(self, what, delta):
        with self.lock:
            if isinstance(what, tuple):
                if delta > 0:
                    self.active["preview"].append(what)
                    self.subscriptions.append(("preview", what))
                else:
                    self.active["preview"].remove(what)
            else:
                self.active[what] += delta
                if delta > 0:
                    self.subscriptions.append((what, None))

    def _hold(self, conn, what, reply):
        self._send(conn, reply)
        self._count(what, 1)
        try:
            conn.recv(1)  # until reel-web closes it
        finally:
            self._count(what, -1)

    def _stream(self, conn, what, reply, period, make):
        self._send(conn, reply)
        self._count(what, 1)
        conn.setblocking(False)
        seq, pending, nxt = 0, b"", time.monotonic()
        try:
            while not self.closed:
                nxt += period
                time.sleep(max(0, nxt - time.monotonic()))
                try:
                    if conn.recv(1, socket.MSG_PEEK) == b"":
                        return  # reel-web closed the subscription
                except BlockingIOError:
                    pass
                seq += 1
                if pending:  # a line half sent at the tick: this frame is dropped (latest wins)
                    self.blocked_sends += 1
                else:
                    pending = (json.dumps(make(seq)) + "\n").encode()
                # Send until the next tick at most: a reader that keeps up takes every frame.
                while pending and time.monotonic() < nxt + period:
                    if not select.select([], [conn], [], max(0, nxt + period - time.monotonic()))[1]:
                        break
                    try:
                        pending = pending[conn.send(pending):]
                    except BlockingIOError:
                        pass
        except OSError:
            return
        finally:
            self._count(what, -1)

    def _levels(self, seq):
        return {"v": 1, "event": "levels", "peakDbfs": [-6.0, -7.1], "rmsDbfs": [-12.3, -120.0],
                "capturedNs": seq * 50_000_000, "at": seq * 50_000_000 + 1000}

    def _frame(self, key, seq):
        with self.lock:
            self.sent[key] = self.sent.get(key, 0) + 1
        # A JPEG's markers around a body that carries the frame's number.
        body = f"frame {seq} ".encode().ljust(self.frame_bytes, b".")
        jpeg = b"\xff\xd8" + body + b"\xff\xd9"
        return {"v": 1, "event": "preview", "seq": seq, "width": key[0], "height": 0, "capturedNs": seq * 1000,
                "dropped": 0, "bytes": len(jpeg), "jpeg": base64.b64encode(jpeg).decode(), "at": seq * 1000 + 1}

    def preview_subscriptions(self):
        with self.lock:
            return list(self.active["preview"])

    def levels_subscriptions(self):
        with self.lock:
            return self.active["levels"]

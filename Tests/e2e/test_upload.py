"""The upload side of issue 26: scripts/reel-upload, the command line of reel-upload.service, run
exactly as the unit runs it (its settings from the environment, as /etc/reel/upload.env gives
them), with Debian's real rclone against a real SFTP server on the loopback (`rclone serve sftp`
on 127.0.0.1, a random port, remote `reel` in a temporary rclone.conf). The outbox is a temporary
directory holding hard links made here exactly as reeld makes them; the tests WITH reeld need its
--outbox-dir (issue 26's outbox) and skip, saying so, on a reeld without it. The three units
verify and reel-upload.service's exposure is at most 2.0."""

import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from reel_harness import unit_exposure, recording_for

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "reel-upload")
UNITS = os.path.join(REPO, "systemd")
PASSWORD = "booth-secret"

if not shutil.which("rclone"):
    pytest.fail("rclone not found: run 'make deps' (installs Debian's rclone)", pytrace=False)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def random_file(path, size):
    with open(path, "wb") as f:
        f.write(os.urandom(size))
    return sha256(path)


def clean_env(**extra):
    """The test's environment without the host's RCLONE_* and REEL_UPLOAD_* (the unit would not
    see them either), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RCLONE_", "REEL_UPLOAD_"))}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def wait_until(pred, timeout, what):
    """Polls a condition on the file system (nothing signals it) every 20 ms."""
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.02)


class SFTPServer:
    """`rclone serve sftp` on 127.0.0.1 serving `root`; restartable on the same port with the
    same host key (its cache dir holds the key it generated)."""

    def __init__(self, base):
        self.root = base / "server"
        self.root.mkdir()
        self.cache = base / "server-cache"
        self.log = base / "server.log"
        self.port = 0
        self.proc = None
        self.start()

    def start(self):
        empty = self.cache.parent / "server-rclone.conf"
        empty.write_text("")
        self.proc = subprocess.Popen(
            ["rclone", "serve", "sftp", "--config", str(empty), "--addr", f"127.0.0.1:{self.port}",
             "--user", "reel", "--pass", PASSWORD, str(self.root)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=clean_env(RCLONE_CACHE_DIR=self.cache))
        seen = []
        for line in self.proc.stderr:          # the line that says it listens: the event to wait for
            seen.append(line)
            m = re.search(r"SFTP server listening on 127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        assert self.port and self.proc.poll() is None, "".join(seen)
        # the rest of its log goes on to the file, so that a full pipe never stalls the server
        threading.Thread(target=self._drain, args=(self.proc.stderr, seen), daemon=True).start()

    def _drain(self, stream, seen):
        with open(self.log, "a") as f:
            f.writelines(seen)
            for line in stream:
                f.write(line)

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def files(self, path):
        """{name: size} of what the server holds under `path` (every file, at any depth)."""
        top = self.root / path
        out = {}
        for d, _, names in os.walk(top):
            for n in names:
                out[os.path.relpath(os.path.join(d, n), top)] = os.path.getsize(os.path.join(d, n))
        return out


@pytest.fixture
def server(tmp_path):
    s = SFTPServer(tmp_path)
    yield s
    s.kill()


def rclone_conf(path, server, **extra):
    """A config with remote [reel] on `server`, as README's SFTP example (the hash commands
    written out, so rclone never rewrites the file to record them)."""
    obscured = subprocess.run(["rclone", "obscure", PASSWORD], capture_output=True, text=True, check=True).stdout.strip()
    lines = {"type": "sftp", "host": "127.0.0.1", "port": server.port, "user": "reel", "pass": obscured,
             "shell_type": "unix", "md5sum_command": "md5sum", "sha1sum_command": "sha1sum", **extra}
    path.write_text("[reel]\n" + "".join(f"{k} = {v}\n" for k, v in lines.items()))
    return path


@pytest.fixture
def box(tmp_path, server):
    """A capture box's side: recordings/, outbox/ (its links), rclone.conf for the server."""
    rec, outbox = tmp_path / "recordings", tmp_path / "outbox"
    rec.mkdir()
    outbox.mkdir()
    return rec, outbox, rclone_conf(tmp_path / "rclone.conf", server)


def finished(rec, outbox, name, size):
    """A finished recording and its outbox link, as reeld makes them; returns its SHA-256."""
    digest = random_file(rec / name, size)
    os.link(rec / name, outbox / name)
    return digest


def upload_env(outbox, conf, **extra):
    # Quick retries for the tests (the defaults wait 20 s between attempts, and rclone sleeps
    # after its last attempt too).
    base = dict(REEL_UPLOAD_OUTBOX=outbox, REEL_UPLOAD_CONFIG=conf, REEL_UPLOAD_PATH="booth",
                RCLONE_RETRIES=1, RCLONE_RETRIES_SLEEP="0s", RCLONE_LOW_LEVEL_RETRIES=1,
                RCLONE_CACHE_DIR=os.path.join(os.path.dirname(str(outbox)), "client-cache"))
    base.update(extra)
    return clean_env(**{k: v for k, v in base.items() if v is not None})


def start_upload(outbox, conf, **extra):
    return subprocess.Popen([SCRIPT], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=upload_env(outbox, conf, **extra))


def run_upload(outbox, conf, timeout=120, **extra):
    """Runs the unit's command line to the end: (exit status, output, rusage). The script execs
    rclone, so the child's rusage (its peak RSS) is rclone's."""
    p = start_upload(outbox, conf, **extra)
    killer = threading.Timer(timeout, p.kill)
    killer.start()
    try:
        out = p.stdout.read()
        _, status, usage = os.wait4(p.pid, 0)
    finally:
        killer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    assert p.returncode != -signal.SIGKILL, f"the upload did not end within {timeout} s:\n{out}"
    return p.returncode, out, usage


def test_a_recording_arrives_whole_and_leaves_the_outbox(box, server, note):
    rec, outbox, conf = box
    digest = finished(rec, outbox, "talk.mp4", 16 << 20)
    # What the upload must not touch: dot-files, a temporary name, a sub-directory's file.
    for name in (".talk.mp4.tmp", "x.mp4.part", "y.tmp"):
        (outbox / name).write_bytes(b"not a recording")
    (outbox / "sub").mkdir()
    (outbox / "sub" / "deep.mp4").write_bytes(b"not at the top level")
    before = time.monotonic()
    rc, out, usage = run_upload(outbox, conf, REEL_UPLOAD_PATH=None, RCLONE_LOG_LEVEL="DEBUG")
    took = time.monotonic() - before
    assert rc == 0, out
    # the default remote path: recordings/HOSTNAME
    where = f"recordings/{os.uname().nodename}"
    assert server.files(where) == {"talk.mp4": 16 << 20}, (server.files(""), out)
    assert sha256(server.root / where / "talk.mp4") == digest
    # rclone compared the server's MD5 (md5sum over SSH) with the local one before removing the link
    md5 = hashlib.md5((rec / "talk.mp4").read_bytes()).hexdigest()
    assert f"talk.mp4: md5 = {md5} OK" in out, out
    assert re.search(r"talk\.mp4: Deleted", out), out
    assert sorted(os.listdir(outbox)) == [".talk.mp4.tmp", "sub", "x.mp4.part", "y.tmp"]
    assert os.listdir(outbox / "sub") == ["deep.mp4"]
    # the recording itself stays where reeld wrote it: only the link went
    assert sha256(rec / "talk.mp4") == digest and os.stat(rec / "talk.mp4").st_nlink == 1
    note(f"upload: 16 MiB over SFTP on the loopback in {took:.2f} s; rclone's peak RSS {usage.ru_maxrss / 1024:.1f} MiB")


def test_a_hash_that_differs_keeps_the_link(box, server):
    """The verification is real: a server whose MD5 command answers with something else (its
    SHA-1) makes rclone call the copy corrupt, remove it from the server and keep the link."""
    rec, outbox, conf = box
    rclone_conf(conf, server, md5sum_command="sha1sum")
    digest = finished(rec, outbox, "a.mp4", 200_000)
    rc, out, _ = run_upload(outbox, conf)
    assert rc != 0, out
    assert "corrupted on transfer: md5 hash differ" in out, out
    assert os.listdir(outbox) == ["a.mp4"] and sha256(outbox / "a.mp4") == digest
    assert server.files("booth") == {}, out


def test_server_stopped_mid_upload_then_the_next_run_completes_it(box, server, note):
    rec, outbox, conf = box
    size = 8 << 20
    digest = finished(rec, outbox, "long.mp4", size)
    p = start_upload(outbox, conf, RCLONE_BWLIMIT="2M")
    try:
        wait_until(lambda: server.files("booth").get("long.mp4", 0) >= 1 << 20, 30, "the first MiB on the server")
        server.kill()                               # the server goes away in the middle
        out = p.communicate(timeout=120)[0]
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode != 0, out
    assert os.listdir(outbox) == ["long.mp4"], out  # still waiting for upload
    partial = server.files("booth").get("long.mp4")
    note(f"upload cut off: the server held {partial} of {size} bytes under the final name (rclone 1.60's SFTP writes in place)")
    assert partial is None or partial < size, "the upload was not cut off: raise the size or lower the limit"
    server.start()                                  # back, on the same port; the timer's next run
    rc, out, _ = run_upload(outbox, conf)
    assert rc == 0, out
    assert server.files("booth") == {"long.mp4": size}, out   # once, whole, and nothing else
    assert sha256(server.root / "booth" / "long.mp4") == digest
    assert os.listdir(outbox) == []


def test_two_runs_at_once_the_second_does_nothing(box, server):
    rec, outbox, conf = box
    first_digest = finished(rec, outbox, "first.mp4", 4 << 20)
    p = start_upload(outbox, conf, RCLONE_BWLIMIT="1M")
    try:
        wait_until(lambda: server.files("booth").get("first.mp4", 0) > 0, 30, "the first run's upload to begin")
        # A second recording arrives while the first run uploads; a second run starts at once.
        finished(rec, outbox, "second.mp4", 100_000)
        rc, out, _ = run_upload(outbox, conf, timeout=30)
        assert rc == 0 and f"another upload is running (it holds the lock on {outbox}); this run does nothing" in out, out
        assert p.poll() is None, "the first run ended before the second was refused: the test proves nothing"
        assert "second.mp4" not in server.files("booth")
        first_out = p.communicate(timeout=60)[0]
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, first_out
    # the first run moved only what it listed when it began; the second recording waits for the next
    assert server.files("booth") == {"first.mp4": 4 << 20} and sha256(server.root / "booth" / "first.mp4") == first_digest
    assert os.listdir(outbox) == ["second.mp4"]
    rc, out, _ = run_upload(outbox, conf)
    assert rc == 0 and os.listdir(outbox) == [] and set(server.files("booth")) == {"first.mp4", "second.mp4"}, out


@pytest.mark.parametrize("case", ["missing", "no-reel-remote", "unparsable"])
def test_a_wrong_rclone_config_fails_naming_the_file_and_the_remote(box, case):
    rec, outbox, conf = box
    finished(rec, outbox, "a.mp4", 1000)
    if case == "missing":
        conf.unlink()
        want = [f"the rclone configuration {conf} does not exist", "a remote named [reel]", f"rclone config --config {conf}"]
    elif case == "no-reel-remote":
        conf.write_text(conf.read_text().replace("[reel]", "[office]"))
        want = [f"the rclone configuration {conf} has no remote named [reel] (it has: office:)", "rename the remote"]
    else:
        conf.write_text("[reel\ntype = sftp\n")
        want = [f"the rclone configuration {conf} cannot be read by rclone, so its remote [reel] cannot be used",
                f"rclone config show --config {conf}"]
    rc, out, _ = run_upload(outbox, conf, timeout=30)
    assert rc == 78, out                            # EX_CONFIG: systemd marks the unit failed
    for w in want:
        assert w in out, out
    assert out.startswith("reel-upload: ") and out.count("\n") == 1, out   # one journal line
    assert os.listdir(outbox) == ["a.mp4"]


def test_a_missing_outbox_fails_naming_it_and_the_setting(tmp_path):
    conf = tmp_path / "rclone.conf"
    conf.write_text("[reel]\ntype = local\n")
    rc, out, _ = run_upload(tmp_path / "nowhere", conf, timeout=30)
    assert rc == 78 and f"the outbox {tmp_path / 'nowhere'} is not a directory" in out and "outbox_dir" in out, out


def test_an_outbox_the_user_cannot_write_fails_naming_it(box):
    rec = box[0]
    # pytest's temp dirs are 0700: an outbox others can reach, as /var/lib/reel/outbox is
    top = tempfile.mkdtemp(prefix="reel-upload-", dir="/tmp")
    try:
        os.chmod(top, 0o755)
        outbox = Path(top) / "outbox"
        outbox.mkdir()
        os.chmod(outbox, 0o2770)
        finished(rec, outbox, "a.mp4", 1000)
        # as nobody, outside group reel (setpriv, util-linux)
        p = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", SCRIPT],
                           capture_output=True, text=True, timeout=30, env=upload_env(outbox, box[2]))
        assert p.returncode == 78, p.stdout + p.stderr
        assert f"the outbox {outbox} is not readable and writable by nobody" in p.stderr, p.stderr
        assert "2770 reel:reel" in p.stderr and os.listdir(outbox) == ["a.mp4"], p.stderr
    finally:
        shutil.rmtree(top)


# --- The units ---------------------------------------------------------------------------------

@pytest.fixture
def units(tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.fail("systemd-analyze not found: run 'make deps' (installs Debian's systemd)")
    for name in ("reel-upload.service", "reel-upload.path", "reel-upload.timer"):
        text = open(os.path.join(UNITS, name)).read()
        # ExecStart= at the script in this checkout, so verify can check it is executable, as it
        # is after `make install`
        (tmp_path / name).write_text(text.replace("/usr/local/lib/reel/reel-upload", SCRIPT))
    return tmp_path


def test_units_verify(units):
    names = [str(units / n) for n in ("reel-upload.service", "reel-upload.path", "reel-upload.timer")]
    p = subprocess.run(["systemd-analyze", "verify", *names], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(), p.stdout + p.stderr


def test_units_agree_on_the_outbox_and_the_script(units):
    """The path unit watches, and the service may write, the outbox the script uploads from."""
    script = open(SCRIPT).read()
    default = re.search(r"outbox=\$\{REEL_UPLOAD_OUTBOX:-([^}]+)\}", script).group(1)
    service = open(os.path.join(UNITS, "reel-upload.service")).read()
    assert re.search(rf"^ReadWritePaths=-?{re.escape(default)}$", service, re.M), service
    assert re.search(r"^ExecStart=/usr/local/lib/reel/reel-upload$", service, re.M)
    assert re.search(r"^EnvironmentFile=-/etc/reel/upload\.env$", service, re.M)
    command = script[script.index("exec rclone move"):]
    assert "--ignore-checksum" not in command and "--checksum" in command, command
    path_unit = open(os.path.join(UNITS, "reel-upload.path")).read()
    assert re.search(rf"^PathChanged={re.escape(default)}$", path_unit, re.M), path_unit
    timer = open(os.path.join(UNITS, "reel-upload.timer")).read()
    assert re.search(r"^OnUnitInactiveSec=\d+min$", timer, re.M) and re.search(r"^OnBootSec=", timer, re.M), timer


def test_service_exposure_at_most_2_0(units, note):
    exposure, text = unit_exposure(units / "reel-upload.service")
    assert exposure is not None, text
    note(f"reel-upload.service: systemd-analyze security exposure {exposure}")
    assert exposure <= 2.0, text


# --- With reeld (issue 26's outbox) ----------------------------------------------------------------

@pytest.fixture(scope="module")
def reeld_with_outbox(reel_bin_dir):
    helptext = subprocess.run([os.path.join(reel_bin_dir, "reeld"), "--help"], capture_output=True, text=True, timeout=30)
    if "--outbox-dir" not in helptext.stdout + helptext.stderr:
        pytest.skip(f"{reel_bin_dir}/reeld has no --outbox-dir yet (issue 26's outbox, branch outbox): "
                    "the tests of reeld's recordings through the upload wait for it")
    return reel_bin_dir


def test_a_reeld_recording_arrives(reeld_with_outbox, reeld, tmp_path, server):
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    conf = rclone_conf(tmp_path / "rclone.conf", server)
    r = reeld("upload", size="160x90", fps="15", **{"outbox-dir": str(outbox)})
    r.ctl("start", "--name", "take")
    assert r.wait_notify_after(len(r.notifications), recording_for(1), 15)
    final = r.ctl("stop").out.strip()
    assert os.path.basename(final) == "take.mp4"
    # the link comes after the rename (issue 26's contract: before on_finish, not before stop's reply)
    wait_until(lambda: os.listdir(outbox) == ["take.mp4"], 10, "reeld's link of take.mp4 in the outbox")
    assert os.path.samefile(outbox / "take.mp4", final)
    rc, out, _ = run_upload(outbox, conf)
    assert rc == 0, out
    assert server.files("booth") == {"take.mp4": os.path.getsize(final)}
    assert sha256(server.root / "booth" / "take.mp4") == sha256(final) and os.listdir(outbox) == []


def test_a_recording_recovered_after_sigkill_arrives(reeld_with_outbox, reeld, tmp_path, server):
    outbox, out_dir = tmp_path / "outbox", tmp_path / "recordings"
    outbox.mkdir()
    out_dir.mkdir()
    conf = rclone_conf(tmp_path / "rclone.conf", server)
    opts = {"outbox-dir": str(outbox), "output-dir": str(out_dir)}
    r = reeld("crash", size="160x90", fps="15", **opts)
    r.ctl("start", "--name", "cut")
    assert r.wait_notify_after(len(r.notifications), recording_for(3), 20)
    r.proc.send_signal(signal.SIGKILL)
    r.proc.wait()
    assert os.listdir(outbox) == [] and os.path.exists(out_dir / "cut.mp4.part")
    reeld("crash-again", size="160x90", fps="15", **opts)   # start-up recovery finishes cut.mp4 and links it
    wait_until(lambda: os.listdir(outbox) == ["cut.mp4"], 10, "reeld's link of the recovered cut.mp4 in the outbox")
    assert os.path.samefile(outbox / "cut.mp4", out_dir / "cut.mp4") and not os.path.exists(out_dir / "cut.mp4.part")
    rc, out, _ = run_upload(outbox, conf)
    assert rc == 0, out
    assert sha256(server.root / "booth" / "cut.mp4") == sha256(out_dir / "cut.mp4") and os.listdir(outbox) == []

"""reeld as a systemd service: the notify protocol (READY, STATUS, WATCHDOG, STOPPING), the
watchdog withheld while a capture thread is frozen, socket activation on an inherited fd 3,
SO_PEERCRED refusal of a second user, crash recovery of a .part file, config precedence,
--check-config and SIGHUP. Each waits for events (notify datagrams, process exit); the
timeouts bound how long an absence is observed."""

import glob
import json
import os
import re
import select
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from reel_harness import recorded, recording_for  # scripts/, on sys.path through conftest.py

WATCHDOG_USEC = 500_000  # reeld pings every 250 ms


def is_status(line):
    return line.startswith("STATUS=")


@pytest.mark.serial
def test_notify_status_watchdog_and_freeze(reeld):
    tmp = tempfile.mkdtemp(prefix="reel-freeze-", dir="/tmp")
    freeze = os.path.join(tmp, "freeze")
    r = reeld("notify", _env={"WATCHDOG_USEC": str(WATCHDOG_USEC), "REEL_TEST_FREEZE_CAPTURE": freeze})
    assert "READY=1" in r.notifications[0].split("\n"), r.notifications
    assert r.wait_notify_after(0, lambda l: l == "WATCHDOG=1", 5), "no WATCHDOG=1 while idle"

    r.ctl("start", "--name", "clip")
    # STATUS= refreshed while recording: a second recorded, then a later one (seconds advance,
    # one segment; a busy host may skip a second's line)
    line = r.wait_notify_after(0, recording_for(1), 5)
    assert line, f"no 'recording' status with a second recorded: {r.notifications}"
    first, _ = recorded(line)
    assert r.wait_notify_after(0, recording_for(first + 1), 5), f"the recorded time did not advance past {first} s: {r.notifications}"
    mark = len(r.notifications)
    assert r.wait_notify_after(mark, lambda l: l == "WATCHDOG=1", 2), "no WATCHDOG=1 while recording"
    r.ctl("pause")
    assert r.wait_notify_after(mark, lambda l: l.startswith("STATUS=paused ") and l.endswith(", 1 segment"), 5)
    r.ctl("resume")
    assert r.wait_notify_after(mark, lambda l: l.startswith("STATUS=recording ") and l.endswith(", 2 segments"), 5)

    # Freeze the video capture thread: reeld reports the stall, then pings no more.
    open(freeze, "w").close()
    stall = r.wait_notify_after(mark, lambda l: l.startswith("STATUS=error: video capture thread stalled"), 10)
    assert stall, f"no stall status after freezing: {r.notifications[mark:]}"
    after = len(r.notifications)
    assert r.wait_notify_after(after, lambda l: l == "WATCHDOG=1", 4 * WATCHDOG_USEC / 1e6) is None, \
        "WATCHDOG=1 sent while the capture thread was frozen"
    # Unfreeze: the thread moves again and the pings resume.
    os.unlink(freeze)
    assert r.wait_notify_after(after, lambda l: l == "WATCHDOG=1", 10), "pings did not resume after unfreezing"

    stop = r.ctl("stop")
    assert stop.out.strip().endswith("clip.mp4")
    assert r.wait_notify_after(mark, lambda l: l == "STATUS=idle", 5)
    assert r.terminate() == 0
    assert r.wait_notify_after(0, lambda l: l == "STOPPING=1", 5), r.notifications
    os.rmdir(tmp)


def test_watchdog_pid_for_another_process_means_no_pings(reeld):
    r = reeld("wdpid", _env={"WATCHDOG_USEC": str(WATCHDOG_USEC), "WATCHDOG_PID": "1"})
    assert r.wait_notify_after(0, lambda l: l == "WATCHDOG=1", 3 * WATCHDOG_USEC / 1e6) is None


def test_socket_activation(reeld):
    d = tempfile.mkdtemp(prefix="reel-act-", dir="/tmp")
    path = os.path.join(d, "activated.sock")
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lsock.bind(path)
    lsock.listen(16)
    try:
        r = reeld("activated", _listen_fd=lsock.fileno())
        assert not os.path.exists(r.socket), "reeld created --socket although it was handed a socket"
        r.socket = path
        r.ctl("start", "--name", "act")
        assert r.status()["state"] == "recording"
        stop = r.ctl("stop")
        assert os.path.isfile(stop.out.strip())
        assert r.terminate() == 0
        assert os.path.exists(path), "reeld removed the socket file it did not create"
        assert "socket-activated fd 3 (control)" in open(r.log_path, errors="replace").read()
    finally:
        lsock.close()
        os.unlink(path)
        os.rmdir(d)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as two other users (setpriv)")
def test_peer_outside_group_is_refused(reeld):
    audio_gid = 29  # Debian's 'audio' group: the allowed group for this test
    r = reeld("peers", **{"control-group": "audio"})
    os.chmod(r.dir, 0o755)
    os.chmod(r.socket, 0o666)  # let the kernel connect anyone: reeld's own check decides
    inside = ("setpriv", "--reuid=40001", "--regid=40001", f"--groups={audio_gid}", "--")
    outside = ("setpriv", "--reuid=40002", "--regid=40002", "--clear-groups", "--")
    ok = r.ctl("status", prefix=inside)
    assert ok.rc == 0, ok
    no = r.ctl("start", prefix=outside, expect_ok=False)
    assert no.rc == 1, no
    assert "uid 40002 may not control reeld: not in group audio" in no.err, no
    assert r.status()["state"] == "idle", "a refused peer's start was carried out"
    assert "refusing control client" in open(r.log_path, errors="replace").read()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user (setpriv)")
def test_snapshot_for_a_member_of_the_control_group(reeld):
    """Issue 14: a snapshot works for any user allowed on the socket, whatever reeld may write:
    the JPEG comes back over the socket and reelctl, as that user, writes it where that user can."""
    audio_gid = 29
    r = reeld("snap-peer", **{"control-group": "audio"})
    os.chmod(r.dir, 0o755)
    os.chmod(r.socket, 0o666)
    mine = Path(r.dir) / "u40001"
    mine.mkdir()
    os.chown(mine, 40001, 40001)
    os.chmod(mine, 0o700)  # only that user (and root) may write here
    out = mine / "snap.jpg"
    inside = ("setpriv", "--reuid=40001", "--regid=40001", f"--groups={audio_gid}", "--")
    c = r.ctl("snapshot", "-o", str(out), "--width", "160", prefix=inside)
    assert c.rc == 0, c
    st = os.stat(out)
    assert st.st_uid == 40001 and st.st_size > 0, st
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "json", str(out)],
                           check=True, capture_output=True, text=True).stdout
    s = json.loads(probe)["streams"][0]
    assert (s["codec_name"], s["width"], s["height"]) == ("mjpeg", 160, 90), s
    # Where that user may not write: reelctl says so, with the system's reason.
    no = r.ctl("snapshot", "-o", os.path.join(r.out_dir, "snap.jpg"), prefix=inside, expect_ok=False)
    assert no.rc == 1 and f"cannot write {os.path.join(r.out_dir, 'snap.jpg')}: permission denied" in no.err, no


def test_crash_left_part_is_recovered_and_decodes(reeld):
    r = reeld("crash")
    r.ctl("start", "--name", "crashed")
    part = os.path.join(r.out_dir, "crashed.mp4.part")
    assert r.wait_notify_after(0, recording_for(3), 10)
    r.proc.kill()
    r.proc.wait()
    assert os.path.getsize(part) > 0
    r2 = reeld("crash2", **{"output-dir": r.out_dir})
    final = os.path.join(r.out_dir, "crashed.mp4")
    assert not os.path.exists(part), os.listdir(r.out_dir)
    assert os.path.isfile(final), os.listdir(r.out_dir)
    assert "recovered crash-left recording" in open(r2.log_path, errors="replace").read()
    dec = subprocess.run(["ffmpeg", "-v", "error", "-xerror", "-i", final, "-f", "null", "-"],
                         capture_output=True, text=True, timeout=60)
    assert dec.returncode == 0 and not dec.stderr.strip(), dec.stderr
    dur = float(subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", final],
                               capture_output=True, text=True, timeout=30).stdout)
    assert dur >= 2.0, f"recovered file is only {dur} s long"


def test_live_part_of_another_reeld_is_left_alone(reeld):
    """Two daemons sharing an output directory: the second one's start-up recovery must not
    take the first one's recording in progress for a crash-left file (it holds a flock)."""
    r = reeld("live")
    r.ctl("start", "--name", "live")
    part = os.path.join(r.out_dir, "live.mp4.part")
    assert r.wait_notify_after(0, recording_for(2), 10)
    r2 = reeld("live2", **{"output-dir": r.out_dir})
    assert os.path.isfile(part), os.listdir(r.out_dir)
    assert "being recorded by another process" in open(r2.log_path, errors="replace").read()
    assert not os.path.exists(os.path.join(r.out_dir, "live.mp4")), os.listdir(r.out_dir)
    r.ctl("stop")
    final = os.path.join(r.out_dir, "live.mp4")
    assert r.status()["lastFile"] == final
    dec = subprocess.run(["ffmpeg", "-v", "error", "-xerror", "-i", final, "-f", "null", "-"],
                         capture_output=True, text=True, timeout=60)
    assert dec.returncode == 0 and not dec.stderr.strip(), dec.stderr


def test_start_refused_below_min_free(reeld):
    r = reeld("nospace", **{"min-free-mb": "9999999"})
    c = r.ctl("start", expect_ok=False)
    assert c.rc == 1 and "below min_free_mb 9999999" in c.err, c


def test_on_finish_hook_runs_with_the_file(reeld):
    d = tempfile.mkdtemp(prefix="reel-hook-", dir="/tmp")
    hook = os.path.join(d, "hook.sh")
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    with open(hook, "w") as f:
        # Reports its argument through the FIFO (the test's event), then fails with status 3.
        f.write(f'#!/bin/sh\nprintf "%s\\n" "$1" > {fifo}\nexit 3\n')
    os.chmod(hook, 0o755)
    r = reeld("hook", **{"on-finish": hook})
    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        r.ctl("start", "--name", "hooked")
        final = r.ctl("stop").out.strip()
        ready, _, _ = select.select([rfd], [], [], 30)
        assert ready, "on_finish program not run within 30 s"
        got = b""
        while not got.endswith(b"\n"):
            select.select([rfd], [], [], 5)
            chunk = os.read(rfd, 4096)
            if not chunk:
                break
            got += chunk
        assert got.decode().strip() == final
    finally:
        os.close(rfd)
    # reeld waits for a running hook on SIGTERM, so its exit status is in the log once reeld exits.
    assert r.terminate() == 0
    log = open(r.log_path, errors="replace").read()
    assert re.search(r"on_finish: .*hook\.sh .*hooked\.mp4 exited with status 3", log), log


def test_stop_and_sigterm_at_once_run_the_hook_once_to_completion(reeld):
    """`reelctl stop` and SIGTERM at the same moment: the file is finished once and on_finish
    runs exactly once, to its end, before reeld exits (the hook takes a second, so an exit that
    did not wait for it, or a hook never started, shows as no line)."""
    d = tempfile.mkdtemp(prefix="reel-hookrace-", dir="/tmp")
    hook = os.path.join(d, "hook.sh")
    ran = os.path.join(d, "ran")
    with open(hook, "w") as f:
        f.write(f'#!/bin/sh\nsleep 1\nprintf "done %s\\n" "$1" >> {ran}\n')
    os.chmod(hook, 0o755)
    r = reeld("hookrace", **{"on-finish": hook})
    r.ctl("start", "--name", "raced")
    stop = subprocess.Popen([os.path.join(r.bindir, "reelctl"), "--socket", r.socket, "stop"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    r.proc.send_signal(signal.SIGTERM)
    assert r.terminate() == 0, r.log_tail()
    stop.communicate(timeout=30)
    assert os.path.exists(os.path.join(r.out_dir, "raced.mp4")), os.listdir(r.out_dir)
    lines = open(ran).read().splitlines() if os.path.exists(ran) else []
    assert lines == [f"done {os.path.join(r.out_dir, 'raced.mp4')}"], f"{lines}\n{r.log_tail()}"


def probe_size(path):
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height",
                          "-of", "csv=p=0", path], capture_output=True, text=True, timeout=30).stdout.strip()
    return out


def test_sighup_rereads_config_for_the_next_recording_only(reeld):
    d = tempfile.mkdtemp(prefix="reel-hup-", dir="/tmp")
    conf = os.path.join(d, "reeld.toml")
    with open(conf, "w") as f:
        f.write('size = "320x240"\n')
    r = reeld("hup", config=conf, size=False)
    r.ctl("start", "--name", "before")
    with open(conf, "w") as f:
        f.write('size = "480x270"\n')
    mark = len(r.notifications)
    r.proc.send_signal(signal.SIGHUP)
    assert r.wait_notify_after(mark, lambda l: l == "RELOADING=1", 5)
    assert r.wait_notify_after(mark + 1, lambda l: l == "READY=1", 5)
    first = r.ctl("stop").out.strip()
    r.ctl("start", "--name", "after")
    second = r.ctl("stop").out.strip()
    assert probe_size(first) == "320,240", "SIGHUP changed the recording in progress"
    assert probe_size(second) == "480,270", "SIGHUP did not apply to the next recording"
    # A bad edit is reported and the previous configuration kept.
    with open(conf, "w") as f:
        f.write('size = "480x270"\nbogus = 1\n')
    mark = len(r.notifications)
    r.proc.send_signal(signal.SIGHUP)
    assert r.wait_notify_after(mark + 1, lambda l: l == "READY=1", 5)
    log = open(r.log_path, errors="replace").read()
    assert f"configuration not reloaded, keeping the current one: {conf}:2: key 'bogus': unknown key" in log, log
    os.unlink(conf)
    os.rmdir(d)


def run_check(bindir, *args, env=None):
    return subprocess.run([os.path.join(bindir, "reeld"), "--check-config", *args], capture_output=True, text=True,
                          timeout=30, env=dict(os.environ, **(env or {})))


def test_check_config_precedence_and_errors(reel_bin_dir, tmp_path):
    repo_conf = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "config", "reeld.toml")
    ok = run_check(reel_bin_dir, "--config", repo_conf)
    assert ok.returncode == 0, ok.stderr
    assert re.search(r"^crf = 23  # .*reeld\.toml:\d+$", ok.stdout, re.M), ok.stdout
    env = run_check(reel_bin_dir, "--config", repo_conf, env={"REEL_CRF": "30"})
    assert "crf = 30  # environment REEL_CRF" in env.stdout
    flag = run_check(reel_bin_dir, "--config", repo_conf, "--crf", "31", env={"REEL_CRF": "30"})
    assert "crf = 31  # flag --crf" in flag.stdout
    (tmp_path / "empty.toml").write_text("")
    default = run_check(reel_bin_dir, "--config", str(tmp_path / "empty.toml"))
    assert "crf = 23  # default" in default.stdout, default
    for text, want in [('crf = 99\n', ":1: key 'crf': 99 is out of range (use 1 to 51"),
                       ('# c\nframerate = 30\n', ":2: key 'framerate': unknown key"),
                       ('crf = "23"\n', ":1: key 'crf': expected an integer (no quotes), found a string"),
                       ('video = "cam"\n', ":1: key 'video': unsupported --video 'cam'"),
                       ('size = [\n', ":1: ")]:
        p = tmp_path / "bad.toml"
        p.write_text(text)
        bad = run_check(reel_bin_dir, "--config", str(p))
        assert bad.returncode == 1 and f"{p}{want}" in bad.stderr, (text, bad.stderr)
    bad_env = run_check(reel_bin_dir, "--config", repo_conf, env={"REEL_CRF": "x"})
    assert bad_env.returncode == 1 and "REEL_CRF (key 'crf'): 'x' is not an integer" in bad_env.stderr


def test_check_config_refuses_hostile_files_without_crashing(reel_bin_dir, tmp_path):
    """A few cases of the hostile-config sweep (Tests/ReelConfigTests/HostileConfigTests.swift) through
    the real binary: each exits 1 with the file, line and what is wrong; none crashes."""
    cases = [(b"crf = 20\n[encoder]\npreset = \"fast\"\n",
              ":2: key 'encoder': reeld.toml has no tables, so 'preset' under [encoder] is not read"),
             (b"crf = 20\nsize = \"\xff\xfe\"\n", ":2: byte 0xFF is not UTF-8 text (save the file as UTF-8)"),
             (b"# toml++ (reeld's parser before TOMLDocument) aborted on this one\n[[[\n",
              ":2: expected a key (letters, digits, '_' and '-', or a quoted string), found '['"),
             (b"on_finish = [}\n", ":1: key 'on_finish': expected a value (a \"string\", a number, true/false, a date, [an array] or {a table}), found '}'"),
             (b"fps = \"1/9223372036854775807\"\n", ":1: key 'fps': '1/9223372036854775807' is not N or N/D from 1 to 240")]
    for i, (data, want) in enumerate(cases):
        p = tmp_path / f"hostile{i}.toml"
        p.write_bytes(data)
        bad = run_check(reel_bin_dir, "--config", str(p))
        assert bad.returncode == 1 and f"{p}{want}" in bad.stderr, (data, bad.returncode, bad.stderr[-2000:])
    # The same value through a flag: refused, naming the flag.
    flag = run_check(reel_bin_dir, "--config", "/dev/null", "--fps", "1/9223372036854775807")
    assert flag.returncode == 1 and "invalid --fps: '1/9223372036854775807' is not N or N/D from 1 to 240" in flag.stderr, flag.stderr


def test_recording_finishes_cleanly_when_free_space_runs_low(reeld):
    mnt = tempfile.mkdtemp(prefix="reel-tmpfs-", dir="/tmp")
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", mnt], capture_output=True, text=True)
    if m.returncode != 0:
        os.rmdir(mnt)
        pytest.skip(f"cannot mount a small tmpfs to run out of space in ({m.stderr.strip()}); needs root")
    try:
        r = reeld("lowspace", **{"output-dir": mnt, "min-free-mb": "20"})
        r.ctl("start", "--name", "short")
        assert r.wait_notify_after(0, recording_for(1), 10)
        st = os.statvfs(mnt)
        with open(os.path.join(mnt, "filler"), "wb") as f:
            f.truncate(0)
            f.write(b"\0" * (st.f_bavail * st.f_frsize - 15_000_000))  # leave 15 MB < min_free_mb
        line = r.wait_notify_after(0, lambda l: l.startswith("STATUS=idle; last error: free space in"), 10)
        assert line and "below min_free_mb 20" in line, r.notifications
        final = os.path.join(mnt, "short.mp4")
        assert os.path.isfile(final) and not os.path.exists(final + ".part"), os.listdir(mnt)
        dec = subprocess.run(["ffmpeg", "-v", "error", "-i", final, "-f", "null", "-"], capture_output=True, text=True, timeout=60)
        assert dec.returncode == 0 and not dec.stderr.strip(), dec.stderr
        assert r.status()["state"] == "idle"
        r.terminate()
    finally:
        subprocess.run(["umount", "-l", mnt])
        os.rmdir(mnt)


def test_activation_with_a_socket_that_does_not_listen_is_a_clear_error(reel_bin_dir, tmp_path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # bound but not listening
    s.bind(str(tmp_path / "x.sock"))
    try:
        p = subprocess.run(["/bin/sh", "-c", 'LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@"',
                            os.path.join(reel_bin_dir, "reeld"), "--output-dir", str(tmp_path / "out")],
                           env=dict(os.environ, LISTEN_FDS="1", REEL_CONFIG="/dev/null"), pass_fds=(3,),
                           preexec_fn=lambda: os.dup2(s.fileno(), 3), capture_output=True, text=True, timeout=30)
    finally:
        s.close()
    assert p.returncode == 1, p
    assert "inherited fd 3 is not a listening Unix stream socket (not listening): check ListenStream= in reeld.socket" in p.stderr, p.stderr

"""The outbox (issue 26): every finished recording, however it was finished (stop, the length cap,
start-up recovery after kill -9, a crash between the rename and the link), gets a hard link
OUTBOX/NAME.mp4 (the same inode) before on_finish runs: the hook below checks it. An outbox on
another file system is refused at start with its error; a link planted at OUTBOX/NAME.mp4 is never
followed or replaced. keep_free_mb, on a small tmpfs in a private mount namespace, deletes only
uploaded recordings (link gone), oldest first, never the one waiting nor the one in progress.

reeld waits for running on_finish programs when it stops (SIGTERM), so once `terminate()`
returned every hook it started has written its line."""

import os
import shutil
import subprocess
import tempfile
import time

import pytest
from reel_harness import Reeld, recording_for  # scripts/, on sys.path through conftest.py

HOOK = """#!/bin/sh
name=$(basename "$1")
if [ "$(stat -c %d:%i "$1")" = "$(stat -c %d:%i "{outbox}/$name" 2>/dev/null)" ]; then l=linked; else l=unlinked; fi
printf '%s %s recovered=%s by=%s\\n' "$1" "$l" "$REEL_RECOVERED" "$REEL_FINISHED_BY" >> {ran}
"""


def make_outbox(prefix="reel-outbox-"):
    """An outbox beside reeld's temporary directories (/tmp: one file system) and a hook that
    says, for each file it is given, whether OUTBOX/NAME is that very file."""
    d = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    outbox, hook, ran = os.path.join(d, "outbox"), os.path.join(d, "hook.sh"), os.path.join(d, "ran")
    with open(hook, "w") as f:
        f.write(HOOK.format(outbox=outbox, ran=ran))
    os.chmod(hook, 0o755)
    return d, outbox, hook, ran


def lines(ran):
    return open(ran).read().splitlines() if os.path.exists(ran) else []


def same_file(a, b):
    sa, sb = os.lstat(a), os.lstat(b)
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def test_a_stopped_recording_is_linked_before_on_finish_and_counted(reeld):
    d, outbox, hook, ran = make_outbox()
    metrics = os.path.join(d, "reel.prom")
    r = reeld("outbox-stop", **{"on-finish": hook, "outbox-dir": outbox, "metrics-file": metrics})
    assert os.path.isdir(outbox), "reeld did not create the outbox"
    r.ctl("start", "--name", "stopped")
    assert r.wait_notify_after(0, recording_for(1), 10)
    final = r.ctl("stop").out.strip()
    link = os.path.join(outbox, "stopped.mp4")
    assert same_file(final, link) and os.lstat(final).st_nlink == 2
    # The metrics file, rewritten every second, counts it.
    deadline, text = time.monotonic() + 10, ""
    while time.monotonic() < deadline and "reel_outbox_files 1\n" not in text:
        text = open(metrics).read() if os.path.exists(metrics) else ""
        time.sleep(0.2)
    assert "reel_outbox_files 1\n" in text, text
    assert f"reel_outbox_bytes {os.path.getsize(final)}\n" in text, text
    assert "reel_outbox_oldest_age_seconds " in text, text
    assert r.terminate() == 0, r.log_tail()
    assert lines(ran) == [f"{final} linked recovered=0 by=stop"], f"{lines(ran)}\n{r.log_tail()}"
    assert not [n for n in os.listdir(r.out_dir) if n.endswith(".handoff")], os.listdir(r.out_dir)


def test_a_capped_recording_is_linked_before_on_finish(reeld):
    d, outbox, hook, ran = make_outbox()
    r = reeld("outbox-cap", **{"on-finish": hook, "outbox-dir": outbox})
    n = len(r.notifications)
    r.ctl("start", "--name", "capped", "--max-duration", "2")
    assert r.wait_notify_after(n, lambda l: l.startswith("STATUS=recording"), 10), r.notifications
    n = len(r.notifications)
    assert r.wait_notify_after(n, lambda l: l.startswith("STATUS=idle"), 20), r.notifications
    assert r.terminate() == 0, r.log_tail()
    final = os.path.join(r.out_dir, "capped.mp4")
    assert same_file(final, os.path.join(outbox, "capped.mp4"))
    assert lines(ran) == [f"{final} linked recovered=0 by=cap"], f"{lines(ran)}\n{r.log_tail()}"


def test_a_recording_recovered_after_kill_9_is_linked_before_on_finish(reeld):
    d, outbox, hook, ran = make_outbox()
    r = reeld("outbox-crash", **{"on-finish": hook, "outbox-dir": outbox})
    r.ctl("start", "--name", "crashed")
    assert r.wait_notify_after(0, recording_for(2), 10)
    r.proc.kill()
    r.proc.wait()
    assert os.listdir(outbox) == [], "a recording in progress was linked"
    r2 = reeld("outbox-crash2", **{"output-dir": r.out_dir, "on-finish": hook, "outbox-dir": outbox})
    r2.ctl("status")
    assert r2.terminate() == 0, r2.log_tail()
    final = os.path.join(r.out_dir, "crashed.mp4")
    assert same_file(final, os.path.join(outbox, "crashed.mp4"))
    assert lines(ran) == [f"{final} linked recovered=1 by=recovery"], f"{lines(ran)}\n{r2.log_tail()}"


@pytest.mark.parametrize("step", ["rename", "link"])
def test_a_crash_between_the_rename_and_on_finish_still_reaches_the_outbox_once(reeld, step):
    """REEL_TEST_HANDOFF_STOP_AFTER: reeld dies (_exit 99) right after the rename (before the
    link) or right after the link (before the marker says so). The next start links the file (or
    finds it linked: no error), then on_finish runs once and sees the link; a third start does
    nothing more."""
    d, outbox, hook, ran = make_outbox()
    r = reeld(f"outbox-kill-{step}", _env={"REEL_TEST_HANDOFF_STOP_AFTER": step}, **{"on-finish": hook, "outbox-dir": outbox})
    r.ctl("start", "--name", "interrupted")
    assert r.wait_notify_after(0, recording_for(1), 10)
    r.ctl("stop", expect_ok=False)
    assert r.proc.wait(30) == 99, r.log_tail()
    final, link = os.path.join(r.out_dir, "interrupted.mp4"), os.path.join(outbox, "interrupted.mp4")
    assert os.path.isfile(final) and os.path.exists(link) == (step == "link"), (os.listdir(r.out_dir), os.listdir(outbox))
    assert lines(ran) == []
    r2 = reeld(f"outbox-kill-{step}2", **{"output-dir": r.out_dir, "on-finish": hook, "outbox-dir": outbox})
    r2.ctl("status")
    assert r2.terminate() == 0, r2.log_tail()
    assert same_file(final, link)
    assert lines(ran) == [f"{final} linked recovered=1 by=stop"], f"{lines(ran)}\n{r2.log_tail()}"
    log = open(r2.log_path).read()
    assert "not queued for upload" not in log, r2.log_tail()
    r3 = reeld(f"outbox-kill-{step}3", **{"output-dir": r.out_dir, "on-finish": hook, "outbox-dir": outbox})
    r3.ctl("status")
    assert r3.terminate() == 0, r3.log_tail()
    assert len(lines(ran)) == 1, lines(ran)
    assert not [n for n in os.listdir(r.out_dir) if n.endswith(".handoff")], os.listdir(r.out_dir)


def test_a_planted_symlink_in_the_outbox_is_neither_followed_nor_replaced(reeld):
    """Planted before `start`, the name is refused (its link would collide); planted while the
    recording runs, the link is refused and the recording still finishes."""
    d, outbox, hook, ran = make_outbox()
    os.mkdir(outbox)
    target = os.path.join(d, "target.mp4")
    os.symlink(target, os.path.join(outbox, "early.mp4"))
    r = reeld("outbox-planted", **{"on-finish": hook, "outbox-dir": outbox})
    c = r.ctl("start", "--name", "early", expect_ok=False)
    assert c.rc != 0 and f"{outbox}/early.mp4" in c.err and "waiting for upload" in c.err, c
    r.ctl("start", "--name", "planted")
    os.symlink(target, os.path.join(outbox, "planted.mp4"))
    assert r.wait_notify_after(0, recording_for(1), 10)
    final = r.ctl("stop").out.strip()
    assert r.terminate() == 0, r.log_tail()
    assert os.readlink(os.path.join(outbox, "planted.mp4")) == target
    assert not os.path.lexists(target), "the planted link was followed"
    assert os.path.isfile(final) and os.lstat(final).st_nlink == 1
    # The recording still finished and reached on_finish; the failure is logged with the fix.
    assert lines(ran) == [f"{final} unlinked recovered=0 by=stop"], f"{lines(ran)}\n{r.log_tail()}"
    log = open(r.log_path).read()
    assert "symbolic link" in log and "not queued for upload" in log and f"ln {final}" in log, r.log_tail()
    # Held by .planted.mp4.unqueued (keep_free_mb leaves it alone); with the entry gone, the next
    # start links it and removes the marker.
    unqueued = os.path.join(r.out_dir, ".planted.mp4.unqueued")
    assert os.path.isfile(unqueued), os.listdir(r.out_dir)
    os.unlink(os.path.join(outbox, "planted.mp4"))
    r2 = reeld("outbox-planted2", **{"output-dir": r.out_dir, "outbox-dir": outbox})
    r2.ctl("status")
    assert r2.terminate() == 0, r2.log_tail()
    assert same_file(final, os.path.join(outbox, "planted.mp4")) and not os.path.exists(unqueued), r2.log_tail()


def run_reeld_expecting_refusal(reel_bin_dir, *args):
    d = tempfile.mkdtemp(prefix="reel-outbox-refused-", dir="/tmp")
    argv = [os.path.join(reel_bin_dir, "reeld"), "--socket", os.path.join(d, "ctl.sock"),
            "--video", "test", "--audio", "test", *args]
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, REEL_CONFIG="/dev/null"))
    shutil.rmtree(d, ignore_errors=True)
    return p


def test_an_outbox_on_another_file_system_is_refused_at_start(reel_bin_dir):
    out = tempfile.mkdtemp(prefix="reel-outbox-out-", dir="/tmp")
    if not os.path.isdir("/dev/shm") or os.stat("/dev/shm").st_dev == os.stat(out).st_dev:
        pytest.skip("/dev/shm is on the file system of /tmp here: no second file system to test with")
    other = tempfile.mkdtemp(prefix="reel-outbox-shm-", dir="/dev/shm")
    try:
        p = run_reeld_expecting_refusal(reel_bin_dir, "--output-dir", out, "--outbox-dir", other)
        assert p.returncode == 1, (p.returncode, p.stderr)
        assert "--outbox-dir" not in p.stderr or other in p.stderr
        assert other in p.stderr and out in p.stderr and "another file system" in p.stderr, p.stderr
        assert not os.listdir(other)
        # keep_free_mb without an outbox: refused, naming both settings.
        p = run_reeld_expecting_refusal(reel_bin_dir, "--output-dir", out, "--keep-free-mb", "100")
        assert p.returncode == 1 and "keep_free_mb" in p.stderr and "outbox_dir" in p.stderr, p.stderr
    finally:
        shutil.rmtree(other, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)


def test_the_package_makes_the_outbox_group_writable_beside_the_recordings(tmp_path):
    if not shutil.which("systemd-tmpfiles"):
        pytest.fail("systemd-tmpfiles not found: run 'make deps'")
    units = os.path.join(os.path.dirname(__file__), "..", "..", "systemd")
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    for f in ("passwd", "group"):
        (root / "etc" / f).write_text("reel:x:990:990::/var/lib/reel:/usr/sbin/nologin\n" if f == "passwd" else "reel:x:990:\n")
    p = subprocess.run(["systemd-tmpfiles", f"--root={root}", "--create", os.path.join(units, "reel.tmpfiles")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    st = os.stat(root / "var" / "lib" / "reel" / "outbox")
    assert st.st_mode & 0o7777 == 0o2770 and st.st_gid == 990, oct(st.st_mode)
    assert "--outbox-dir /var/lib/reel/outbox" in open(os.path.join(units, "reel-web.service")).read()


# --- a small tmpfs: a full disk, keep_free_mb ---------------------------------------------------------------

MB = 1_000_000
WRAPPER = """#!/bin/sh
# reeld in a private mount namespace, on a tmpfs of its own (size {size}) at its --output-dir,
# seeded from {seed} (cp -a keeps the outbox's hard link), with the outbox inside it.
out=; prev=
for a in "$@"; do [ "$prev" = "--output-dir" ] && out=$a; prev=$a; done
export REEL_OUTBOX_DIR="$out/outbox"
exec unshare -m --propagation private sh -c \
    'mount -t tmpfs -o size={size} reeltest "$0" && cp -a {seed}/. "$0"/ && exec "$@"' "$out" {real} "$@"
"""


def in_ns(r, path):
    """`path` as reeld sees it, in its own mount namespace."""
    return f"/proc/{r.proc.pid}/root{path}"


def need_private_tmpfs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs in a private mount namespace needs root here")
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            f"mount -t tmpfs -o size=1m reelprobe {tmp_path}"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a private mount namespace: {probe.stderr.strip()}")


def tmpfs_bindir(tmp_path, reel_bin_dir, seed, size):
    """A directory with reelctl and a `reeld` that runs the real one on a tmpfs (WRAPPER)."""
    bindir = tmp_path / "bin"
    os.mkdir(bindir)
    real = os.path.abspath(reel_bin_dir)
    os.symlink(os.path.join(real, "reelctl"), bindir / "reelctl")
    (bindir / "reeld").write_text(WRAPPER.format(seed=seed, size=size, real=os.path.join(real, "reeld")))
    os.chmod(bindir / "reeld", 0o755)
    return str(bindir)


def test_a_recording_cut_short_by_a_full_disk_is_linked_before_on_finish(reel_bin_dir, tmp_path):
    """min_free_mb 0 on a 2 MB tmpfs: the write fails (ENOSPC), the file is cut back to its last
    complete fragment, renamed, linked into the outbox on the same tmpfs, then handed to on_finish
    as write-failed (the hook, inside reeld's namespace, checks the link)."""
    need_private_tmpfs(tmp_path)
    d, _, hook, ran = make_outbox("reel-outbox-full-")
    with open(hook, "w") as f:
        f.write(HOOK.format(outbox='$(dirname "$1")/outbox', ran=ran))
    seed = tmp_path / "seed"
    os.mkdir(seed)
    r = Reeld(tmpfs_bindir(tmp_path, reel_bin_dir, seed, 2 * MB),
              {"min-free-mb": "0", "on-finish": hook, "bitrate": "4000", "size": "1280x720", "preset": "ultrafast"}, "outbox-full")
    try:
        n = len(r.notifications)
        r.ctl("start", "--name", "full")
        assert r.wait_notify_after(n, lambda l: l.startswith("STATUS=recording"), 10), r.notifications
        assert r.wait_notify_after(n, lambda l: l.startswith("STATUS=idle"), 60), (r.notifications, r.log_tail())
        assert r.terminate() == 0, r.log_tail()
        final = os.path.join(r.out_dir, "full.mp4")
        assert lines(ran) == [f"{final} linked recovered=0 by=write-failed"], f"{lines(ran)}\n{r.log_tail()}"
    finally:
        r.terminate()
        print(r.log_tail())
        r.close()


def test_keep_free_deletes_only_uploaded_recordings_oldest_first(reeld, reel_bin_dir, tmp_path):
    need_private_tmpfs(tmp_path)
    rate = {"bitrate": "4000", "size": "1280x720", "preset": "ultrafast"}
    # 1. The seed: four finished recordings made through a real outbox, then "uploaded" (links
    #    removed) for u1..u3; w1 still waits and is the oldest of them; u1 < u2 < u3.
    d, outbox, hook, ran = make_outbox("reel-keepfree-")
    r = reeld("keepfree-seed", **{"outbox-dir": outbox}, **rate)
    for name in ("w1", "u1", "u2", "u3"):
        n = len(r.notifications)
        r.ctl("start", "--name", name, "--max-duration", "2")
        assert r.wait_notify_after(n, lambda l: l.startswith("STATUS=recording"), 10), r.notifications
        assert r.wait_notify_after(n, lambda l: l.startswith("STATUS=idle"), 20), r.notifications
    assert r.terminate() == 0, r.log_tail()
    seed = tmp_path / "seed"
    os.mkdir(seed)
    names = ("w1", "u1", "u2", "u3")
    for i, name in enumerate(names):
        shutil.copy(os.path.join(r.out_dir, f"{name}.mp4"), seed / f"{name}.mp4")
        os.utime(seed / f"{name}.mp4", (1_000_000 + i * 100, 1_000_000 + i * 100))
    os.mkdir(seed / "outbox")
    os.link(seed / "w1.mp4", seed / "outbox" / "w1.mp4")
    sizes = {n: os.path.getsize(seed / f"{n}.mp4") for n in names}
    assert min(sizes.values()) > 300_000, f"the seed recordings are too small to measure free space with: {sizes}"
    # A foreign .mp4 (no Reel signature), older than all: never deleted.
    (seed / "foreign.mp4").write_bytes(b"\0\0\0\x14ftypisom\0\0\x02\0isom" + b"x" * 300_000)
    os.utime(seed / "foreign.mp4", (1, 1))

    # 2. reeld on a tmpfs with room for the seed plus a little more than keep_free_mb: the
    #    recording in progress eats the rest, so the uploaded ones go one by one, oldest first;
    #    once none is left, min_free_mb finishes the recording.
    biggest = max(sizes.values())
    min_free_mb = 2  # room for the last second and the finish after min_free_mb's stop
    keep_mb = min_free_mb + 2 * biggest // MB + 1
    size = sum(sizes.values()) + 300_000 + keep_mb * MB + biggest + 1_000_000
    r2 = Reeld(tmpfs_bindir(tmp_path, reel_bin_dir, seed, size), {"keep-free-mb": str(keep_mb), "min-free-mb": str(min_free_mb), **rate}, "keepfree")
    try:
        seen = in_ns(r2, r2.out_dir)
        assert sorted(os.listdir(seen)) == ["foreign.mp4", "outbox", "u1.mp4", "u2.mp4", "u3.mp4", "w1.mp4"], os.listdir(seen)
        assert os.listdir(r2.out_dir) == [], "the tmpfs is visible outside reeld's namespace"
        log = open(r2.log_path).read()
        assert "keep_free_mb: deleted" not in log, "deleted while there was room"
        n = len(r2.notifications)
        r2.ctl("start", "--name", "live")
        assert r2.wait_notify_after(n, lambda l: l.startswith("STATUS=recording"), 10), r2.notifications
        n = len(r2.notifications)
        assert r2.wait_notify_after(n, lambda l: l.startswith("STATUS=idle"), 120), (r2.notifications, r2.log_tail())
        log = open(r2.log_path).read()
        deleted = [l.split("keep_free_mb: deleted ")[1].split(" ")[0] for l in log.splitlines() if "keep_free_mb: deleted " in l]
        assert deleted == [f"{r2.out_dir}/u1.mp4", f"{r2.out_dir}/u2.mp4", f"{r2.out_dir}/u3.mp4"], r2.log_tail()
        assert "no recording has left the outbox" in log, r2.log_tail()
        left = sorted(os.listdir(seen))
        assert left == ["foreign.mp4", "live.mp4", "outbox", "w1.mp4"], left
        assert same_file(f"{seen}/w1.mp4", f"{seen}/outbox/w1.mp4")
        assert same_file(f"{seen}/live.mp4", f"{seen}/outbox/live.mp4")
        # All three went while "live" was recorded, before min_free_mb finished it.
        started, guard = log.index("recording started"), log.index("below min_free_mb")
        assert all(started < log.index(f"keep_free_mb: deleted {p}") < guard for p in deleted), r2.log_tail()
        assert "no space left on device" not in log, r2.log_tail()
    finally:
        r2.terminate()
        print(r2.log_tail())
        r2.close()

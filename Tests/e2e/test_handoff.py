"""The hand-off of a finished file (issue 22, item 5): whichever way a recording was finished
(stop, the length cap, start-up recovery after a crash), its file reaches on_finish exactly once,
also across a crash between the rename and the hook, and the hook's environment says how
(REEL_FINISHED_BY) and whether reeld handed it on at a later start (REEL_RECOVERED=1).

reeld waits for running on_finish programs when it stops (SIGTERM), so once `terminate()`
returned every hook it started has written its line: that is the event the tests wait on."""

import os
import select
import signal
import subprocess
import tempfile
from reel_harness import recording_for  # scripts/, on sys.path through conftest.py

HOOK = """#!/bin/sh
printf '%s recovered=%s by=%s\\n' "$1" "$REEL_RECOVERED" "$REEL_FINISHED_BY" >> {ran}
"""


def make_hook():
    d = tempfile.mkdtemp(prefix="reel-handoff-", dir="/tmp")
    hook, ran = os.path.join(d, "hook.sh"), os.path.join(d, "ran")
    with open(hook, "w") as f:
        f.write(HOOK.format(ran=ran))
    os.chmod(hook, 0o755)
    return hook, ran


def lines(ran):
    return open(ran).read().splitlines() if os.path.exists(ran) else []


def markers(out_dir):
    return sorted(n for n in os.listdir(out_dir) if n.endswith(".handoff"))


def test_a_stopped_recording_is_handed_on_once_and_says_how(reeld):
    hook, ran = make_hook()
    r = reeld("handoff-stop", **{"on-finish": hook})
    r.ctl("start", "--name", "stopped")
    assert r.wait_notify_after(0, recording_for(1), 10)
    final = r.ctl("stop").out.strip()
    assert r.terminate() == 0, r.log_tail()
    assert lines(ran) == [f"{final} recovered=0 by=stop"], f"{lines(ran)}\n{r.log_tail()}"
    assert markers(r.out_dir) == [], os.listdir(r.out_dir)


def test_the_length_cap_hands_the_file_on_as_cap(reeld):
    hook, ran = make_hook()
    r = reeld("handoff-cap", **{"on-finish": hook})
    n = len(r.notifications)
    r.ctl("start", "--name", "capped", "--max-duration", "2")
    final = os.path.join(r.out_dir, "capped.mp4")
    assert r.wait_notify_after(n, lambda l: l.startswith("STATUS=recording"), 10), r.notifications
    n = len(r.notifications)
    assert r.wait_notify_after(n, lambda l: l.startswith("STATUS=idle"), 20), r.notifications
    assert r.terminate() == 0, r.log_tail()
    assert lines(ran) == [f"{final} recovered=0 by=cap"], f"{lines(ran)}\n{r.log_tail()}"


def test_a_recording_recovered_after_a_crash_is_handed_on_once(reeld):
    """kill -9 mid-recording: the next start recovers the .part and hands the file on, once,
    saying it was recovered; a third start does not hand it on again."""
    hook, ran = make_hook()
    r = reeld("handoff-crash", **{"on-finish": hook})
    r.ctl("start", "--name", "crashed")
    assert r.wait_notify_after(0, recording_for(2), 10)
    r.proc.kill()
    r.proc.wait()
    final = os.path.join(r.out_dir, "crashed.mp4")
    r2 = reeld("handoff-crash2", **{"output-dir": r.out_dir, "on-finish": hook})
    # A request answered: reeld's signal handling is armed (a SIGTERM at the instant of READY=1
    # can be lost: libdispatch arms its signal source asynchronously).
    r2.ctl("status")
    assert r2.terminate() == 0, r2.log_tail()
    assert os.path.isfile(final), os.listdir(r.out_dir)
    assert lines(ran) == [f"{final} recovered=1 by=recovery"], f"{lines(ran)}\n{r2.log_tail()}"
    r3 = reeld("handoff-crash3", **{"output-dir": r.out_dir, "on-finish": hook})
    r3.ctl("status")
    assert r3.terminate() == 0, r3.log_tail()
    assert lines(ran) == [f"{final} recovered=1 by=recovery"], f"{lines(ran)}\n{r3.log_tail()}"
    assert markers(r.out_dir) == [], os.listdir(r.out_dir)


def test_a_crash_between_the_rename_and_the_hook_hands_the_file_on_at_the_next_start(reeld):
    """REEL_TEST_HANDOFF_STOP_AFTER=rename: reeld dies (_exit 99) right after the finished file got
    its name and the directory was synced, before on_finish: the next start runs the hook for it,
    once, with REEL_RECOVERED=1 and how it was finished."""
    hook, ran = make_hook()
    r = reeld("handoff-kill", _env={"REEL_TEST_HANDOFF_STOP_AFTER": "rename"}, **{"on-finish": hook})
    r.ctl("start", "--name", "interrupted")
    assert r.wait_notify_after(0, recording_for(1), 10)
    r.ctl("stop", expect_ok=False)
    assert r.proc.wait(30) == 99, r.log_tail()
    final = os.path.join(r.out_dir, "interrupted.mp4")
    assert os.path.isfile(final) and not os.path.exists(final + ".part"), os.listdir(r.out_dir)
    assert lines(ran) == [], lines(ran)
    assert markers(r.out_dir) == [".interrupted.mp4.handoff"], os.listdir(r.out_dir)
    r2 = reeld("handoff-kill2", **{"output-dir": r.out_dir, "on-finish": hook})
    r2.ctl("status")
    assert r2.terminate() == 0, r2.log_tail()
    assert lines(ran) == [f"{final} recovered=1 by=stop"], f"{lines(ran)}\n{r2.log_tail()}"
    r3 = reeld("handoff-kill3", **{"output-dir": r.out_dir, "on-finish": hook})
    r3.ctl("status")
    assert r3.terminate() == 0, r3.log_tail()
    assert lines(ran) == [f"{final} recovered=1 by=stop"], f"{lines(ran)}\n{r3.log_tail()}"
    assert markers(r.out_dir) == [], os.listdir(r.out_dir)


def test_the_hook_timeout_kills_its_whole_process_group(reeld):
    """A hook that starts a grandchild which ignores its parent's death (and SIGTERM, SIGHUP) and
    waits for it: at on_finish_timeout the grandchild must be gone with the hook (today only the
    hook was killed, and its grandchild lived on)."""
    d = tempfile.mkdtemp(prefix="reel-hookgroup-", dir="/tmp")
    hook, fifo = os.path.join(d, "hook.sh"), os.path.join(d, "fifo")
    os.mkfifo(fifo)
    with open(hook, "w") as f:
        f.write(f"#!/bin/sh\ntrap '' HUP TERM\nsleep 600 &\necho $! > {fifo}\nwait\n")
    os.chmod(hook, 0o755)
    r = reeld("hook-group", **{"on-finish": hook, "on-finish-timeout": "1"})
    rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        r.ctl("start", "--name", "grouped")
        assert r.wait_notify_after(0, recording_for(1), 10)
        r.ctl("stop")
        got = b""
        while not got.endswith(b"\n"):
            assert select.select([rfd], [], [], 30)[0], "on_finish program not run within 30 s"
            chunk = os.read(rfd, 64)
            assert chunk, got
            got += chunk
    finally:
        os.close(rfd)
    grandchild = int(got)
    pidfd = os.pidfd_open(grandchild)  # polls readable once the process has ended
    try:
        ended = select.select([pidfd], [], [], 15)[0]
        assert ended, f"the hook's grandchild {grandchild} outlived on_finish_timeout (1 s) by 14 s\n{r.log_tail()}"
    finally:
        os.close(pidfd)
        try:
            os.kill(grandchild, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert "still running after 1 s; killing it and its process group" in open(r.log_path, errors="replace").read()


def test_the_hook_does_not_inherit_reelds_scheduling_policy_or_nice(reeld):
    """reeld started at SCHED_BATCH (and, as root, at nice -5, as under the unit's Nice=-10):
    its on_finish program runs at SCHED_OTHER and nice 0, read from the hook's /proc/PID/stat."""
    d = tempfile.mkdtemp(prefix="reel-hookprio-", dir="/tmp")
    hook, stat = os.path.join(d, "hook.sh"), os.path.join(d, "stat")
    with open(hook, "w") as f:
        f.write(f"#!/bin/sh\ncat /proc/$$/stat > {stat}\n")
    os.chmod(hook, 0o755)
    root = os.geteuid() == 0
    # This thread's policy and nice are what the reeld it forks inherits; put back right after.
    policy, nice = os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0)
    os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    if root:
        os.setpriority(os.PRIO_PROCESS, 0, -5)
    try:
        r = reeld("hook-prio", **{"on-finish": hook})
    finally:
        os.sched_setscheduler(0, policy, os.sched_param(0))
        if root:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
    fields = open(f"/proc/{r.proc.pid}/stat").read().rsplit(")", 1)[1].split()
    assert int(fields[38]) == os.SCHED_BATCH, f"reeld is not at SCHED_BATCH: nothing is tested ({fields})"
    if root:
        assert int(fields[16]) == -5, f"reeld is not at nice -5: nothing is tested ({fields})"
    r.ctl("start", "--name", "prio")
    assert r.wait_notify_after(0, recording_for(1), 10)
    r.ctl("stop")
    assert r.terminate() == 0, r.log_tail()
    # After ")": field 3 (state) first; nice is field 19, the policy field 41.
    fields = open(stat).read().rsplit(")", 1)[1].split()
    assert int(fields[38]) == os.SCHED_OTHER, f"the hook runs at policy {fields[38]}, not SCHED_OTHER (0)"
    if root:
        assert int(fields[16]) == 0, f"the hook runs at nice {fields[16]}, not 0"


def test_a_one_shot_recording_leaves_no_marker(reel_bin_dir, tmp_path):
    """`reeld record` (no on_finish there) goes through the same hand-off: the file, nothing else."""
    out = tmp_path / "one.mp4"
    p = subprocess.run([os.path.join(reel_bin_dir, "reeld"), "record", "--output", str(out), "--video", "test",
                        "--audio", "test", "--size", "320x180", "--duration", "1"],
                       env=dict(os.environ, REEL_CONFIG="/dev/null"), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(out), p.stdout
    assert sorted(os.listdir(tmp_path)) == ["one.mp4"], os.listdir(tmp_path)

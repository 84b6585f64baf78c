"""reeld's threads as the kernel shows them (`top -H`, `perf`, /proc): each of Reel's own carries
its name, and only an unpaced run's sources and AAC encoder run at idle priority (SCHED_IDLE), in
the CPU time x264's threads leave. A live (paced) run's never do: under load an idle thread can
wait for seconds, and a live source or encoder that waits drops samples."""

import os
import time

import pytest

SCHED_OTHER, SCHED_IDLE = 0, 5
OURS = {"reel-pipeline", "reel-aac", "reel-video-test", "reel-audio-test", "reel-control-io",
        "reel-supervisor", "reel-standby", "reel-fsync"}


def threads(pid):
    """{comm: {scheduling policy, ...}} of the process's threads."""
    seen = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                # Field 41 is the policy; the fields after "(comm)" start at field 3.
                policy = int(f.read().rsplit(")", 1)[1].split()[41 - 3])
        except FileNotFoundError:
            continue  # a thread that has just exited
        seen.setdefault(comm, set()).add(policy)
    return seen


@pytest.mark.parametrize("unpaced", [False, True], ids=["paced", "unpaced"])
def test_threads_are_named_and_only_an_unpaced_runs_helpers_wait_for_idle_cpu(reeld, unpaced):
    r = reeld("threads", unpaced=unpaced or None)
    r.ctl("start")
    # A thread names itself as it starts, and no event says when: poll /proc, with a deadline.
    deadline = time.monotonic() + 10
    while not OURS <= (seen := threads(r.proc.pid)).keys():
        assert time.monotonic() < deadline, f"threads named so far: {seen}"
        time.sleep(0.02)
    r.ctl("stop")
    idle = {comm for comm, policies in seen.items() if SCHED_IDLE in policies}
    assert idle == ({"reel-aac", "reel-video-test", "reel-audio-test"} if unpaced else set()), seen
    for comm in OURS - idle:
        assert seen[comm] == {SCHED_OTHER}, seen
    # The threads Reel does not name (the main thread, x264's) keep the process's name, never idle.
    assert seen.get("reeld") and SCHED_IDLE not in seen["reeld"], seen

#!/usr/bin/env python3
"""Pre-roll measurements for docs/PERFORMANCE.md (issue 25): reeld idle with standby and the
synthetic paced sources, per size and pre-roll S: its RSS once the pre-roll is full, its CPU
while idle over a window (utime+stime from /proc/PID/stat), and, with --catch-up, a start after
which status is polled until the pipeline has caught up with the live frames: the catch-up time
and the frames dropped.

    REEL_BIN_DIR=.build/release python3 scripts/preroll_bench.py --size 1280x720 --pre-roll 3 --cpu 60 --catch-up
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from reel_harness import Reeld  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1280x720")
    ap.add_argument("--fps", default="30")
    ap.add_argument("--pre-roll", default="0")
    ap.add_argument("--max-mb", default="1000")
    ap.add_argument("--cpu", type=float, default=0, help="seconds of idle CPU to measure")
    ap.add_argument("--catch-up", action="store_true")
    a = ap.parse_args()
    bindir = os.environ["REEL_BIN_DIR"]
    r = Reeld(bindir, {"size": a.size, "fps": a.fps, "standby": "true", "pre-roll": a.pre_roll,
                       "pre-roll-max-mb": a.max_mb}, "bench")
    out = {"size": a.size, "fps": a.fps, "preRoll": a.pre_roll}
    try:
        pid = r.proc.pid
        want = round(float(a.pre_roll) * 1e9)
        deadline = time.monotonic() + 60
        while True:
            st = r.status()
            if st["standby"] == "warm" and (want == 0 or st["preRollNs"] == want):
                break
            assert time.monotonic() < deadline, st
            time.sleep(0.2)
        time.sleep(1.0)
        out["rssMiB"] = round(rss_mib(pid), 1)
        if a.cpu:
            c0, t0 = cpu_s(pid), time.monotonic()
            time.sleep(a.cpu)
            c1, t1 = cpu_s(pid), time.monotonic()
            out["idleCpuPercent"] = round(100 * (c1 - c0) / (t1 - t0), 2)
            out["rssMiBAfter"] = round(rss_mib(pid), 1)
        if a.catch_up:
            reply = json.loads(r.ctl("start", "--json", "--name", "catchup").out)
            request = reply["startNs"] + reply["preRollNs"]
            caught = None
            worst = 0
            while time.monotonic() - request / 1e9 < 60:
                st = r.status()
                now = time.monotonic_ns()
                # Output reached against the live edge: the backlog still to encode.
                lag = (now - reply["startNs"]) - st["recordedNs"]
                worst = max(worst, lag)
                if caught is None and lag < 200_000_000 and st["recordedNs"] > 0:
                    caught = (now - request) / 1e9
                if caught is not None and now - request > (caught + 3) * 1e9:
                    break
                time.sleep(0.05)
            st = r.status()
            stop = r.ctl("stop")
            out.update(preRollGotNs=reply["preRollNs"], catchUpS=caught, maxBacklogS=round(worst / 1e9, 2),
                       droppedFrames=st["droppedFrames"], frames=st["frames"], file=stop.out.strip())
            out["dropLogLines"] = r.log_tail(400).count("video frame(s) dropped")
    finally:
        r.terminate()
        r.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""make soak: the long run of issue 6, not part of `make test` (it takes SOAK_SECONDS, 2 h).

The real reeld, paced, on the synthetic sources at 640x360 30 fps, 48 kHz, driven by reelctl:
start, then every SOAK_PAUSE_EVERY seconds (60) a pause of SOAK_PAUSE_FOR seconds (5), stop.
Passes when, measured on the result:
  - the file decodes clean (`ffmpeg -xerror`) and `reelctl verify` finds no defect;
  - it holds one segment per recorded span, each resume a jump of about the pause;
  - |A/V offset| of every flash/beep pair is at most 17 ms, the last ones included;
  - no frame was dropped (status droppedFrames 0, and verify saw no gap on the frame grid);
  - reeld's RSS at the end is at most 2 MiB above its RSS after the first minute.
Prints the figures (docs/RELIABILITY.md keeps them) and exits non-zero on a failure.

`make soak` runs it at nice -10, as reeld.service runs reeld (Nice=-10); the niceness is printed.

Environment: REEL_BIN_DIR (default .build/release), SOAK_SECONDS, SOAK_PAUSE_EVERY,
SOAK_PAUSE_FOR, SOAK_KEEP=1 keeps the recording and reeld's log.
"""

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from reel_harness import Reeld  # noqa: E402

SECONDS = int(os.environ.get("SOAK_SECONDS", "7200"))
EVERY = int(os.environ.get("SOAK_PAUSE_EVERY", "60"))
PAUSE = int(os.environ.get("SOAK_PAUSE_FOR", "5"))
MAX_OFFSET_MS = 17.0
MAX_RSS_GROWTH_KIB = 2048


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    bindir = os.environ.get("REEL_BIN_DIR", os.path.join(REPO, ".build", "release"))
    r = Reeld(bindir, {"size": "640x360", "fps": "30", "sample-rate": "48000"}, "soak")
    failures = []
    rss = []  # (elapsed s, KiB)
    try:
        t0 = time.monotonic()
        r.ctl("start", "--name", "soak")
        print(f"soak: {SECONDS} s paced 640x360 30 fps, pause {PAUSE} s every {EVERY} s; reeld pid {r.proc.pid}, "
              f"nice {os.getpriority(os.PRIO_PROCESS, r.proc.pid)}", flush=True)
        pauses = 0
        next_pause = EVERY
        while True:
            elapsed = time.monotonic() - t0
            if elapsed >= SECONDS:
                break
            rss.append((elapsed, rss_kib(r.proc.pid)))
            if elapsed >= next_pause and next_pause + PAUSE < SECONDS:
                r.ctl("pause")
                # The pause's length is a schedule, not a wait for an event: sleeping is the point.
                time.sleep(PAUSE)
                r.ctl("resume")
                pauses += 1
                next_pause += EVERY
                st = r.status()
                print(f"  {elapsed / 60:6.1f} min: RSS {rss[-1][1] / 1024:.1f} MiB, frames {st['frames']}, "
                      f"dropped {st['droppedFrames']}, segments {len(st['segments'])}", flush=True)
                continue
            time.sleep(min(10.0, max(0.1, next_pause - elapsed)))  # sampling period
        st = r.status()
        rss.append((time.monotonic() - t0, rss_kib(r.proc.pid)))
        r.ctl("stop")
        final = r.status()
        path = final["lastFile"]
    except Exception:
        print(r.log_tail(), file=sys.stderr)
        raise
    finally:
        r.terminate()

    dropped = st["droppedFrames"]  # the last status while recording (idle status has no counters)
    if dropped:
        failures.append(f"{dropped} frames dropped")
    after_minute = next((k for t, k in rss if t >= 60), rss[0][1])
    growth = rss[-1][1] - after_minute
    if growth > MAX_RSS_GROWTH_KIB:
        failures.append(f"RSS grew {growth} KiB after the first minute (limit {MAX_RSS_GROWTH_KIB})")

    xe = subprocess.run(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-f", "null", "-"],
                        capture_output=True, text=True)
    if xe.returncode != 0 or xe.stderr.strip():
        failures.append(f"ffmpeg -xerror: {xe.stderr.strip()[:500]}")
    v = subprocess.run([os.path.join(bindir, "reelctl"), "verify", "--json", path], capture_output=True, text=True)
    rep = json.loads(v.stdout)
    if rep["defects"]:
        failures.append(f"reelctl verify: {rep['defects'][:5]}")
    pairs = rep["sync"]["pairs"]
    worst = rep["sync"]["max_abs_offset_ms"]
    last = [p["offset_ms"] for p in pairs[-10:]]
    if worst is None or worst > MAX_OFFSET_MS:
        failures.append(f"max |A/V offset| {worst} ms (limit {MAX_OFFSET_MS})")
    segments = len(rep["segments"])
    if segments != pauses + 1:
        failures.append(f"{segments} segments for {pauses} pauses")

    print(f"\nsoak result ({SECONDS} s, {pauses} pauses): file {path}")
    print(f"  segments {segments}, flash/beep pairs {len(pairs)}, max |offset| {worst} ms, "
          f"last offsets {last} ms, drift {rep['sync'].get('offset_drift_ppm')} ppm")
    print(f"  frames {st['frames']}, dropped {dropped}, audio filled {st['audioFilledSamples']}; last error {final.get('lastError')}")
    print(f"  RSS after 1 min {after_minute / 1024:.2f} MiB, at the end {rss[-1][1] / 1024:.2f} MiB, "
          f"growth {growth / 1024:+.2f} MiB (limit +2)")
    if os.environ.get("SOAK_KEEP") != "1":
        r.close()
    else:
        print(f"  kept in {r.dir}")
    if failures:
        print("SOAK FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("soak passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

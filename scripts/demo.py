#!/usr/bin/env python3
"""make demo: run reeld on the synthetic sources, record a clip with two pauses through
reelctl, then print the file, its ffprobe summary and what the independent checker sees."""

import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from reel_harness import Reeld  # noqa: E402
import reel_verify  # noqa: E402


def main():
    bindir = os.environ.get("REEL_BIN_DIR") or os.path.join(REPO, ".build", "release")
    out_dir = os.path.join(REPO, "demo-out")
    os.makedirs(out_dir, exist_ok=True)
    r = Reeld(bindir, {}, "demo")
    try:
        print(f"reeld is listening on {r.socket} (synthetic sources: 640x360 30 fps, 48 kHz)")
        part = r.ctl("start", "--name", "demo").out.strip()
        print(f"recording {part}")
        for label, seconds in (("record", 3.0), ("pause", 1.0), ("record", 2.0), ("pause", 1.5), ("record", 2.0)):
            if label == "pause":
                r.ctl("pause")
            elif r.ctl_log[-1].args[0] == "pause":
                r.ctl("resume")
            print(f"  {label} {seconds:.1f} s")
            time.sleep(seconds)  # the scenario's schedule, not synchronisation
        print(r.ctl("status").out.rstrip())
        final = r.ctl("stop").out.strip()
        r.terminate()
        dest = os.path.join(out_dir, os.path.basename(final))
        shutil.move(final, dest)
    finally:
        r.close()

    print(f"\nfile: {dest} ({os.path.getsize(dest)} bytes)\n")
    print("ffprobe:")
    subprocess.run(["ffprobe", "-v", "error", "-show_entries",
                    "stream=index,codec_name,profile,pix_fmt,width,height,r_frame_rate,sample_rate,channels,duration"
                    ":format=format_name,duration,size", "-of", "default=noprint_wrappers=1", dest], check=True)
    rep = reel_verify.analyze(dest)
    print("\nchecked by scripts/reel_verify.py:")
    print(f"  segments: {len(rep['segments'])}; pauses cut: "
          + ", ".join(f"{j['pause_ms']:.0f} ms" for j in rep["jumps"]))
    if rep["sync"]:
        print(f"  A/V offset over {len(rep['sync']['pairs'])} flash/beep pairs: max |{rep['sync']['max_abs_offset_ms']:.2f}| ms")
    problems = reel_verify.defects(rep)
    print("  defects: " + ("none" if not problems else "; ".join(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

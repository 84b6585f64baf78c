"""Faults on the real-driver test bed (issues 5 and 6), each one boot of scripts/vm/run:

- a power cut with the recording on an ext4 virtio disk (capture-powercut.sh): the host kills
  qemu with SIGKILL, then reads the image without mounting it (e2fsck, debugfs) and runs reeld's
  own start-up recovery on what it finds;
- errored camera buffers and a fatal streaming error from vivid (capture-buferror.sh);
- a sound card whose clock runs 300 ppm fast (snd-aloop's PCM Rate Shift) for one minute
  (capture-rateshift.sh).

Fixtures `vm_ready` and `reel_bin_dir` come from conftest.py; the signal and the file checks
from test_capture_vm.py. REEL_VM_OUT: where the scenario outputs go (default .build/vm/out)."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import numpy as np
import pytest

from test_capture_vm import (FRAME, RATE, REPO, RUN, SCENARIOS, check_durations, decode_audio,
                             pitch_track, probe, read, segment_offsets, segments_s, stream, times,
                             video_pts, xerror)


def run_scenario(name, bin_dir, files=(), env=None, extra=(), timeout=420):
    out = os.path.join(os.environ.get("REEL_VM_OUT") or os.path.join(REPO, ".build", "vm", "out"), name)
    os.makedirs(out, exist_ok=True)
    cmd = [RUN, os.path.join(SCENARIOS, name + ".sh"), "--bin", bin_dir, "--out", out, "--quiet",
           "--timeout", str(timeout)]
    for f in files:
        cmd += ["--file", f]
    for k, v in (env or {}).items():
        cmd += ["--env", f"{k}={v}"]
    cmd += list(extra)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = read(out, "scenario.log") + "\n--- reeld.log ---\n" + read(out, "reeld.log")
    return p, out, log


def packet_span(path, kind):
    """Seconds of media in the packets of the first `kind` stream: from the first packet's pts
    to the end of the last one (pts + duration), read from the packets, not the header."""
    p = subprocess.run(["ffprobe", "-v", "error", "-select_streams", kind[0] + ":0", "-show_entries",
                        "packet=pts_time,duration_time", "-of", "csv=p=0", path],
                       stdout=subprocess.PIPE, text=True, check=True)
    rows = [l.split(",") for l in p.stdout.split()]
    rows = [(float(a), float(b)) for a, b in rows if a not in ("", "N/A") and b not in ("", "N/A")]
    if not rows:
        return 0.0
    return max(a + b for a, b in rows) - min(a for a, _ in rows)


# ------------------------------------------------------------------------------------------
# Power cut

def make_ext4_image(path, mb=256):
    with open(path, "wb") as f:
        f.truncate(mb << 20)
    subprocess.run(["mkfs.ext4", "-F", "-q", path], check=True)


def take_out_of_image(img, name, dest):
    """Replays the journal (e2fsck -fy, as a boot would) and copies /NAME out with debugfs (no
    loop mount: a container may not allow one). Returns (path or None, e2fsck's and debugfs's output)."""
    fsck = subprocess.run(["e2fsck", "-fy", img], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # 0: clean, 1: errors corrected (a replayed journal counts); more is damage
    assert fsck.returncode in (0, 1), f"e2fsck -fy exited {fsck.returncode}:\n{fsck.stdout}"
    ls = subprocess.run(["debugfs", "-R", "ls -l /", img], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = os.path.join(dest, name)
    d = subprocess.run(["debugfs", "-R", f"dump /{name} {out}", img], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    report = f"e2fsck:\n{fsck.stdout}\ndebugfs ls:\n{ls.stdout}\ndebugfs dump:\n{d.stdout}"
    return (out if os.path.exists(out) else None), report


def reeld_recover(bin_dir, directory):
    """Runs reeld's own start-up recovery on `directory` (a host reeld, never asked to record:
    it recovers every *.mp4.part before it serves) and returns its log."""
    sock = os.path.join(directory, "recover.sock")
    logp = os.path.join(directory, "recover.log")
    with open(logp, "w") as log:
        proc = subprocess.Popen([os.path.join(bin_dir, "reeld"), "--socket", sock, "--output-dir", directory,
                                 "--video", "test", "--audio", "test"], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:  # recovery is done once the socket answers
            st = subprocess.run([os.path.join(bin_dir, "reelctl"), "--socket", sock, "status"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if st.returncode == 0:
                break
            assert proc.poll() is None, "reeld exited during recovery:\n" + open(logp).read()
            assert time.monotonic() < deadline, "reeld did not answer within 30 s:\n" + open(logp).read()
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    return open(logp).read()


@pytest.fixture(scope="module")
def signal_wav(tmp_path_factory):
    from test_capture_vm import make_signal
    p = str(tmp_path_factory.mktemp("signal") / "steps.wav")
    make_signal(p)
    return p


def power_cut(bin_dir, signal_wav, fsync=None, cut_at=8):
    """One power-cut run: returns (what the image held, the scenario's times, logs, work dir)."""
    work = tempfile.mkdtemp(prefix="reel-powercut-", dir="/tmp")
    img = os.path.join(work, "disk.img")
    make_ext4_image(img)
    env = {"CUT_AT": cut_at}
    if fsync:
        env["FSYNC"] = fsync
    p, out, log = run_scenario("capture-powercut", bin_dir, files=[signal_wav + ":/in/steps.wav"], env=env,
                               extra=["--disk", img, "--kill-on", "REEL-POWER-CUT"], timeout=300)
    assert p.returncode == 0 and os.path.exists(os.path.join(out, "killed")), \
        f"no power cut (run exited {p.returncode})\n{p.stdout}\n{log[-4000:]}\n{read(out, 'console.log')[-3000:]}"
    part, report = take_out_of_image(img, "powercut.mp4.part", work)
    return part, times(out), log, report, work, out


def test_power_cut_keeps_synced_fragments(vm_ready, reel_bin_dir, signal_wav):
    part, tm, log, report, work, out = power_cut(reel_bin_dir, signal_wav)
    try:
        start_t1 = tm["start"][0][1]
        cut = tm["cut"][0][0]
        want = cut - start_t1 - 1.5  # the media recorded up to the cut, less the allowed loss
        assert want > 4, f"the cut came {cut - start_t1:.2f} s after start: too early to judge"
        assert part and os.path.getsize(part) > 0, \
            f"the power cut {cut - start_t1:.2f} s into the recording left no data in powercut.mp4.part\n{report}\n{log[-3000:]}"
        size = os.path.getsize(part)
        rec = os.path.join(work, "rec")
        os.makedirs(rec)
        shutil.move(part, os.path.join(rec, "powercut.mp4.part"))
        rlog = reeld_recover(reel_bin_dir, rec)
        final = os.path.join(rec, "powercut.mp4")
        assert os.path.isfile(final), f"reeld did not recover the file: {os.listdir(rec)}\n{rlog}"
        assert "recovered crash-left recording" in rlog, rlog
        assert xerror(final) == [], xerror(final)
        vspan, aspan = packet_span(final, "video"), len(decode_audio(final)) / RATE
        print(f"power cut {cut - start_t1:.2f} s after start: {size} bytes on disk, "
              f"recovered {vspan:.2f} s video, {aspan:.2f} s audio")
        assert min(vspan, aspan) >= want, \
            f"after a power cut {cut - start_t1:.2f} s into the recording the file holds {vspan:.2f} s video, " \
            f"{aspan:.2f} s audio; want >= {want:.2f} s (at most 1.5 s lost)\n{rlog}\n{report}"
    finally:
        if not os.environ.get("REEL_VM_KEEP"):
            shutil.rmtree(work, ignore_errors=True)

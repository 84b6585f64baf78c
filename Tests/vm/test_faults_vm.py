"""Faults on the real-driver test bed (issues 5 and 6), each one boot of scripts/vm/run:

- a power cut with the recording on an ext4 virtio disk (capture-powercut.sh): the host kills
  qemu with SIGKILL, then reads the image without mounting it (e2fsck, debugfs) and runs reeld's
  own start-up recovery on what it finds;
- the same disk failing mid-recording (capture-ioerror.sh: device-mapper's error target, EIO on
  every request), read back the same way;
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

from test_capture_vm import (RATE, REPO, RUN, SCENARIOS, decode_audio,
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


def recorded_before(tm, out, event, status_json):
    """(at least, at most) seconds of media recorded when `event` (a times.txt name) began: since
    `start` returned, or (tighter when the start call was slow) what status counted plus the time
    from status returning to the event; at most, since `start` was sent."""
    start_t0, start_t1 = tm["start"][0][:2]
    at = tm[event][0][0]
    st = json.loads(read(out, status_json))
    status_t1 = tm["status"][0][1]
    return max(at - start_t1, st["recordedNs"] / 1e9 + (at - status_t1)), at - start_t0


def check_kept(bin_dir, part, name, work, recorded, at_most, what, report, log, lost_at_most=1.5):
    """Runs reeld's start-up recovery on the .part taken from the image and checks the result
    decodes cleanly and holds all but `lost_at_most` s of the `recorded` s before `what`."""
    want = recorded - lost_at_most
    assert want > 4, f"{what} came {recorded:.2f} s into the recording: too early to judge"
    assert part and os.path.getsize(part) > 0, \
        f"{what} {recorded:.2f} s into the recording left no data in {name}.mp4.part\n{report}\n{log[-3000:]}"
    size = os.path.getsize(part)
    rec = os.path.join(work, "rec")
    os.makedirs(rec)
    shutil.move(part, os.path.join(rec, f"{name}.mp4.part"))
    rlog = reeld_recover(bin_dir, rec)
    final = os.path.join(rec, f"{name}.mp4")
    assert os.path.isfile(final), f"reeld did not recover the file: {os.listdir(rec)}\n{rlog}"
    assert "recovered crash-left recording" in rlog, rlog
    assert xerror(final) == [], xerror(final)
    vspan, aspan = packet_span(final, "video"), len(decode_audio(final)) / RATE
    kept = min(vspan, aspan)
    print(f"{what} {recorded:.2f}..{at_most:.2f} s into the recording: {size} bytes on disk, "
          f"recovered {vspan:.2f} s video, {aspan:.2f} s audio: lost {recorded - kept:.2f}..{at_most - kept:.2f} s")
    assert kept >= want, \
        f"after {what} {recorded:.2f} s into the recording the file holds {vspan:.2f} s video, " \
        f"{aspan:.2f} s audio; want >= {want:.2f} s (at most {lost_at_most} s lost)\n{rlog}\n{report}"


def test_power_cut_keeps_synced_fragments(vm_ready, reel_bin_dir, signal_wav):
    """reeld's default policy (fsync = fragment). REEL_VM_FSYNC=none runs the same check on the
    other policy by hand (it fails: docs/RELIABILITY.md has the figures)."""
    part, tm, log, report, work, out = power_cut(reel_bin_dir, signal_wav, fsync=os.environ.get("REEL_VM_FSYNC"))
    try:
        recorded, at_most = recorded_before(tm, out, "cut", "status-before-cut.json")
        check_kept(reel_bin_dir, part, "powercut", work, recorded, at_most, "a power cut", report, log)
    finally:
        if not os.environ.get("REEL_VM_KEEP"):
            shutil.rmtree(work, ignore_errors=True)


def top_level_boxes(path):
    """The file's top-level box types, walked here (independently of reeld's finisher)."""
    out, o = [], 0
    with open(path, "rb") as f:
        end = os.fstat(f.fileno()).st_size
        while o + 8 <= end:
            f.seek(o)
            head = f.read(16)
            size, kind = int.from_bytes(head[:4], "big"), head[4:8].decode("latin-1")
            if size == 1:
                size = int.from_bytes(head[8:16], "big")
            elif size == 0:
                size = end - o
            if size < 8 or o + size > end:
                out.append(kind + "(cut)")
                break
            out.append(kind)
            o += size
    return out


# One boot (VM time is make test's budget): the hold before the mdat header's sync, the step that
# commits the layout. The moov step's power cut passed too when written (2026-11-24); run it by
# hand with REEL_VM_FINISH_HOLD=moov. kill -9 after every step is in Tests/e2e/test_finish.py.
@pytest.mark.parametrize("hold", [os.environ.get("REEL_VM_FINISH_HOLD", "mdat")])
def test_power_cut_while_finishing(vm_ready, reel_bin_dir, signal_wav, hold):
    """The power is cut while reeld finishes a stopped two-take recording, after the finisher
    wrote its new moov (or its mdat header) and before it synced it (REEL_TEST_FINISH_HOLD): what
    the disk holds finishes at the next start into a standard MP4 that decodes clean, keeps all
    but 1.5 s of both takes, and has one chapter per take (Take 1 from 0, Take 2 where the
    first ends)."""
    work = tempfile.mkdtemp(prefix="reel-finishcut-", dir="/tmp")
    try:
        img = os.path.join(work, "disk.img")
        make_ext4_image(img)
        p, out, log = run_scenario("capture-powercut-finish", reel_bin_dir, files=[signal_wav + ":/in/steps.wav"],
                                   env={"HOLD": hold}, extra=["--disk", img, "--kill-on", "REEL-POWER-CUT"], timeout=300)
        assert p.returncode == 0 and os.path.exists(os.path.join(out, "killed")), \
            f"no power cut (run exited {p.returncode})\n{p.stdout}\n{log[-4000:]}\n{read(out, 'console.log')[-3000:]}"
        assert f"REEL-FINISH-HOLD {hold}" in log, log[-3000:]
        part, report = take_out_of_image(img, "finishcut.mp4.part", work)
        assert part and os.path.getsize(part) > 0, f"no .part on the disk after the cut\n{report}\n{log[-3000:]}"
        tm = times(out)
        start_t1 = tm["start"][0][1]
        recorded = (tm["pause"][0][0] - start_t1) + (tm["stop"][0][0] - tm["resume"][0][1])  # at least
        rec = os.path.join(work, "rec")
        os.makedirs(rec)
        shutil.move(part, os.path.join(rec, "finishcut.mp4.part"))
        rlog = reeld_recover(reel_bin_dir, rec)
        final = os.path.join(rec, "finishcut.mp4")
        assert os.path.isfile(final), f"reeld did not finish the file: {os.listdir(rec)}\n{rlog}"
        top = [b for b in top_level_boxes(final) if b != "free"]
        assert top == ["ftyp", "mdat", "moov"], (top, rlog)
        assert xerror(final) == [], xerror(final)
        vspan, aspan = packet_span(final, "video"), len(decode_audio(final)) / RATE
        print(f"power cut holding after '{hold}': recovered {vspan:.2f} s video, {aspan:.2f} s audio of {recorded:.2f} s")
        assert min(vspan, aspan) >= recorded - 1.5, (vspan, aspan, recorded, rlog)
        ch = json.loads(subprocess.run(["ffprobe", "-v", "error", "-show_chapters", "-of", "json", final],
                                       stdout=subprocess.PIPE, text=True, check=True).stdout)["chapters"]
        titles = [c.get("tags", {}).get("title") for c in ch]
        assert titles == ["Take 1", "Take 2"], ch
        assert float(ch[0]["start_time"]) == 0 and float(ch[0]["end_time"]) == float(ch[1]["start_time"]), ch
        assert 0.5 < float(ch[1]["start_time"]) < float(ch[1]["end_time"]) <= vspan + 0.1, (ch, vspan)
    finally:
        if not os.environ.get("REEL_VM_KEEP"):
            shutil.rmtree(work, ignore_errors=True)


# ------------------------------------------------------------------------------------------
# The disk fails (EIO from device-mapper's error target)

def test_disk_failure_is_reported_and_synced_fragments_survive(vm_ready, reel_bin_dir, signal_wav):
    """capture-ioerror.sh: 8 s into a recording every request to the disk fails. reeld must end
    the recording with a message that names the file, the cause and the fix, stay up, refuse a
    new recording with a reason, and the disk (repaired: e2fsck) must hold a .part that reeld's
    start-up recovery makes playable with at most 1.5 s lost, as after a power cut."""
    work = tempfile.mkdtemp(prefix="reel-ioerror-", dir="/tmp")
    try:
        img = os.path.join(work, "disk.img")
        make_ext4_image(img)
        p, out, log = run_scenario("capture-ioerror", reel_bin_dir, files=[signal_wav + ":/in/steps.wav"],
                                   env={"FAIL_AT": 8}, extra=["--disk", img], timeout=300)
        assert p.returncode == 0, f"scenario failed ({p.returncode})\n{p.stdout}\n{log[-4000:]}"
        tm = times(out)
        after = json.loads(read(out, "status-after-fail.json"))
        err = after["lastError"] or ""
        assert after["state"] == "idle", after
        assert err.startswith("input/output error syncing /tmp/rec/ioerror.mp4.part: the storage device failed"), err
        assert "reeld makes playable at its next start" in err and "dmesg" in err, err
        print(f"reeld noticed {tm['noticed'][0][0] - tm['fail'][0][1]:.2f} s after the disk failed: {err}")
        again = read(out, "again.out")
        assert "cannot start recording /tmp/rec/again.mp4.part" in again, again
        assert "read-only, often after disk errors" in again or "storage device failed" in again, again
        assert tm["again"][0][2] == 1, tm["again"]          # refused (1), not unreachable (2)
        part, report = take_out_of_image(img, "ioerror.mp4.part", work)
        recorded, at_most = recorded_before(tm, out, "fail", "status-before-fail.json")
        check_kept(reel_bin_dir, part, "ioerror", work, recorded, at_most, "a disk failure", report, log)
    finally:
        if not os.environ.get("REEL_VM_KEEP"):
            shutil.rmtree(work, ignore_errors=True)


# ------------------------------------------------------------------------------------------
# Errored buffers

# capture-buferror records at 10 fps: under emulation vivid stamps frames up to ~60 ms late, and
# reeld puts each frame in the nearest slot of the grid (a frame whose slot is taken is dropped),
# so at 30 fps an empty slot can move a slot or two; at 10 fps it stays put, and fewer frames drop
# for other reasons.
ERR_FPS = 10
ERR_FRAME = 1.0 / ERR_FPS


def check_durations_at(path, status, frame):
    """check_durations of test_capture_vm for any frame rate: video and audio each span the
    recorded segments within one frame (the video up to 0.3 s short when frames dropped)."""
    info = probe(path)
    total = sum(segments_s(status))
    v, a = stream(info, "video"), stream(info, "audio")
    vdur, adur = packet_span(path, "video"), float(a["duration"]) + float(a.get("start_time", 0))
    short = 0.3 if status["droppedFrames"] > 0 else 0.0
    assert total - short - frame - 1e-3 <= vdur <= total + frame + 1e-3, \
        f"video {vdur:.4f} s vs recorded {total:.4f} s ({status['droppedFrames']} frames dropped)"
    assert abs(adur - total) <= frame + 1e-3, f"audio {adur:.4f} s vs recorded {total:.4f} s"


def pause_gaps_match(host, seg, tm, frame):
    """The played pitch steps in each recorded segment sit at one offset, and from one segment to
    the next the offset jumps by the pause's length (as bracketed in times.txt, cut on the grid)."""
    info = probe(host)
    a = stream(info, "audio")
    ts, ks = pitch_track(decode_audio(host), float(a.get("start_time", 0)))
    cuts = [0.0] + list(np.cumsum(seg))
    offs = segment_offsets(ts, ks, cuts)
    for j, o in enumerate(offs):
        assert o, f"segment {j}: no pitch step found (is the loopback signal recorded?)"
        assert max(o) - min(o) < 0.03, f"segment {j}: offsets spread {min(o):.3f}..{max(o):.3f} (audio gap or duplicate)"
    off = [float(np.median(o)) for o in offs]
    for j in range(len(seg) - 1):
        (p0, p1, _), (r0, r1, _) = tm["pause"][j], tm["resume"][j]
        lo, hi = r0 - p1 - frame - 0.02, r1 - p0 + frame + 0.02
        gap = off[j + 1] - off[j]
        assert lo <= gap <= hi, f"pause {j}: the audio skips {gap:.3f} s of signal, the pause lasted {lo:.3f}..{hi:.3f} s"


def missing_slots(pts, lo, hi, frame):
    """Empty slots of the frame grid between consecutive frames with output times in [lo, hi)."""
    p = [t for t in pts if lo <= t < hi]
    return int(sum(round(d / frame) - 1 for d in np.diff(p)))


def frame_lumas(path):
    """(pts, mean luma) of every decoded video frame, in presentation order."""
    info = stream(probe(path), "video")
    w, h = int(info["width"]), int(info["height"])
    p = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", path, "-map", "0:v:0", "-fps_mode", "passthrough",
                        "-f", "rawvideo", "-pix_fmt", "gray", "-"], stdout=subprocess.PIPE, check=True)
    y = np.frombuffer(p.stdout, np.uint8).reshape(-1, h * w).mean(axis=1)
    pts = video_pts(path)
    assert len(pts) == len(y), f"{len(pts)} video packets, {len(y)} frames decoded"
    return np.array(pts), y


def camera_counts(log):
    """The camera's closing log lines: [(dequeued, lost, errored, dropped here)], one per recording."""
    import re
    return [tuple(int(v) for v in m.groups()) for m in re.finditer(
        r"(\d+) frames dequeued, (\d+) lost by the camera \(sequence gaps\), (\d+) errored by the driver"
        r" \(V4L2_BUF_FLAG_ERROR, dropped\), (\d+) dropped here", log)]


@pytest.fixture(scope="module")
def buferror(vm_ready, reel_bin_dir, signal_wav):
    p, out, log = run_scenario("capture-buferror", reel_bin_dir, files=[signal_wav + ":/in/steps.wav"])
    assert p.returncode == 0, f"capture-buferror exited {p.returncode}\n{p.stdout}\n{log[-6000:]}"
    return out, log


def test_errored_buffers_are_dropped_and_timing_holds(buferror):
    out, log = buferror
    status = json.loads(read(out, "stop.json"))
    host = os.path.join(out, "errored.mp4")
    assert status["lastFile"].endswith("/errored.mp4"), status
    assert "v4l2 /dev/video0 320x180 10 yuyv" in status["video"], status
    assert xerror(host) == [], xerror(host)
    seg = segments_s(status)
    assert len(seg) == 2, status
    tm = times(out)
    injected = len(tm["inject"])
    assert injected == 5
    # reeld saw every errored buffer (one per press) and dropped it
    counts = camera_counts(log)
    assert counts and counts[0][2] == injected, f"errored buffers counted {counts}, {injected} injected\n{log[-3000:]}"
    assert "marked frame" in log and "V4L2_BUF_FLAG_ERROR" in log
    assert status["droppedFrames"] >= injected, status
    # Durations follow capture time: each dropped frame leaves its slot empty (counting frames
    # would end the video early).
    check_durations_at(host, status, ERR_FRAME)
    pts, luma = frame_lumas(host)
    before = missing_slots(pts, 0, seg[0], ERR_FRAME)
    after = missing_slots(pts, seg[0], seg[0] + seg[1], ERR_FRAME)
    # Each press flipped the picture black <-> white in the same call as the error, so the errored
    # frame is the last of the old picture or the first of the new (seen with v4l2-ctl streaming):
    # in the file an empty slot must touch every flip, give or take one slot of timestamp jitter.
    # Had the errored frames been encoded, the frames around each flip would be one slot apart.
    white = luma > 128
    flips = np.flatnonzero(white[1:] != white[:-1])
    slots = np.round(np.diff(pts) / ERR_FRAME).astype(int)   # slots[i]: pts[i] -> pts[i + 1]
    near = [int(max(slots[max(i - 1, 0):i + 2])) for i in flips]
    print(f"errored buffers: {injected} injected, counted {counts[0]}; empty slots {before} + {after}; "
          f"black/white flips at {[round(pts[i + 1], 3) for i in flips]} s, widest step around each {near} slots; "
          f"status dropped {status['droppedFrames']}, frames {len(pts)} for {sum(seg):.3f} s")
    assert len(flips) == injected, f"{len(flips)} black/white flips in the file, {injected} presses (lumas {np.round(luma[::5])})"
    assert all(n >= 2 for n in near), \
        f"around the flips the frames step {near} slots: an errored frame was encoded where its slot should be empty"
    assert before >= 3 and after >= 2, f"empty frame slots {before} before the pause, {after} after"
    # The pause is cut as long as it lasted
    pause_gaps_match(host, seg, tm, ERR_FRAME)


def test_fatal_streaming_error_ends_the_recording_cleanly(buferror):
    out, log = buferror
    st = json.loads(read(out, "status-after-fatal.json"))
    assert st["state"] == "idle", st
    err = st["lastError"] or ""
    assert "/dev/video0" in err and "stopped the stream with an error" in err, st
    assert st["lastFile"].endswith("/fatal.mp4"), st
    host = os.path.join(out, "fatal.mp4")
    assert xerror(host) == [], xerror(host)
    assert packet_span(host, "video") > 1.5, probe(host)
    # the camera was released: the next recording works
    after = json.loads(read(out, "stop-after.json"))
    assert after["lastFile"].endswith("/after.mp4"), after
    host2 = os.path.join(out, "after.mp4")
    assert xerror(host2) == [], xerror(host2)
    check_durations_at(host2, after, ERR_FRAME)
    assert after["frames"] > 10, after


# ------------------------------------------------------------------------------------------
# A sound card 300 ppm slow

def write_steps(path, seconds):
    """The steps signal of test_capture_vm (second k at BASE + STEP*k Hz), `seconds` long."""
    from test_capture_vm import make_signal
    make_signal(path, seconds)


def step_edges(ts, ks, min_run=10):
    """[(k, t)]: output time t where the pitch steps from signal second k-1 to k. Both sides must
    hold their pitch for min_run windows (50 ms): a lone window at the recording's first sample
    (priming, half silence) reads as some other pitch, and once gave a step 0 -> 1 150 ms before
    the real 1 -> 2, which threw the fit off by 1300 ppm."""
    runs, s = [], 0                      # (k, first index, length)
    for i in range(1, len(ks) + 1):
        if i == len(ks) or ks[i] != ks[s]:
            runs.append((int(ks[s]), s, i - s))
            s = i
    return [(k1, (ts[i1 - 1] + ts[i1]) / 2) for (k0, _, n0), (k1, i1, n1) in zip(runs, runs[1:])
            if k0 >= 0 and k1 == k0 + 1 and n0 >= min_run and n1 >= min_run]


def card_ppm(path):
    """The card's rate against CLOCK_MONOTONIC in ppm, from cardpos.txt ('T0 T1 HW_PTR' lines):
    the slope of its capture position over time, in frames per second, against the nominal rate."""
    rows = [l.split() for l in open(path).read().splitlines() if l.strip()]
    t = np.array([(float(a) + float(b)) / 2 for a, b, _ in rows])
    pos = np.array([float(p) for _, _, p in rows])
    slope = np.polyfit(t, pos, 1)[0]
    return (slope / RATE - 1) * 1e6, float(t[-1] - t[0])


def rate_shift_run(bin_dir, tmp_dir, drift_lock=True, record_s=60, shift=100030):
    """One recording through a loopback cable at 100000/shift of its nominal rate. Returns what
    the file holds: durations from what decodes, and where the played signal's seconds land."""
    wav = os.path.join(tmp_dir, f"steps{record_s + 30}.wav")
    if not os.path.exists(wav):
        write_steps(wav, record_s + 30)
    env = {"RECORD_S": record_s, "SHIFT": shift, "DRIFT_LOCK": 1 if drift_lock else 0}
    p, out, log = run_scenario("capture-rateshift", bin_dir, files=[wav + ":/in/steps.wav"], env=env,
                               timeout=record_s + 240)
    assert p.returncode == 0, f"capture-rateshift exited {p.returncode}\n{p.stdout}\n{log[-6000:]}"
    assert f"rate_shift:\t\t{shift}" in read(out, "cable0.txt"), read(out, "cable0.txt")
    status = json.loads(read(out, "stop.json"))
    host = os.path.join(out, "rateshift.mp4")
    assert xerror(host) == [], xerror(host)
    info = probe(host)
    a = stream(info, "audio")
    # Video: first pts to the end of the last frame. Audio: the decoded samples that carry the
    # played tone (it never stops during the recording), less the encoder's priming (the first
    # packet's negative pts); the last AAC frame's zero padding decodes as silence, so this is
    # the audio's real length, where a packet count would round it up to whole AAC frames.
    vdur = packet_span(host, "video")
    x = decode_audio(host)
    priming = round(-float(a.get("start_time", 0)) * RATE)
    loud = np.flatnonzero(np.abs(x) > 0.03)
    audio_samples = int(loud[-1] + 1 - priming)
    # Where the played seconds land: signal second k (48000 of the card's frames) starts at
    # output time t_k. A recording that follows CLOCK_MONOTONIC (the camera's clock, so the
    # video's) has them 1/(1 + p) s apart for a card p ppm off; one that counts the card's
    # frames, 1 s apart.
    edges = step_edges(*pitch_track(x, -priming / RATE))
    k, t = np.array(edges, float).T
    slope, icpt = np.polyfit(k, t, 1)
    card, span = card_ppm(os.path.join(out, "cardpos.txt"))
    return {"file": host, "status": status, "out": out, "video_s": vdur,
            "audio_samples": audio_samples, "audio_s": audio_samples / RATE,
            "header_audio_s": float(a["duration"]) + float(a.get("start_time", 0)),
            "steps": len(k), "signal_ppm": (1 / slope - 1) * 1e6, "card_ppm": card, "card_span_s": span,
            "resid_ms": float(np.max(np.abs(t - (icpt + slope * k)))) * 1e3,
            # the last step against a grid of whole seconds from the first
            "drift_ms": float(((t[-1] - t[0]) - (k[-1] - k[0])) * 1e3)}


def test_skewed_sound_card_keeps_durations_and_follows_the_system_clock(vm_ready, reel_bin_dir, tmp_path):
    """Issue 5: a card 300 ppm off for one minute, drift lock on (the default). REEL_VM_DRIFT_LOCK=0
    runs the same check with --no-drift-lock by hand (the clock check fails: docs/RELIABILITY.md)."""
    drift_lock = os.environ.get("REEL_VM_DRIFT_LOCK", "1") != "0"
    r = rate_shift_run(reel_bin_dir, str(tmp_path), drift_lock=drift_lock)
    st = r["status"]
    diff = r["audio_samples"] - round(r["video_s"] * RATE)
    print(f"PCM Rate Shift 100030, drift lock {'on' if drift_lock else 'off'}: the card measures {r['card_ppm']:+.1f} ppm "
          f"(its position over {r['card_span_s']:.0f} s); video {r['video_s']:.4f} s, audio {r['audio_s']:.5f} s ({diff:+d} samples; "
          f"header {r['header_audio_s']:.5f} s), recorded {st['recordedNs'] / 1e9:.4f} s; {r['steps']} pitch steps: "
          f"the signal runs {r['signal_ppm']:+.1f} ppm against the file, its last step {r['drift_ms']:+.1f} ms off a "
          f"1 s grid (fit residual {r['resid_ms']:.1f} ms); dropped {st['droppedFrames']}, filled {st['audioFilledSamples']}")
    # snd-aloop advances the cable's position by 100000/shift: 100030 is a card 299.9 ppm slow.
    # Its position read every 2 s agrees within the read's jitter (jiffies: 4 ms a read, about
    # 30 ppm over the minute), which shows the shift is in effect and its sign.
    nominal = (100000 / 100030 - 1) * 1e6
    assert abs(r["card_ppm"] - nominal) <= 150, \
        f"the rate shift is not in effect: the card runs {r['card_ppm']:+.1f} ppm, want about {nominal:+.1f}"
    assert st["audioFilledSamples"] == 0, st
    assert st["recordedNs"] / 1e9 > 59, st
    # The issue's criterion: audio and video durations equal within one AAC frame.
    assert abs(diff) <= 1024, f"audio {r['audio_s']:.5f} s vs video {r['video_s']:.4f} s: {diff:+d} samples, more than one AAC frame"
    # Equal durations alone do not show sync: the timeline cuts the audio by sample count, so they
    # match with the drift lock off too. The content must follow the system clock: the played
    # seconds must land as far apart as the card's clock makes them (the signal runs at the card's
    # -300 ppm against the file); counting the card's frames would give 0 ppm (measured: 0.0).
    # Limit 100 ppm: the lock converges over the first seconds and capture timestamps jitter by
    # milliseconds under emulation (seen: -288 to -326 ppm on a quiet host, -238.5 with the host at
    # load 4); unlocked gives 0.0, 300 ppm away, so the check still tells the two apart.
    assert r["steps"] >= 50, r
    assert abs(r["signal_ppm"] - nominal) <= 100, \
        f"the played signal runs {r['signal_ppm']:+.1f} ppm against the file, the card {nominal:+.1f} ppm against " \
        f"CLOCK_MONOTONIC: the audio does not follow the system clock (last step {r['drift_ms']:+.1f} ms off a 1 s grid)"

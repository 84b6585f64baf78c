"""Start-up recovery touches only what Reel wrote (issue 22): hostile and foreign `.part` files
never keep reeld from becoming ready, are never cut or removed, and a file recovery cannot
finish is kept byte for byte (moved aside as NAME.mp4.part.damaged) and reported once."""

import os
import subprocess
import time
from reel_harness import recording_for  # scripts/, on sys.path through conftest.py

HOSTILE = bytes.fromhex("00000008" "66747970" "00000001" "66726565" "7fffffffffffffff")  # ftyp, free of 2^63-1 bytes


def kept_whole(out, name, original):
    """The bytes are still in `out` under `name` or moved aside as `name.<suffix>`, unchanged."""
    mine = [f for f in os.listdir(out) if f == name or f.startswith(name + ".")]
    assert len(mine) == 1, sorted(os.listdir(out))
    with open(os.path.join(out, mine[0]), "rb") as f:
        assert f.read() == original, f"{mine[0]} was changed"
    return mine[0]


def decodes_clean(path):
    dec = subprocess.run(["ffmpeg", "-v", "error", "-xerror", "-i", path, "-f", "null", "-"],
                         capture_output=True, text=True, timeout=60)
    return dec.returncode == 0 and not dec.stderr.strip(), dec.stderr


def record_a_little(r, name):
    """A short recording through the daemon: it still works."""
    r.ctl("start", "--name", name)
    assert r.wait_notify_after(len(r.notifications), recording_for(1), 15)
    final = r.ctl("stop").out.strip()
    ok, err = decodes_clean(final)
    assert ok, err


def crash_left_part(reeld, tmp_path, name, takes=3):
    """A real `.part` left by reeld killed with SIGKILL after `takes` takes (160x90, 15 fps)."""
    out = str(tmp_path / f"make-{name}")
    os.makedirs(out)
    r = reeld(f"make-{name}", size="160x90", fps="15", **{"output-dir": out})
    start = r.ctl("start", "--name", name)
    t0 = start.mid
    schedule = [(0.8, "pause"), (1.1, "resume"), (1.9, "pause"), (2.2, "resume")][:2 * (takes - 1)]
    for at, cmd in schedule:
        time.sleep(max(0.0, t0 + at - time.monotonic()))   # the schedule, not synchronisation
        r.ctl(cmd)
    time.sleep(max(0.0, t0 + 4.8 - time.monotonic()))      # x264 holds ~1.3 s: fragments up to ~3.5 s are out
    r.proc.kill()
    r.proc.wait()
    with open(os.path.join(out, f"{name}.mp4.part"), "rb") as f:
        return f.read()


def test_hostile_part_neither_kills_reeld_nor_keeps_it_from_ready(reeld, tmp_path):
    out = str(tmp_path / "out")
    os.makedirs(out)
    with open(os.path.join(out, "a.mp4.part"), "wb") as f:
        f.write(HOSTILE)
    r = reeld("hostile", size="160x90", fps="15", **{"output-dir": out})   # READY=1, or the fixture fails
    assert r.status()["state"] == "idle"
    kept_whole(out, "a.mp4.part", HOSTILE)
    log = open(r.log_path, errors="replace").read()
    assert os.path.join(out, "a.mp4.part") in log, log
    record_a_little(r, "after")


def test_ordinary_moov_first_mp4_cut_short_is_left_alone(reeld, tmp_path):
    out = str(tmp_path / "out")
    os.makedirs(out)
    src = str(tmp_path / "dl.mp4")
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=160x90:rate=15:duration=3",
                    "-c:v", "libx264", "-preset", "veryfast", "-movflags", "+faststart", src], check=True, timeout=60)
    whole = open(src, "rb").read()
    assert whole.find(b"moov") < whole.find(b"mdat"), "not moov-first"
    cut = whole[:len(whole) * 2 // 3]
    with open(os.path.join(out, "dl.mp4.part"), "wb") as f:
        f.write(cut)
    r = reeld("download", size="160x90", fps="15", **{"output-dir": out})
    assert sorted(os.listdir(out)) == ["dl.mp4.part"]
    kept_whole(out, "dl.mp4.part", cut)
    lines = [l for l in open(r.log_path, errors="replace").read().splitlines() if os.path.join(out, "dl.mp4.part") in l]
    assert len(lines) == 1, lines


def test_reel_part_with_a_damaged_box_in_the_middle_is_not_cut(reeld, tmp_path):
    part = bytearray(crash_left_part(reeld, tmp_path, "mid"))
    # The third moof from the start gets a type Reel never writes.
    moofs = []
    o = 0
    while o + 8 <= len(part):
        size = int.from_bytes(part[o:o + 4], "big")
        if part[o + 4:o + 8] == b"moof":
            moofs.append(o)
        if size < 8:
            break
        o += size
    assert len(moofs) >= 4, f"only {len(moofs)} fragments"
    part[moofs[2] + 4:moofs[2] + 8] = b"mo0f"
    damaged = bytes(part)
    out = str(tmp_path / "out")
    os.makedirs(out)
    with open(os.path.join(out, "mid.mp4.part"), "wb") as f:
        f.write(damaged)
    r = reeld("damaged", size="160x90", fps="15", **{"output-dir": out})
    name = kept_whole(out, "mid.mp4.part", damaged)
    assert not os.path.exists(os.path.join(out, "mid.mp4")), os.listdir(out)
    said = [l for l in open(r.log_path, errors="replace").read().splitlines() if "mid.mp4.part" in l]
    assert len(said) == 1, said
    r.terminate()
    # The next start leaves it as it is and says nothing of it.
    r2 = reeld("damaged-again", size="160x90", fps="15", **{"output-dir": out})
    assert kept_whole(out, "mid.mp4.part", damaged) == name
    assert "mid.mp4.part" not in open(r2.log_path, errors="replace").read()


def test_a_slow_recovery_does_not_keep_reeld_from_ready(reeld, tmp_path):
    """REEL_TEST_FINISH_HOLD=moov: finishing the crash-left file blocks for good (as on a disk
    that stopped answering). reeld still becomes ready and answers; the file is not lost."""
    part = crash_left_part(reeld, tmp_path, "slow", takes=1)
    out = str(tmp_path / "out")
    os.makedirs(out)
    with open(os.path.join(out, "slow.mp4.part"), "wb") as f:
        f.write(part)
    t0 = time.monotonic()
    r = reeld("slow", size="160x90", fps="15", _env={"REEL_TEST_FINISH_HOLD": "moov"}, **{"output-dir": out})
    ready = time.monotonic() - t0
    assert r.status()["state"] == "idle"
    assert "REEL-FINISH-HOLD moov" in open(r.log_path, errors="replace").read()
    assert ready < 15, ready
    assert os.path.exists(os.path.join(out, "slow.mp4.part")), os.listdir(out)


def top_boxes(b):
    out, o = [], 0
    while o + 8 <= len(b):
        size = int.from_bytes(b[o:o + 4], "big")
        out.append((b[o + 4:o + 8].decode("latin1"), o, size))
        if size < 8:
            break
        o += size
    return out


def test_mutated_parts_through_a_starting_reeld(reeld, tmp_path):
    """A handful of the mutations RecoveryMutationTests makes in-process, each alone in front of a
    starting reeld: it becomes ready every time, and the file is either recovered (and decodes
    clean) or kept byte for byte and reported once."""
    base = crash_left_part(reeld, tmp_path, "mut")
    boxes = top_boxes(base)
    frags = [(o, s) for (t, o, s), nxt in zip(boxes, boxes[1:]) if t == "moof" and nxt[0] == "mdat"]
    mdats = [(o, s) for t, o, s in boxes if t == "mdat"]
    assert len(frags) >= 4, boxes
    mid_moof = frags[len(frags) // 2][0]
    trun = base.find(b"trun", mid_moof) - 4

    def patched(at, data):
        return base[:at] + data + base[at + len(data):]

    cases = {
        "trun count 2^32-1": patched(trun + 12, b"\xff\xff\xff\xff"),
        "mdat 64-bit size 2^63-1": patched(mdats[1][0], b"\x00\x00\x00\x01mdat\x7f\xff\xff\xff\xff\xff\xff\xff"),
        "moof size + 8": patched(mid_moof, (int.from_bytes(base[mid_moof:mid_moof + 4], "big") + 8).to_bytes(4, "big")),
        "a fragment twice": base[:frags[1][0]] + base[frags[1][0]:mdats[1][0] + mdats[1][1]] * 2 + base[mdats[1][0] + mdats[1][1]:],
        "cut in the last mdat": base[:mdats[-1][0] + mdats[-1][1] // 2],
    }
    for i, (what, data) in enumerate(cases.items()):
        out = str(tmp_path / f"out{i}")
        os.makedirs(out)
        with open(os.path.join(out, "m.mp4.part"), "wb") as f:
            f.write(data)
        r = reeld(f"mut{i}", size="160x90", fps="15", **{"output-dir": out})   # READY=1, or the fixture fails
        assert r.status()["state"] == "idle", what
        final = os.path.join(out, "m.mp4")
        if os.path.exists(final):
            ok, err = decodes_clean(final)
            assert ok, (what, err)
        else:
            kept_whole(out, "m.mp4.part", data)
            said = [l for l in open(r.log_path, errors="replace").read().splitlines() if "m.mp4.part" in l]
            assert len(said) == 1, (what, said)
        if what == "cut in the last mdat":
            assert os.path.exists(final), (what, os.listdir(out))
        r.terminate()

#!/usr/bin/python3
"""Writes the hand-made hostile .part files of issue 22 into Tests/fuzz/finish/ (the finisher's
regression inputs, replayed by `make test`), each a structural mutation of a small real .part:

    scripts/fuzz_mp4_regressions.py BASE.mp4.part Tests/fuzz/finish

BASE is a crash-left part of `reeld record` (see docs/RELIABILITY.md, "Fuzzing"). Each output is
named after what it breaks. The files do not depend on this script: it only documents how they were
made."""
import struct
import sys

CONTAINERS = {b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts", b"mvex", b"moof", b"traf", b"dinf", b"udta"}


def parse(b, start, end):
    out, o = [], start
    while o + 8 <= end:
        size, typ = struct.unpack(">I4s", b[o:o + 8])
        hl = 8
        if size == 1:
            size = struct.unpack(">Q", b[o + 8:o + 16])[0]
            hl = 16
        elif size == 0:
            size = end - o
        if size < hl or o + size > end:
            out.append([b"tail", b[o:end]])
            break
        body = b[o + hl:o + size]
        out.append([typ, parse(body, 0, len(body)) if typ in CONTAINERS else body])
        o += size
    return out


def ser(boxes):
    out = b""
    for typ, body in boxes:
        if typ == b"tail":
            out += body
            continue
        data = ser(body) if isinstance(body, list) else body
        out += struct.pack(">I4s", len(data) + 8, typ) + data
    return out


def find(boxes, *path):
    """Every box at path (a list of types), depth first."""
    if not path:
        return []
    found = []
    for box in boxes:
        if box[0] == path[0]:
            if len(path) == 1:
                found.append(box)
            elif isinstance(box[1], list):
                found += find(box[1], *path[1:])
    return found


def main():
    base, outdir = sys.argv[1], sys.argv[2]
    src = open(base, "rb").read()
    # Cut to the end of its second fragment: small, and still a whole recording.
    top, o, mdats = [], 0, 0
    while o + 8 <= len(src):
        size, typ = struct.unpack(">I4s", src[o:o + 8])
        o += size
        if typ == b"mdat":
            mdats += 1
            if mdats == 2:
                break
    src = src[:o]

    def write(name, data):
        open(f"{outdir}/{name}", "wb").write(data)

    def mutate(name, fn):
        tree = parse(src, 0, len(src))
        fn(tree)
        write(name, ser(tree))

    # Not from the base: the 24-byte file, and the same box after the placeholder.
    huge = struct.pack(">I4sQ", 1, b"free", 0x7FFFFFFFFFFFFFFF)
    write("issue-24-bytes-free-size-2p63", struct.pack(">I4s", 8, b"ftyp") + huge)
    write("free-size-2p63-after-placeholder", struct.pack(">I4s", 8, b"ftyp") + struct.pack(">I4s8x", 16, b"free") + huge)

    def trun_count(flags_keep):
        def fn(tree):
            trun = find(tree, b"moof", b"traf", b"trun")[0]
            body = bytearray(trun[1])
            flags = struct.unpack(">I", body[0:4])[0] & 0xFFFFFF
            body[0:4] = struct.pack(">I", (body[0] << 24) | (flags & flags_keep))
            body[4:8] = struct.pack(">I", 0xFFFFFFFF)
            trun[1] = bytes(body)
        return fn
    # Only data_offset and first_sample_flags kept: no per-sample fields, 2^32-1 samples from the defaults.
    mutate("trun-count-2p32-no-sample-fields", trun_count(0x5))
    mutate("trun-count-2p32", trun_count(0xFFFFFF))

    def short(path, keep):
        def fn(tree):
            box = find(tree, *path)[0]
            box[1] = box[1][:keep]
        return fn
    mutate("mvhd-short", short([b"moov", b"mvhd"], 16))
    mutate("tkhd-short", short([b"moov", b"trak", b"tkhd"], 12))
    mutate("mdhd-short", short([b"moov", b"trak", b"mdia", b"mdhd"], 14))
    mutate("tfhd-short", short([b"moof", b"traf", b"tfhd"], 6))
    mutate("tfdt-short", short([b"moof", b"traf", b"tfdt"], 5))
    mutate("hdlr-short", short([b"moov", b"trak", b"mdia", b"hdlr"], 9))

    def mvhd_last_cut(tree):
        # The mvhd moved to the end of the moov and cut to its version and flags: reads past it read past the moov.
        moov = find(tree, b"moov")[0]
        mvhd = find(moov[1], b"mvhd")[0]
        moov[1].remove(mvhd)
        moov[1].append([b"mvhd", mvhd[1][:4]])
    mutate("mvhd-short-at-end-of-moov", mvhd_last_cut)

    def negative_edit(tree):
        elst = find(tree, b"moov", b"trak", b"edts", b"elst")
        for e in elst:
            body = e[1]
            n = struct.unpack(">I", body[4:8])[0]
            entries = b""
            for i in range(n):
                d, t, r = struct.unpack(">IiI", body[8 + 12 * i:20 + 12 * i])
                entries += struct.pack(">qqI", -90000 if i == 0 else d, t, r)
            e[1] = bytes([1, 0, 0, 0]) + struct.pack(">I", n) + entries
    mutate("elst-negative-duration", negative_edit)

    def edit_overflow(tree):
        e = find(tree, b"moov", b"trak", b"edts", b"elst")[0]
        e[1] = bytes([1, 0, 0, 0]) + struct.pack(">I", 2) + struct.pack(">qqI", 0x7FFFFFFFFFFFFFF0, -1, 0x10000) + struct.pack(">qqI", 0x7FFFFFFFFFFFFFF0, 0, 0x10000)
    mutate("elst-durations-overflow", edit_overflow)

    def elst_count(tree):
        e = find(tree, b"moov", b"trak", b"edts", b"elst")[0]
        e[1] = e[1][:4] + struct.pack(">I", 0x7FFFFFFF) + e[1][8:]
    mutate("elst-count-2p31", elst_count)

    def base_offset(value):
        def fn(tree):
            tfhd = find(tree, b"moof", b"traf", b"tfhd")[0]
            body = bytearray(tfhd[1])
            flags = struct.unpack(">I", body[0:4])[0] | 0x1
            tfhd[1] = struct.pack(">I", flags) + body[4:8] + struct.pack(">Q", value) + bytes(body[8:])
        return fn
    mutate("base-data-offset-2p63", base_offset(0x7FFFFFFFFFFFFFFF))
    mutate("base-data-offset-past-end", base_offset(len(src) + 1000))

    def wide_child(tree):
        # The mvhd with a 64-bit size near 2^63 (inside a moov of a few hundred bytes).
        moov = find(tree, b"moov")[0]
        raw = ser(moov[1])
        size = struct.unpack(">I", raw[0:4])[0]
        wide = struct.pack(">I4sQ", 1, raw[4:8], 0x7FFFFFFFFFFFFFF0) + raw[8:size] + raw[size:]
        moov[1] = [[b"tail", wide]]
    mutate("mvhd-64bit-size-2p63", wide_child)

    def dup(path):
        def fn(tree):
            box = find(tree, *path)[0]
            parent = find(tree, *path[:-1])[0][1] if len(path) > 1 else tree
            parent.insert(parent.index(box) + 1, [box[0], box[1]])
        return fn
    mutate("mvhd-twice", dup([b"moov", b"mvhd"]))
    mutate("tfhd-twice", dup([b"moof", b"traf", b"tfhd"]))
    mutate("trak-twice", dup([b"moov", b"trak"]))

    def moof_type(tree):
        # The second fragment's moof renamed: one damaged box in the middle of the file.
        find(tree, b"moof")[1][0] = b"moog"
    mutate("second-moof-renamed", moof_type)

    def small_mdat(tree):
        # The first mdat says 8 bytes: its media then reads as boxes.
        mdat = [b for b in tree if b[0] == b"mdat"][0]
        i = tree.index(mdat)
        tree[i] = [b"tail", struct.pack(">I4s", 8, b"mdat") + mdat[1]]
    mutate("first-mdat-size-8", small_mdat)

    def version(path, v):
        def fn(tree):
            box = find(tree, *path)[0]
            box[1] = bytes([v]) + box[1][1:]
        return fn
    mutate("mdhd-version-2", version([b"moov", b"trak", b"mdia", b"mdhd"], 2))
    mutate("trun-version-7", version([b"moof", b"traf", b"trun"], 7))

    def tfdt_huge(tree):
        for tfdt in find(tree, b"moof", b"traf", b"tfdt"):
            tfdt[1] = bytes([1, 0, 0, 0]) + struct.pack(">Q", 0x7FFFFFFFFFFFFF00)
    mutate("tfdt-near-2p63", tfdt_huge)

    def sample_size_huge(tree):
        trun = [t for t in find(tree, b"moof", b"traf", b"trun") if t[1][2] & 0x2][0]   # one with sample sizes
        body = bytearray(trun[1])
        flags = struct.unpack(">I", body[0:4])[0] & 0xFFFFFF
        if flags & 0x200:
            p = 8 + (4 if flags & 1 else 0) + (4 if flags & 4 else 0) + (4 if flags & 0x100 else 0)
            body[p:p + 4] = struct.pack(">I", 0xFFFFFFFF)
        trun[1] = bytes(body)
    mutate("trun-sample-size-2p32", sample_size_huge)


main()

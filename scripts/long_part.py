"""A synthetic Reel `.part` of N 0.5 s fragments (two tracks: 15 video and 24 audio samples each),
with the signature, a moov of libavformat's shape and an incomplete fragment at its end: for timing
start-up recovery on a long recording by hand (docs/RELIABILITY.md). Usage: long_part.py FILE N
(a week: N = 1209600, 8.2 GB)."""
import struct, sys
N = int(sys.argv[2])          # fragments: a week of 0.5 s fragments = 1_209_600
def box(t, body): return struct.pack(">I", 8 + len(body)) + t + body
def full(t, v, f, body): return box(t, struct.pack(">I", (v << 24) | f) + body)
stbl = box(b"stbl", box(b"stsd", bytes(16)) + box(b"stts", bytes(8)) + box(b"stsc", bytes(8)) + box(b"stsz", bytes(12)) + box(b"stco", bytes(8)))
minf = box(b"minf", box(b"vmhd", bytes(12)) + box(b"dinf", box(b"dref", bytes(20))) + stbl)
mdia = box(b"mdia", box(b"mdhd", bytes(24)) + box(b"hdlr", bytes(37)) + minf)
trak = box(b"trak", box(b"tkhd", bytes(84)) + box(b"edts", box(b"elst", bytes(20))) + mdia)
moov = box(b"moov", box(b"mvhd", bytes(100)) + trak + box(b"mvex", box(b"trex", bytes(24))))
head = box(b"ftyp", b"isom" + struct.pack(">I", 512) + b"isomiso2avc1mp41") + box(b"free", bytes(8)) + box(b"free", b"ReelPart\x01") + moov
V, A = 15, 24                 # samples per 0.5 s: 30 fps video, 48 kHz AAC
vs, as_ = [400] * V, [8] * A  # small payloads: the walk never reads them; the count of boxes is what costs
def moof(n):
    def traf(track, per, fl, sizes, at):
        samples = b"".join((struct.pack(">IIII", 3000, s, 0, 0) if per == 16 else struct.pack(">II", 1024, s)) for s in sizes)
        return box(b"traf", full(b"tfhd", 0, 0x20000, struct.pack(">I", track)) + full(b"tfdt", 1, 0, bytes(8)) + full(b"trun", 0, fl, struct.pack(">Ii", len(sizes), at) + samples))
    probe = box(b"moof", full(b"mfhd", 0, 0, struct.pack(">I", n)) + traf(1, 16, 0xf01, vs, 0) + traf(2, 8, 0x301, as_, 0))
    size = len(probe)
    return box(b"moof", full(b"mfhd", 0, 0, struct.pack(">I", n)) + traf(1, 16, 0xf01, vs, size + 8) + traf(2, 8, 0x301, as_, size + 8 + sum(vs)))
frag = moof(1) + box(b"mdat", bytes(sum(vs) + sum(as_)))
with open(sys.argv[1], "wb") as f:
    f.write(head)
    for i in range(N): f.write(frag)
    f.write(frag[:300])       # the incomplete fragment a crash leaves
print(len(frag), "bytes a fragment")

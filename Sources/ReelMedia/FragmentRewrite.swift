/// What `MP4Writer` changes in a movie fragment before it reaches the file, once an undo has cut
/// the file back: libavformat's clock keeps running over what was cut away (its timestamps must
/// only increase), so each track's `tfdt` (the fragment's start on the track's timeline) is moved
/// back by the time removed, and `mfhd`'s sequence number is the writer's own count, so the
/// fragments left in the file count 1, 2, 3... with no hole. Nothing else in a moof depends on
/// time or position: sample durations and offsets are relative (`default_base_moof`).
///
/// Rules: every top-level box in `bytes` from `start` is walked; each `moof` gets the next
/// sequence number and each of its `traf`s has `shifts[track_ID]` (ticks of the track's media
/// timescale) subtracted from its `tfdt` (version 0: 32-bit, 1: 64-bit). A box that does not fit,
/// a traf without tfhd, or a tfdt that would go negative is an error: the bytes are left as they
/// were from that box on and the caller treats it as a failed write.
enum FragmentRewrite {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Patches the moofs in `bytes[start...]`; `sequence` is the number of the last fragment
    /// before them (advanced by one per moof). Returns the number of moofs.
    @discardableResult
    static func apply(_ bytes: inout [UInt8], from start: Int, shifts: [UInt32: Int64], sequence: inout UInt32) throws(Failure) -> Int {
        var o = start, moofs = 0
        while o < bytes.count {
            let (size, header) = try boxSize(bytes, o, limit: bytes.count)
            if type(bytes, o) == "moof" {
                sequence += 1
                moofs += 1
                var c = o + header
                while c < o + size {
                    let (csize, cheader) = try boxSize(bytes, c, limit: o + size)
                    switch type(bytes, c) {
                    case "mfhd":
                        guard csize >= 16 else { throw Failure(description: "mfhd of \(csize) bytes at \(c)") }
                        put(&bytes, c + 12, UInt64(sequence), 4)
                    case "traf": try patchTraf(&bytes, c + cheader, c + csize, shifts)
                    default: break
                    }
                    c += csize
                }
            }
            o += size
        }
        return moofs
    }

    private static func patchTraf(_ b: inout [UInt8], _ from: Int, _ end: Int, _ shifts: [UInt32: Int64]) throws(Failure) {
        var track: UInt32?
        var c = from
        while c < end {
            let (size, header) = try boxSize(b, c, limit: end)
            switch type(b, c) {
            case "tfhd":
                guard size >= 16 else { throw Failure(description: "tfhd of \(size) bytes at \(c)") }
                track = UInt32(get(b, c + 12, 4))
            case "tfdt":
                guard let track else { throw Failure(description: "tfdt before tfhd at \(c)") }
                let shift = shifts[track] ?? 0
                guard shift != 0 else { break }
                let wide = b[c + header] == 1
                let n = wide ? 8 : 4
                guard size >= header + 4 + n else { throw Failure(description: "tfdt of \(size) bytes at \(c)") }
                let old = Int64(bitPattern: get(b, c + header + 4, n))
                let new = old - shift
                guard new >= 0, wide || new <= Int64(UInt32.max) else {
                    throw Failure(description: "tfdt \(old) of track \(track) cannot move back by \(shift)")
                }
                put(&b, c + header + 4, UInt64(new), n)
            default: break
            }
            c += size
        }
    }

    private static func boxSize(_ b: [UInt8], _ o: Int, limit: Int) throws(Failure) -> (Int, Int) {
        guard o + 8 <= limit else { throw Failure(description: "box header at \(o) runs past \(limit)") }
        var size = Int(get(b, o, 4)), header = 8
        if size == 1 {
            guard o + 16 <= limit else { throw Failure(description: "64-bit box header at \(o) runs past \(limit)") }
            size = Int(get(b, o + 8, 8)); header = 16
        }
        guard size >= header, o + size <= limit else { throw Failure(description: "box '\(type(b, o))' of \(size) bytes at \(o) runs past \(limit)") }
        return (size, header)
    }

    private static func type(_ b: [UInt8], _ o: Int) -> String { String(decoding: b[(o + 4)..<(o + 8)], as: UTF8.self) }
    private static func get(_ b: [UInt8], _ o: Int, _ n: Int) -> UInt64 { b[o..<(o + n)].reduce(0) { $0 << 8 | UInt64($1) } }
    private static func put(_ b: inout [UInt8], _ o: Int, _ v: UInt64, _ n: Int) {
        for i in 0..<n { b[o + i] = UInt8(truncatingIfNeeded: v >> (8 * UInt64(n - 1 - i))) }
    }
}

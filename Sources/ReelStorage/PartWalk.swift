import ReelMedia

/// What a crash-left `NAME.mp4.part` is, read from its top-level boxes, its signature and its
/// moofs (never the media). Recovery decides from it alone what it may do to the file.
public enum PartContents: Equatable, Sendable {
    /// Reel's, with media: complete fragments (moof + mdat whose sizes agree with the moof's
    /// samples) up to `keep`; anything after `keep` is known to be what Reel was writing when it
    /// stopped (a fragment cut short, or the finisher's own interrupted write), which finishing cuts off.
    case playable(keep: Int64, fragments: Int)
    /// Reel's and finished already (its placeholder is the mdat header, a complete moov ends
    /// it): only the rename was missing.
    case finished
    /// Reel's, and nothing was recorded into it: the signature and only the boxes written before
    /// the first fragment (possibly a first fragment cut short).
    case noMedia
    /// No Reel signature: not Reel's to touch (why, for the warning).
    case notReels(String)
    /// Reel's, but not as Reel writes it (what is wrong and where): it cannot be finished.
    case damaged(String)
}

/// The walk behind `PartContents`: one read of at most `PartWalk.window` bytes per box header,
/// one read per moof (capped at `maxMoof`); checked arithmetic on every size and offset, so no
/// size, count or offset in the file can trap, loop or allocate beyond those caps. Pure: it sees
/// the file only through `read`.
public struct PartWalk {
    /// Bytes read at a time for box headers.
    public static let window = 4096
    /// The largest moof recovery reads (Reel's are a few KiB: 0.5 s of samples).
    public static let maxMoof: Int64 = 4 << 20
    /// The largest moov and take marker Reel writes are far below these.
    static let maxMoov: Int64 = 64 << 20
    static let maxMarker: Int64 = 8 + 4096

    let size: Int64
    /// Up to `count` bytes at `offset` (fewer only at the end of the file).
    let read: (Int64, Int) throws -> [UInt8]

    public init(size: Int64, read: @escaping (Int64, Int) throws -> [UInt8]) {
        self.size = size
        self.read = read
    }

    /// A box header at an offset: its type, its end (nil: beyond the end of the file, or
    /// beyond any 64-bit offset) and its header length; or `.cut`, fewer header bytes than it needs.
    enum Head: Equatable {
        case cut
        case box(type: String, size: UInt64, end: Int64?, headerLength: Int)
    }

    /// Read with ReelMedia's `MP4BoxHeader.fields`; the rules for sizes are recovery's own (a size
    /// of 0 is no "to the end" here, one past Int64.max is a box with no end), not `MP4BoxHeader.place`'s.
    func head(_ offset: Int64) throws -> Head {
        guard let h = MP4BoxHeader.fields(try read(offset, 16)) else { return .cut }
        guard h.size <= UInt64(Int64.max) else { return .box(type: h.type, size: h.size, end: nil, headerLength: h.headerLength) }
        let (end, over) = offset.addingReportingOverflow(Int64(h.size))
        return .box(type: h.type, size: h.size, end: over || end > size ? nil : end, headerLength: h.headerLength)
    }

    public func contents() throws -> PartContents {
        guard size > 0 else { return .notReels("it is empty, so nothing in it says it is Reel's") }
        // ftyp
        guard case let .box(ftypType, ftypSize, ftypEnd, _) = try head(0) else {
            return .notReels("it ends within its first box header (\(size) bytes)")
        }
        guard ftypType == "ftyp" else { return .notReels("it does not start with an ftyp box (found '\(ftypType)')") }
        guard ftypSize >= 8, ftypSize <= 4096, let place = ftypEnd else {
            return .notReels("its ftyp box claims \(ftypSize) bytes (\(size) in the file)")
        }
        // The placeholder (or, finished, the mdat header), then the signature.
        let sigAt = place + 16
        let sig = try read(sigAt, PartSignature.box.count)
        let placeholder = try head(place)
        guard let version = PartSignature.version(of: sig) else {
            return .notReels("no Reel signature after its ftyp box (a Reel before signatures wrote none: such a file plays as it is; rename it to .mp4 to keep it)")
        }
        guard version <= PartSignature.version else {
            return .notReels("it carries the signature of a newer Reel (version \(version); this one reads \(PartSignature.version))")
        }
        switch placeholder {
        case .box("free", 16, _, 8): break
        case let .box("mdat", mdatSize, mdatEnd, 16):
            guard mdatSize >= 16 + UInt64(PartSignature.box.count), let moovAt = mdatEnd,
                  case let .box("moov", _, moovEnd?, _) = try head(moovAt), moovEnd == size else {
                return .damaged("finished already, but its mdat at \(place) (\(mdatSize) bytes) is not followed by a complete moov box that ends the file")
            }
            return .finished
        default:
            return .damaged("the box after ftyp at \(place) is not the 16-byte placeholder Reel writes there")
        }
        // The movie box: cut short, nothing was recorded.
        var offset = sigAt + Int64(PartSignature.box.count)
        switch try head(offset) {
        case .cut: return .noMedia
        case let .box("moov", s, end, hl):
            guard s >= UInt64(hl), s <= UInt64(Self.maxMoov) else { return .damaged("its moov box at \(offset) claims \(s) bytes") }
            guard let end else { return .noMedia }
            if let why = MoovShape.problem(try read(offset, Int(s))) { return .damaged("its moov box at \(offset): \(why)") }
            offset = end
        case let .box(t, s, _, _):
            return .damaged("a box '\(t)' of \(s) bytes at \(offset), where Reel writes its moov box")
        }
        var keep = offset, fragments = 0
        walk: while offset < size {
            guard case let .box(type, boxSize, end, hl) = try head(offset) else { break walk }  // a header cut short: the tail
            guard boxSize >= UInt64(hl) else { return .damaged("a box '\(type)' at \(offset) claims \(boxSize) bytes, less than its header") }
            switch type {
            case "moof":
                switch try fragment(at: offset, moofSize: boxSize, moofEnd: end) {
                case let .whole(mdatEnd):
                    fragments += 1
                    offset = mdatEnd
                    keep = offset
                case .cutShort: break walk
                case let .damaged(why): return .damaged(why)
                }
            case "free":
                let body = try read(offset + Int64(hl), TakeMarker.signature.count)
                if body == TakeMarker.signature {
                    guard boxSize <= UInt64(Self.maxMarker) else { return .damaged("a take marker at \(offset) claims \(boxSize) bytes") }
                    guard let end else { break walk }  // a marker cut short, written with the fragment after it
                    offset = end
                    keep = offset
                } else if let end, fragments > 0, case let .box("moov", _, moovEnd, _) = try head(end), moovEnd == nil || moovEnd == size {
                    break walk  // the finisher's chapter titles and new moov, from a run that did not end: it redoes them
                } else if end == nil, TakeMarker.signature.starts(with: body) {
                    break walk  // a marker whose signature is cut short
                } else {
                    return .damaged("a free box at \(offset) that is neither a take marker nor the finisher's")
                }
            case "moov" where fragments > 0 && (end == nil || end == size):
                break walk  // the new moov of a finisher's run that did not end
            case "mdat":
                return .damaged("an mdat box at \(offset) with no moof before it")
            default:
                return .damaged("a box '\(type)' of \(boxSize) bytes at \(offset), which Reel does not write there")
            }
        }
        return fragments == 0 ? .noMedia : .playable(keep: keep, fragments: fragments)
    }

    enum Fragment: Equatable {
        case whole(end: Int64)
        /// What Reel was writing when it stopped: the moof or its mdat runs to the end of the file.
        case cutShort
        case damaged(String)
    }

    /// The moof at `offset` and the mdat after it. Whole when the mdat holds exactly the bytes the
    /// moof's samples take; cut short only when the file ends inside them as Reel writes them.
    func fragment(at offset: Int64, moofSize: UInt64, moofEnd: Int64?) throws -> Fragment {
        guard moofSize <= UInt64(Self.maxMoof) else { return .damaged("a moof at \(offset) claims \(moofSize) bytes (Reel's are a few KiB)") }
        let moof = try read(offset, Int(moofSize))
        guard let moofEnd else {
            // The file ends inside the moof: what there is must be the start of one.
            guard moof.count < Int(moofSize), MoofReader.isPrefixOfMoof(moof) else {
                return .damaged("a moof at \(offset) runs past the end of the file, and its first \(moof.count) bytes are not a moof's")
            }
            return .cutShort
        }
        let data: Range<Int64>
        switch MoofReader.sampleData(moof, at: offset) {
        case let .failure(why): return .damaged("the moof at \(offset): \(why)")
        case let .success(r): data = r
        }
        switch try head(moofEnd) {
        case .cut:
            return moofEnd + 16 > size ? .cutShort : .damaged("no mdat after the moof at \(offset)")
        case let .box("mdat", mdatSize, mdatEnd, hl):
            let payload = moofEnd + Int64(hl)
            guard mdatSize >= UInt64(hl), data.lowerBound == payload, UInt64(data.upperBound - moofEnd) == mdatSize else {
                return .damaged("the mdat at \(moofEnd) (\(mdatSize) bytes) does not hold the samples of the moof at \(offset) (\(data.lowerBound)..<\(data.upperBound))")
            }
            guard let mdatEnd else { return .cutShort }
            return .whole(end: mdatEnd)
        case let .box(t, _, _, _):
            return .damaged("a box '\(t)' at \(moofEnd) after the moof at \(offset), where its mdat belongs")
        }
    }
}

/// Where a moof's samples are, from its trafs (tfhd, trun), as Reel's muxer writes them
/// (`default-base-is-moof`, one trun per traf, sample sizes in the trun or the tfhd). Every read
/// is bounds-checked and every sum checked; a sample count can never exceed the bytes its trun has.
enum MoofReader {
    /// The byte range of the file the moof's samples take (from the first sample to the end of
    /// the last), or what is wrong.
    static func sampleData(_ m: [UInt8], at moofOffset: Int64) -> Result<Range<Int64>, WalkError> {
        do { return .success(try sampleRange(m, at: moofOffset)) } catch { return .failure(error) }
    }

    struct WalkError: Error, CustomStringConvertible { let description: String }

    static func children(_ m: [UInt8], _ from: Int, _ to: Int) throws(WalkError) -> [(type: String, body: Range<Int>)] {
        var out: [(type: String, body: Range<Int>)] = []
        var o = from
        while o < to {
            guard to - o >= 8 else { throw WalkError(description: "a box header cut short at \(o)") }
            let s = Int(be32(m, o))
            guard s >= 8, s <= to - o else { throw WalkError(description: "a box of \(s) bytes at \(o) runs past its parent") }
            out.append((readFourCC(m, o + 4), (o + 8)..<(o + s)))
            o += s
        }
        return out
    }

    static func sampleRange(_ m: [UInt8], at moofOffset: Int64) throws(WalkError) -> Range<Int64> {
        let top = try children(m, 0, m.count)
        guard top.count == 1, top[0].type == "moof" else { throw WalkError(description: "not one moof box") }
        var ranges: [Range<Int64>] = []
        for traf in try children(m, top[0].body.lowerBound, top[0].body.upperBound) where traf.type == "traf" {
            let kids = try children(m, traf.body.lowerBound, traf.body.upperBound)
            guard let tfhd = kids.first(where: { $0.type == "tfhd" }), tfhd.body.count >= 8 else {
                throw WalkError(description: "a traf without a complete tfhd")
            }
            var p = tfhd.body.lowerBound
            let flags = be32(m, p) & 0xff_ffff
            p += 8
            // Reel's muxer writes default-base-is-moof and no base_data_offset.
            guard flags & 0x1 == 0, flags & 0x2_0000 != 0 else { throw WalkError(description: "tfhd flags 0x\(String(flags, radix: 16)) are not Reel's (default-base-is-moof)") }
            if flags & 0x2 != 0 { p += 4 }
            if flags & 0x8 != 0 { p += 4 }
            var defaultSize: UInt32? = nil
            if flags & 0x10 != 0 {
                guard p + 4 <= tfhd.body.upperBound else { throw WalkError(description: "a tfhd cut short") }
                defaultSize = be32(m, p); p += 4
            }
            if flags & 0x20 != 0 { p += 4 }
            guard p <= tfhd.body.upperBound else { throw WalkError(description: "a tfhd cut short") }
            let truns = kids.filter { $0.type == "trun" }
            guard truns.count <= 1 else { throw WalkError(description: "\(truns.count) truns in one traf (Reel's muxer writes one)") }
            guard let trun = truns.first else { continue }
            var q = trun.body.lowerBound
            guard trun.body.count >= 8 else { throw WalkError(description: "a trun cut short") }
            let tf = be32(m, q) & 0xff_ffff
            let count = Int64(be32(m, q + 4)); q += 8
            guard tf & 0x1 != 0, q + 4 <= trun.body.upperBound else { throw WalkError(description: "a trun without a data offset") }
            let dataOffset = Int64(Int32(bitPattern: be32(m, q))); q += 4
            if tf & 0x4 != 0 { q += 4 }
            let per = [0x100, 0x200, 0x400, 0x800].reduce(0) { tf & UInt32($1) != 0 ? $0 + 4 : $0 }
            // The count is checked against the bytes the trun has before anything is summed.
            guard q <= trun.body.upperBound, count * Int64(per) <= Int64(trun.body.upperBound - q) else {
                throw WalkError(description: "a trun claiming \(count) samples in \(trun.body.count) bytes")
            }
            guard tf & 0x200 != 0 || defaultSize != nil else { throw WalkError(description: "sample sizes in neither the trun nor the tfhd") }
            var total: Int64 = 0
            if tf & 0x200 == 0 {
                let (t, over) = count.multipliedReportingOverflow(by: Int64(defaultSize ?? 0))
                guard !over else { throw WalkError(description: "a trun of \(count) samples of \(defaultSize ?? 0) bytes") }
                total = t
            }
            else {
                let sizeAt = (tf & 0x100 != 0 ? 4 : 0)
                for i in 0..<Int(count) { total += Int64(be32(m, q + i * per + sizeAt)) }
            }
            guard count > 0 else { continue }
            let (start, o1) = moofOffset.addingReportingOverflow(dataOffset)
            let (end, o2) = start.addingReportingOverflow(total)
            guard !o1, !o2, start >= 0 else { throw WalkError(description: "sample data at \(moofOffset) + \(dataOffset) for \(total) bytes is outside any file") }
            ranges.append(start..<end)
        }
        // Reel's muxer puts each track's samples one after the other: they tile one range.
        ranges.sort { $0.lowerBound < $1.lowerBound }
        guard let first = ranges.first, let last = ranges.last else { throw WalkError(description: "no samples") }
        for (a, b) in zip(ranges, ranges.dropFirst()) where a.upperBound != b.lowerBound {
            throw WalkError(description: "its tracks' samples at \(a) and \(b) leave a gap or overlap")
        }
        return first.lowerBound..<last.upperBound
    }

    /// Whether `b` (the start of a file's last box, cut short) is the start of a moof as Reel
    /// writes one: complete children mfhd and traf, the last possibly cut short.
    static func isPrefixOfMoof(_ b: [UInt8]) -> Bool {
        guard b.count >= 8, readFourCC(b, 4) == "moof" else { return false }
        var o = 8
        while b.count - o >= 8 {
            let s = Int(be32(b, o))
            guard s >= 8, ["mfhd", "traf"].contains(readFourCC(b, o + 4)) else { return false }
            if s > b.count - o { return true }
            o += s
        }
        return true
    }
}

/// The shape of the (sample-less) moov Reel's muxer writes: in each box down to the sample
/// tables only the children libavformat writes there, each once (but `trak` and `trex`), every
/// one required present, the headers whose size follows from their version of that size.
/// What the finisher copies into the finished file's moov is checked here first.
enum MoovShape {
    /// Allowed children of each container, and which must be there.
    static let allowed: [String: (may: Set<String>, must: Set<String>)] = [
        "moov": (["mvhd", "trak", "mvex", "udta", "meta"], ["mvhd", "trak", "mvex"]),
        "trak": (["tkhd", "edts", "mdia", "tref", "udta"], ["tkhd", "mdia"]),
        "edts": (["elst"], ["elst"]),
        "mdia": (["mdhd", "hdlr", "minf"], ["mdhd", "hdlr", "minf"]),
        "minf": (["vmhd", "smhd", "nmhd", "gmhd", "dinf", "stbl"], ["dinf", "stbl"]),
        "dinf": (["dref"], ["dref"]),
        "stbl": (["stsd", "stts", "stsc", "stsz", "stco", "co64", "ctts", "stss", "sgpd", "sbgp", "sdtp"], ["stsd", "stts", "stsc", "stsz"]),
        "mvex": (["mehd", "trex"], ["trex"]),
    ]
    /// Body sizes (after the 8-byte header) of version 0 and 1 of the time headers.
    static let headerBodies: [String: (v0: Int, v1: Int)] = ["mvhd": (100, 112), "tkhd": (84, 96), "mdhd": (24, 36)]

    static func problem(_ m: [UInt8]) -> String? {
        do {
            let top = try MoofReader.children(m, 0, m.count)
            guard top.count == 1, top[0].type == "moov" else { return "not one moov box" }
            return try check("moov", m, top[0].body)
        } catch { return "\(error)" }
    }

    private static func check(_ type: String, _ m: [UInt8], _ body: Range<Int>) throws -> String? {
        guard let rule = allowed[type] else { return nil }
        let kids = try MoofReader.children(m, body.lowerBound, body.upperBound)
        var seen: Set<String> = []
        for k in kids {
            guard rule.may.contains(k.type) else { return "a '\(k.type)' box in its \(type)" }
            guard seen.insert(k.type).inserted || k.type == "trak" || k.type == "trex" else { return "two '\(k.type)' boxes in its \(type)" }
            if let sizes = headerBodies[k.type] {
                guard k.body.count >= 4 else { return "a \(k.type) of \(k.body.count + 8) bytes" }
                let v = m[k.body.lowerBound]
                guard (v == 0 && k.body.count == sizes.v0) || (v == 1 && k.body.count == sizes.v1) else {
                    return "a version \(v) \(k.type) of \(k.body.count + 8) bytes"
                }
            }
            if let why = try check(k.type, m, k.body) { return why }
        }
        if let missing = rule.must.subtracting(seen).sorted().first { return "no '\(missing)' box in its \(type)" }
        return nil
    }
}

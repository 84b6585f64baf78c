import ReelCore

// MP4 boxes as bytes, for `MP4Finisher` and start-up recovery: top-level box headers
// (`MP4BoxHeader`), big-endian fields, boxes built in memory, `Bytes` (a box read into memory,
// every field read checked against its box first) and the checked arithmetic on what boxes say.
// Recovery (`PartWalk`, ReelStorage) reads headers, fields and types with the `package` ones here.

// MARK: - Top-level box headers

/// A box header as it starts the first 8 or 16 bytes given: type, size (0: the box runs to the end
/// of the file; a 64-bit size read when the 32-bit one is 1) and header length. nil when the bytes
/// are too few or a 64-bit size is past Int64.max. Recovery (`Storage.partContents`) and the
/// finisher both walk boxes with it; `place(_:at:fileSize:)` also checks the box against the file.
public struct MP4BoxHeader: Sendable, Equatable {
    public var type: String
    public var size: Int64
    public var headerLength: Int

    public init?(_ b: [UInt8]) {
        guard let f = Self.fields(b), f.size <= UInt64(Int64.max) else { return nil }
        type = f.type
        size = Int64(f.size)
        headerLength = f.headerLength
    }

    /// The header as the first 8 or 16 bytes given state it: type (`readFourCC`), size (the 32-bit
    /// one, or the 64-bit one when that is 1, unchecked: it may be past Int64.max) and header
    /// length. nil when the bytes are too few. What the finisher (through `init`) and start-up
    /// recovery (`PartWalk`, whose rules for sizes are its own) read a header with.
    package static func fields(_ b: [UInt8]) -> (type: String, size: UInt64, headerLength: Int)? {
        guard b.count >= 8 else { return nil }
        let size = be32(b, 0)
        if size == 1 {
            guard b.count >= 16 else { return nil }
            return (readFourCC(b, 4), be64(b, 8), 16)
        }
        return (readFourCC(b, 4), UInt64(size), 8)
    }

    /// Where the box ends when it starts at `offset`: nil if that overflows.
    public func end(from offset: Int64) -> Int64? {
        let (e, overflow) = offset.addingReportingOverflow(size)
        return overflow ? nil : e
    }

    /// A top-level box at `offset` in a file of `fileSize` bytes, given the (up to) 16 bytes there.
    public enum Placement: Sendable, Equatable {
        /// `offset` is the end of the file.
        case end
        /// A whole box inside the file (a size of 0, "to the end", is made the true size).
        case box(MP4BoxHeader)
        /// A box that runs past the end of the file (nil: its header itself is cut short), as the
        /// last box of a file cut short by a crash is.
        case cutShort(MP4BoxHeader?)
        /// Cannot be a box: a size smaller than its header, or a 64-bit size past Int64.max.
        case damaged(String)
    }

    public static func place(_ head: [UInt8], at offset: Int64, fileSize: Int64) -> Placement {
        guard offset >= 0, offset < fileSize else { return .end }
        guard head.count >= 8 else { return .cutShort(nil) }
        if be32(head, 0) == 1 {
            guard head.count >= 16 else { return .cutShort(nil) }
            guard be64(head, 8) <= UInt64(Int64.max) else { return .damaged("has a 64-bit size of \(be64(head, 8))") }
        }
        guard var h = MP4BoxHeader(head) else { return .cutShort(nil) }
        if h.size == 0 && h.headerLength == 8 { h.size = fileSize - offset }   // a 64-bit size of 0 is not "to the end"
        guard h.size >= Int64(h.headerLength) else {
            return .damaged("has a size of \(h.size), less than its \(h.headerLength)-byte header")
        }
        guard let end = h.end(from: offset), end <= fileSize else { return .cutShort(h) }
        return .box(h)
    }
}

// MARK: - Bytes

/// The big-endian field at `o` (the caller has checked that its bytes are there: an index past the
/// end traps). Start-up recovery (`PartWalk`) reads with them too.
package func be32(_ b: [UInt8], _ o: Int) -> UInt32 {
    UInt32(b[o]) << 24 | UInt32(b[o + 1]) << 16 | UInt32(b[o + 2]) << 8 | UInt32(b[o + 3])
}
package func be64(_ b: [UInt8], _ o: Int) -> UInt64 { UInt64(be32(b, o)) << 32 | UInt64(be32(b, o + 4)) }
/// A box type as text: printable ASCII as it is, any other byte as \xHH (a damaged type must not
/// put control characters or combining marks into a message or a log line). Start-up recovery
/// (`PartWalk`) names box types with it too.
package func readFourCC(_ b: [UInt8], _ o: Int) -> String {
    var s = ""
    for c in b[o..<(o + 4)] {
        if (0x20...0x7e).contains(c) && c != UInt8(ascii: "\\") { s.unicodeScalars.append(Unicode.Scalar(c)) }
        else { s += "\\x" + String(c, radix: 16, uppercase: false).leftPadded(to: 2) }
    }
    return s
}

private extension String {
    func leftPadded(to n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }
}
func put32(_ b: inout [UInt8], _ v: UInt32) { b += [UInt8(v >> 24), UInt8(v >> 16 & 0xff), UInt8(v >> 8 & 0xff), UInt8(v & 0xff)] }
func put64(_ b: inout [UInt8], _ v: UInt64) { put32(&b, UInt32(v >> 32)); put32(&b, UInt32(v & 0xffff_ffff)) }
/// A box; past 4 GiB with a 64-bit size (a moov that large is allowed by the format).
func box(_ type: String, _ body: [UInt8]) -> [UInt8] {
    var b: [UInt8] = []
    b.reserveCapacity(body.count + 16)
    if body.count + 8 <= Int(UInt32.max) { put32(&b, UInt32(body.count + 8)); b += Array(type.utf8) }
    else { put32(&b, 1); b += Array(type.utf8); put64(&b, UInt64(body.count + 16)) }
    b += body
    return b
}
func fullBox(_ type: String, version: UInt8, flags: UInt32 = 0, _ body: [UInt8]) -> [UInt8] {
    box(type, [version, UInt8(flags >> 16 & 0xff), UInt8(flags >> 8 & 0xff), UInt8(flags & 0xff)] + body)
}

extension Array where Element == UInt8 {
    /// Appends a box (a full box with `version`) whose body `fill` appends in place, then writes its
    /// size in front: the new moov's tables are built once, in the moov, never copied into each
    /// parent box in turn. Past 4 GiB the size is a 64-bit one (8 bytes moved in, rare).
    mutating func appendBox<E: Error>(_ type: String, version: UInt8? = nil, flags: UInt32 = 0,
                                                  _ fill: (inout [UInt8]) throws(E) -> Void) throws(E) {
        let start = count
        append(contentsOf: [0, 0, 0, 0])
        append(contentsOf: type.utf8)
        if let version { append(contentsOf: [version, UInt8(flags >> 16 & 0xff), UInt8(flags >> 8 & 0xff), UInt8(flags & 0xff)]) }
        try fill(&self)
        var size = UInt64(count - start)
        if size > UInt64(UInt32.max) {
            size += 8
            var wide: [UInt8] = []
            put64(&wide, size)
            insert(contentsOf: wide, at: start + 8)
            self[start + 3] = 1
            return
        }
        self[start] = UInt8(size >> 24); self[start + 1] = UInt8(size >> 16 & 0xff)
        self[start + 2] = UInt8(size >> 8 & 0xff); self[start + 3] = UInt8(size & 0xff)
    }
}

/// A box inside a byte array: its type, the whole box and its body (after the header).
struct Box {
    let type: String
    let whole: Range<Int>
    let body: Range<Int>
}

/// A box read into memory (the moov, one moof) and its offset in the file. Every field is read
/// through `u8`/`u32`/`u64`, which check that it lies inside its box's body first.
struct Bytes {
    let b: [UInt8]
    let base: Int64

    func at(_ box: Box) -> Int64 { base + Int64(box.whole.lowerBound) }
    func damaged(_ box: Box, _ what: String) -> Damaged { Damaged(box: box.type, offset: at(box), what: what) }

    private func check(_ box: Box, _ o: Int, _ n: Int, _ name: String) throws(Damaged) -> Int {
        guard o >= 0, o <= box.body.count - n else {
            throw damaged(box, "is cut short: its \(name) (\(n) bytes at byte \(o) of its body) lies past its \(box.body.count)-byte body")
        }
        return box.body.lowerBound + o
    }
    func u8(_ box: Box, _ o: Int, _ name: String) throws(Damaged) -> UInt8 { b[try check(box, o, 1, name)] }
    func u32(_ box: Box, _ o: Int, _ name: String) throws(Damaged) -> UInt32 { be32(b, try check(box, o, 4, name)) }
    func u64(_ box: Box, _ o: Int, _ name: String) throws(Damaged) -> UInt64 { be64(b, try check(box, o, 8, name)) }
    func fourCC(_ box: Box, _ o: Int, _ name: String) throws(Damaged) -> String { readFourCC(b, try check(box, o, 4, name)) }

    /// A full box's version, which must be one of `versions`.
    func version(_ box: Box, _ versions: ClosedRange<UInt8> = 0...1) throws(Damaged) -> UInt8 {
        let v = try u8(box, 0, "version")
        guard versions.contains(v) else { throw damaged(box, "has version \(v) (\(versions.lowerBound == versions.upperBound ? "only \(versions.lowerBound)" : "\(versions.lowerBound) or \(versions.upperBound)") exists)") }
        return v
    }

    /// The boxes in `parent`'s body, in order; `parent` nil: the whole array as one box.
    func children(_ parent: Box) throws(Damaged) -> [Box] {
        var out: [Box] = []
        var o = parent.body.lowerBound
        let upper = parent.body.upperBound
        while o < upper {
            let where_ = base + Int64(o)
            guard upper - o >= 8 else { throw Damaged(box: parent.type, offset: at(parent), what: "ends with \(upper - o) stray bytes at offset \(where_)") }
            var size = Int(be32(b, o)), hl = 8
            if size == 1 {
                guard upper - o >= 16 else { throw Damaged(box: parent.type, offset: at(parent), what: "holds a box header cut short at offset \(where_)") }
                let wide = be64(b, o + 8)
                guard wide <= UInt64(upper - o) else {
                    throw Damaged(box: readFourCC(b, o + 4), offset: where_, what: "has a 64-bit size of \(wide), past its parent \(parent.type) (\(upper - o) bytes left)")
                }
                size = Int(wide); hl = 16
            } else if size == 0 { size = upper - o }
            let type = readFourCC(b, o + 4)
            guard size >= hl else { throw Damaged(box: type, offset: where_, what: "has a size of \(size), less than its \(hl)-byte header") }
            guard size <= upper - o else { throw Damaged(box: type, offset: where_, what: "has a size of \(size), past its parent \(parent.type) (\(upper - o) bytes left)") }
            out.append(Box(type: type, whole: o..<(o + size), body: (o + hl)..<(o + size)))
            o += size
        }
        return out
    }

    /// The one child of `type` (nil: none); two are damage.
    func only(_ type: String, in kids: [Box], of parent: Box) throws(Damaged) -> Box? {
        let found = kids.filter { $0.type == type }
        guard found.count <= 1 else { throw damaged(found[1], "is the second \(type) box in the \(parent.type) at offset \(at(parent))") }
        return found.first
    }
    func only(_ type: String, in parent: Box) throws(Damaged) -> Box? { try only(type, in: try children(parent), of: parent) }
    func required(_ type: String, in parent: Box) throws(Damaged) -> Box {
        guard let b = try only(type, in: parent) else { throw damaged(parent, "has no \(type) box") }
        return b
    }

    var whole: Box { Box(type: b.count >= 8 ? readFourCC(b, 4) : "box", whole: 0..<b.count, body: 0..<b.count) }
}

/// `value * num / den` (value, num >= 0, den > 0) with `rounding`, nil when it does not fit Int64.
func scaled(_ value: Int64, _ num: Int64, _ den: Int64, rounding: Rounding = .nearest) -> Int64? {
    guard value >= 0, num >= 0, den > 0 else { return nil }
    let (hi, lo) = UInt64(value).multipliedFullWidth(by: UInt64(num))
    let d = UInt64(den)
    guard hi < d else { return nil }
    var (q, r) = d.dividingFullWidth((hi, lo))
    let up: Bool
    switch rounding {
    case .nearest: up = r >= d - r
    case .down: up = false
    case .up: up = r != 0
    }
    if up && r != 0 { q += 1; r = 0 }
    return q <= UInt64(Int64.max) ? Int64(q) : nil
}

/// Bytes as MiB, or KiB below one MiB.
func amount(_ bytes: Int) -> String { bytes >= 1 << 20 ? "\((bytes + (1 << 20) - 1) >> 20) MiB" : "\((bytes + 1023) >> 10) KiB" }

/// `a + b`, nil on overflow.
func sum(_ a: Int64, _ b: Int64) -> Int64? {
    let (s, o) = a.addingReportingOverflow(b)
    return o ? nil : s
}

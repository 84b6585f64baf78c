/// The marker `MP4Writer` puts in the file where a take begins, and `MP4Finisher` turns into a
/// chapter: a top-level `free` box (every reader skips it; once finished it lies inside the mdat)
/// written at the first fragment boundary after the take's first frame went to the encoder, so it
/// is synced with that fragment and a crash-left `.part` keeps it.
///
/// Payload (big-endian): the signature "ReelTake", a version byte (1), the take index (u32, from
/// 1), the take's start (u64) in presentation time (0 = the file's first frame) in the chapter
/// clock's units (the video track's media timescale; without video, the audio track's: samples),
/// then the label as UTF-8 to the end of the box (empty: none, the chapter is "Take N").
public struct TakeMarker: Equatable, Sendable {
    public static let signature: [UInt8] = Array("ReelTake".utf8)
    public static let version: UInt8 = 1
    /// Labels longer than this are cut (at a character boundary): the Nero `chpl` box holds 255.
    public static let maxLabelBytes = 255
    /// Bytes before the label: box header, signature, version, index, start.
    static let fixedBytes = 8 + 8 + 1 + 4 + 8

    public var index: Int
    public var start: Int64
    public var label: String

    public init(index: Int, start: Int64, label: String) {
        self.index = index
        self.start = start
        self.label = TakeMarker.cut(label)
    }

    /// The whole `free` box.
    public var box: [UInt8] {
        let l = Array(label.utf8)
        var b: [UInt8] = []
        b.reserveCapacity(Self.fixedBytes + l.count)
        func put(_ v: UInt64, _ n: Int) { for i in (0..<n).reversed() { b.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) } }
        put(UInt64(Self.fixedBytes + l.count), 4)
        b += Array("free".utf8) + Self.signature + [Self.version]
        put(UInt64(index), 4)
        put(UInt64(bitPattern: start), 8)
        return b + l
    }

    /// Whether a `free` box's body (after its 8-byte header) starts with the signature.
    public static func isMarker(body: [UInt8]) -> Bool { body.starts(with: signature) }

    /// Reads a marker from a `free` box's body that starts with the signature. Throws what is
    /// wrong with it (the finisher logs that and skips the marker).
    public init(body b: [UInt8]) throws(MediaError) {
        let s = Self.signature.count
        guard b.count >= s + 13 else { throw MediaError("a take marker of \(b.count + 8) bytes is cut short (at least \(Self.fixedBytes))") }
        guard b[s] == Self.version else { throw MediaError("a take marker of version \(b[s]) (this Reel reads version \(Self.version))") }
        func get(_ o: Int, _ n: Int) -> UInt64 { b[o..<(o + n)].reduce(0) { $0 << 8 | UInt64($1) } }
        let index = get(s + 1, 4), start = Int64(bitPattern: get(s + 5, 8))
        guard index >= 1 else { throw MediaError("a take marker with take index 0") }
        guard start >= 0 else { throw MediaError("take \(index)'s marker starts at \(start), before the file") }
        let raw = b[(s + 13)...]
        guard raw.count <= Self.maxLabelBytes, let label = String(validating: raw, as: UTF8.self) else {
            throw MediaError("take \(index)'s marker has a label that is not UTF-8 of at most \(Self.maxLabelBytes) bytes")
        }
        self.index = Int(index)
        self.start = start
        self.label = label
    }

    /// `label` cut to `maxLabelBytes` of UTF-8 at a character boundary.
    static func cut(_ label: String) -> String {
        guard label.utf8.count > maxLabelBytes else { return label }
        var out = ""
        for c in label where out.utf8.count + String(c).utf8.count <= maxLabelBytes { out.append(c) }
        return out
    }
}

/// What makes a `.part` recognisably Reel's: a top-level `free` box `MP4Writer` puts right after
/// the 16-byte placeholder that follows `ftyp`, before any media. Every reader skips a `free`
/// box; once the file is finished the placeholder is the `mdat` header and the signature lies at
/// the start of the mdat's payload, at the same offset. Start-up recovery cuts, removes or
/// finishes nothing that does not carry it.
///
/// Layout (big-endian): size (u32, 17), `free`, "ReelPart", version (u8, 1).
public enum PartSignature {
    public static let magic: [UInt8] = Array("ReelPart".utf8)
    public static let version: UInt8 = 1
    /// The whole box, as written.
    public static let box: [UInt8] = [0, 0, 0, 17] + Array("free".utf8) + magic + [version]

    /// What the box `bytes` (read at the offset where the signature belongs) says: the version of
    /// the Reel signature it carries, or nil when it is not one (fewer bytes than the box, another
    /// type or size, another magic).
    public static func version(of bytes: [UInt8]) -> UInt8? {
        guard bytes.count >= box.count, Array(bytes[0..<(box.count - 1)]) == Array(box.dropLast()) else { return nil }
        return bytes[box.count - 1]
    }
}

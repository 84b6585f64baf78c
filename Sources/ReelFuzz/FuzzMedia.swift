import Foundation
import Glibc
import ReelMedia

/// The media parsers' checks (`fuzz-finish`, `fuzz-boxes`, `fuzz-marker`; `make fuzz`), replayed
/// by `make test` as the request and config ones are. A trap inside the parser is a crash; a broken
/// promise comes back as a problem.
extension FuzzChecks {
    /// A `.part` is at most a few MB in a seed; the fuzzer mutates structure, not media.
    public static let finishMaxLen = 256 * 1024
    /// A take marker's body: the finisher reads at most 4 KiB of one.
    public static let markerMaxLen = 4096

    // MARK: the finisher

    /// `bytes` as a `.part` file given to `MP4Finisher.finish`. Checks:
    /// - refused: the file is byte for byte as it was, and the error names the file;
    /// - finished: ftyp, a 64-bit mdat from the placeholder up to `moovOffset`, then a moov of
    ///   `moovBytes` to the end of the file; finishing it again changes nothing.
    public static func finish(_ bytes: some Collection<UInt8>) -> [String] {
        let input = Array(bytes)
        let path = scratchPath("finish.mp4.part")
        guard write(input, to: path) else { return ["cannot write the scratch file \(path)"] }
        defer { unlink(path) }
        do {
            let r = try MP4Finisher.finish(path: path)
            guard let after = read(path) else { return ["cannot read the scratch file \(path) back"] }
            if r.alreadyFinished {
                return after == input ? [] : ["an already finished file was changed"]
            }
            var problems = finishedLayout(after, r)
            do {
                let again = try MP4Finisher.finish(path: path)
                if !again.alreadyFinished || again.moovOffset != r.moovOffset { problems.append("finishing again gave \(again), not the same moov") }
                if read(path) != after { problems.append("finishing a finished file changed it") }
            } catch {
                problems.append("a finished file cannot be finished again: \(error)")
            }
            return problems
        } catch {
            var problems: [String] = []
            if case .system = error.kind { problems.append("a system error on a scratch file: \(error)") }
            if read(path) != input { problems.append("refused (\(error)) but changed the file") }
            if !error.description.utf8.starts(with: "cannot finish \(path): ".utf8) { problems.append("the error does not name the file: \(error)") }
            if error.description.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value > 0x7e }) && !path.unicodeScalars.contains(where: { $0.value > 0x7e }) {
                problems.append("the error holds bytes that are not printable ASCII: \(error.description.debugDescription)")
            }
            if error.kind == .damaged, error.box == nil || error.offset == nil { problems.append("damage without its box and offset: \(error)") }
            return problems
        }
    }

    /// What the finisher makes of `bytes` (a copy is finished, never the file): "finished: ...",
    /// "already finished", or the error. `fuzz-finish --explain FILE...` prints it per file.
    public static func explainFinish(_ bytes: [UInt8], name: String) -> String {
        let path = scratchPath(name)
        guard write(bytes, to: path) else { return "cannot write the scratch file \(path)" }
        defer { unlink(path) }
        do {
            let r = try MP4Finisher.finish(path: path)
            return r.alreadyFinished ? "already finished" : "finished: \(r.fragments) fragments, \(r.samples) samples, \(r.chapters) chapters, a \(r.moovBytes)-byte moov\(r.warnings.map { "; " + $0 }.joined())"
        } catch {
            return error.description
        }
    }

    /// ftyp, a 64-bit mdat ending where the moov starts, one moov to the end of the file.
    static func finishedLayout(_ f: [UInt8], _ r: MP4Finisher.Result) -> [String] {
        func be(_ o: Int, _ n: Int) -> UInt64? { o >= 0 && o + n <= f.count ? f[o..<(o + n)].reduce(0) { $0 << 8 | UInt64($1) } : nil }
        func type(_ o: Int) -> String { o + 8 <= f.count ? String(decoding: f[(o + 4)..<(o + 8)], as: UTF8.self) : "" }
        guard let ftyp = be(0, 4), type(0) == "ftyp", ftyp >= 8, ftyp < UInt64(f.count) else { return ["finished without an ftyp first"] }
        let place = Int(ftyp)
        guard type(place) == "mdat", be(place, 4) == 1, let mdat = be(place + 8, 8) else { return ["finished without a 64-bit mdat after ftyp"] }
        guard mdat >= 16, UInt64(place) + mdat == UInt64(r.moovOffset) else { return ["the mdat ends at \(UInt64(place) &+ mdat), the moov is at \(r.moovOffset)"] }
        let m = Int(r.moovOffset)
        guard type(m) == "moov", let size = be(m, 4), size == UInt64(r.moovBytes), m + r.moovBytes == f.count else {
            return ["no moov of \(r.moovBytes) bytes from \(r.moovOffset) to the end (\(f.count) bytes)"]
        }
        return []
    }

    // MARK: the top-level box walker

    /// `bytes` as a file walked box by box with `MP4BoxHeader.place` (as the finisher walks the
    /// top level), each step compared with a reading of this check's own in unsigned arithmetic: the
    /// same box, cut short or damaged; a box always inside the file and at least its header long, so
    /// the walk moves on and ends within `bytes.count / 8` steps.
    public static func boxes(_ bytes: some Collection<UInt8>) -> [String] {
        let f = Array(bytes)
        let fileSize = Int64(f.count)
        var offset: Int64 = 0
        var steps = 0
        while true {
            let o = Int(offset)
            let head = Array(f[o..<min(f.count, o + 16)])
            let placed = MP4BoxHeader.place(head, at: offset, fileSize: fileSize)
            let shown: String
            switch placed {
            case .end: shown = "end"
            case .box(let h): shown = "box \(h.type) \(h.size) \(h.headerLength)"
            case .cutShort(nil): shown = "cut"
            case .cutShort(let h?): shown = "cut \(h.type) \(h.size)"
            case .damaged: shown = "damaged"
            }
            let expected = referenceBox(f, o)
            guard shown == expected else { return ["at offset \(offset): place says '\(shown)', expected '\(expected)'"] }
            guard case let .box(h) = placed else { return [] }
            if let plain = MP4BoxHeader(head), plain.type != h.type || plain.headerLength != h.headerLength || (plain.size != 0 && plain.size != h.size) {
                return ["at offset \(offset): MP4BoxHeader(bytes) reads \(plain), place \(h)"]
            }
            guard h.size >= Int64(h.headerLength), let end = h.end(from: offset), end <= fileSize else {
                return ["at offset \(offset): a box of \(h.size) bytes outside the file of \(fileSize)"]
            }
            offset = end
            steps += 1
            guard steps <= f.count / 8 else { return ["\(steps) boxes in \(f.count) bytes"] }
        }
    }

    /// The box at `o` read with UInt64 sizes (no overflow possible below 2^64).
    static func referenceBox(_ f: [UInt8], _ o: Int) -> String {
        guard o < f.count else { return "end" }
        let left = UInt64(f.count - o)
        func be(_ at: Int, _ n: Int) -> UInt64 { f[at..<(at + n)].reduce(0) { $0 << 8 | UInt64($1) } }
        guard left >= 8 else { return "cut" }
        // The type as the finisher shows it: printable ASCII but the backslash, the rest as \xHH.
        let type = f[(o + 4)..<(o + 8)].map { c in
            (0x20...0x7e).contains(c) && c != 0x5c ? String(UnicodeScalar(c)) : String(format: "\\x%02x", c)
        }.joined()
        var size = be(o, 4), header: UInt64 = 8
        if size == 1 {
            guard left >= 16 else { return "cut" }
            size = be(o + 8, 8); header = 16
            guard size <= UInt64(Int64.max) else { return "damaged" }
        } else if size == 0 { size = left }
        guard size >= header else { return "damaged" }
        return size > left ? "cut \(type) \(size)" : "box \(type) \(size) \(header)"
    }

    // MARK: the take-marker reader

    /// `bytes` as the body of a `free` box that starts with the take-marker signature (the
    /// signature is put in front). Read: the marker written again is the same bytes. Refused: a
    /// message.
    public static func marker(_ bytes: some Collection<UInt8>) -> [String] {
        let body = TakeMarker.signature + Array(bytes)
        guard TakeMarker.isMarker(body: body) else { return ["isMarker refuses a body that starts with the signature"] }
        do {
            let m = try TakeMarker(body: body)
            let again = Array(m.box.dropFirst(8))
            return again == body ? [] : ["marker \(m) reads from \(body.count) bytes but writes \(again.count) others"]
        } catch {
            return error.message.isEmpty ? ["refused without a message"] : []
        }
    }

    // MARK: scratch files

    /// A file in /dev/shm (memory) when there is one, else in the temporary directory; one per process.
    static func scratchPath(_ name: String) -> String {
        let dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : FileManager.default.temporaryDirectory.path
        return "\(dir)/reel-fuzz-\(getpid())-\(name)"
    }

    /// Plain POSIX rather than FileManager: Foundation's read of an empty file leaks a 4 KiB buffer,
    /// which LeakSanitizer reports as a crash at the end of a campaign.
    static func write(_ bytes: [UInt8], to path: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        // Unsafe pointer: into `bytes`, for the length of this call.
        return bytes.withUnsafeBytes { b in b.isEmpty || Glibc.write(fd, b.baseAddress, b.count) == b.count }
    }

    static func read(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            // Unsafe pointer: into `chunk`, which holds chunk.count bytes.
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 { return nil }
            if n == 0 { return out }
            out += chunk[0..<n]
        }
    }
}

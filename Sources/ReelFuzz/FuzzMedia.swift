import Foundation
import Glibc
import ReelMedia

/// The media parsers' checks (`fuzz-finish`, `fuzz-marker`, `fuzz-boxes`; `make fuzz`), replayed
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
            if read(path) != input { problems.append("refused (\(error)) but changed the file") }
            if !"\(error)".contains(path) { problems.append("the error does not name the file: \(error)") }
            return problems
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

    static func write(_ bytes: [UInt8], to path: String) -> Bool {
        FileManager.default.createFile(atPath: path, contents: Data(bytes))
    }

    static func read(_ path: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path).map { Array($0) }
    }
}

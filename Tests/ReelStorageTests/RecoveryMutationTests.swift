import Foundation
import Glibc
import Logging
import ReelCore
@testable import ReelStorage
import ReelSystem
import XCTest

/// Structure-aware mutations of a real three-take `.part` (reeld recording the synthetic sources
/// at 160x90, killed with SIGKILL), each alone in a fresh output directory in front of recovery
/// (issue 22: 21 of 300 such files that still held whole fragments were deleted, 59 finished into
/// files FFmpeg could not decode, one kept reeld from becoming ready with 8 GB of memory).
/// Seeded (`REEL_MUTATION_SEED`, default 22): the same 300 files at every run.
final class RecoveryMutationTests: XCTestCase {
    static let mutations = 300

    /// reeld and reelctl next to the test bundle (or in $REEL_BIN_DIR).
    private func binary(_ name: String) throws -> String {
        var dirs: [String] = []
        if let d = ProcessInfo.processInfo.environment["REEL_BIN_DIR"] { dirs.append(d) }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        dirs += [root.appendingPathComponent(".build/debug").path, Bundle.main.bundleURL.path]
        guard let d = dirs.first(where: { access("\($0)/\(name)", X_OK) == 0 }) else {
            throw XCTSkip("no \(name) in \(dirs) (build it: swift build --product \(name))")
        }
        return "\(d)/\(name)"
    }

    @discardableResult
    private func run(_ argv: [String], env: [String: String] = [:]) throws -> (status: Int32, out: String, err: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: argv[0])
        p.arguments = Array(argv.dropFirst())
        p.environment = ProcessInfo.processInfo.environment.merging(env) { $1 }
        let out = Pipe(), err = Pipe()
        p.standardOutput = out; p.standardError = err
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile(), e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
    }

    /// A datagram socket reeld sends its sd_notify lines to: READY=1 is the event to wait for.
    private final class NotifySocket {
        let fd: Int32
        let path: String
        init(_ path: String) throws {
            self.path = path
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            // Unsafe: the path (checked shorter than sun_path) is copied into the struct's own storage.
            guard path.utf8.count < MemoryLayout.size(ofValue: addr.sun_path) else { throw XCTSkip("socket path too long: \(path)") }
            withUnsafeMutableBytes(of: &addr.sun_path) { p in for (i, b) in path.utf8.enumerated() { p[i] = b } }
            let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
            guard rc == 0 else { throw XCTSkip("cannot bind \(path): \(errno)") }
        }
        /// Waits (poll with a deadline) for a datagram holding `token`.
        func wait(for token: String, seconds: Int32) -> Bool {
            let deadline = SystemClock.now() + Int64(seconds) * nanosPerSecond
            var buf = [UInt8](repeating: 0, count: 4096)
            while SystemClock.now() < deadline {
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&p, 1, Int32((deadline - SystemClock.now()) / 1_000_000) + 1) > 0 else { continue }
                let n = recv(fd, &buf, buf.count, 0)
                if n > 0, String(decoding: buf[0..<n], as: UTF8.self).split(separator: "\n").contains(Substring(token)) { return true }
            }
            return false
        }
        deinit { close(fd); unlink(path) }
    }

    /// A real `.part`: reeld records three takes (pause at 0.8 s, resume 1.1 s, pause 1.9 s,
    /// resume 2.2 s) and is killed with SIGKILL 4.8 s after the start.
    private func realThreeTakePart(in work: String) throws -> [UInt8] {
        let reeld = try binary("reeld"), reelctl = try binary("reelctl")
        let out = "\(work)/make", sock = "\(work)/c.sock"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let notify = try NotifySocket("\(work)/n.sock")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: reeld)
        p.arguments = ["--socket", sock, "--output-dir", out, "--video", "test", "--audio", "test", "--size", "160x90", "--fps", "15",
                       "--preset", "veryfast", "--sample-rate", "48000", "--channels", "1"]
        p.environment = ProcessInfo.processInfo.environment.merging(["REEL_CONFIG": "/dev/null", "NOTIFY_SOCKET": notify.path]) { $1 }
        p.standardOutput = FileHandle.nullDevice; p.standardError = FileHandle.nullDevice
        try p.run()
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL); p.waitUntilExit() } }
        XCTAssertTrue(notify.wait(for: "READY=1", seconds: 30), "reeld did not become ready")
        let t0 = SystemClock.now()
        XCTAssertEqual(try run([reelctl, "--socket", sock, "start", "--name", "base"]).status, 0)
        for (at, cmd) in [(800, "pause"), (1100, "resume"), (1900, "pause"), (2200, "resume")] {
            let wait = t0 + Int64(at) * 1_000_000 - SystemClock.now()
            if wait > 0 { usleep(useconds_t(wait / 1000)) }  // the schedule of the scenario, not synchronisation
            XCTAssertEqual(try run([reelctl, "--socket", sock, cmd]).status, 0, cmd)
        }
        let wait = t0 + 4_800_000_000 - SystemClock.now()
        if wait > 0 { usleep(useconds_t(wait / 1000)) }
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(out)/base.mp4.part")))
    }

    /// The boxes of a file: offset, size, type, header length, depth, and the offsets of its parents.
    struct Box { var offset: Int; var size: Int; var type: String; var depth: Int; var parents: [Int] }

    static func boxes(_ d: [UInt8], from: Int = 0, to: Int? = nil, depth: Int = 0, parents: [Int] = []) -> [Box] {
        let containers: Set<String> = ["moov", "trak", "mdia", "minf", "stbl", "mvex", "moof", "traf", "edts", "dinf", "udta"]
        var out: [Box] = []
        var o = from
        let end = to ?? d.count
        while o + 8 <= end {
            let s = Int(PartBytesRead.be32(d, o))
            guard s >= 8, o + s <= end else { break }
            let t = String(decoding: d[(o + 4)..<(o + 8)], as: UTF8.self)
            out.append(Box(offset: o, size: s, type: t, depth: depth, parents: parents))
            if containers.contains(t) { out += boxes(d, from: o + 8, to: o + s, depth: depth + 1, parents: parents + [o]) }
            o += s
        }
        return out
    }

    /// SplitMix64: a seeded generator (the same mutations at every run).
    struct Rng: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// `touchesMedia`: bytes inside an mdat's payload; `touchesTiming`: a sample's duration, flags
    /// or composition offset in a trun. Either gives values no structure check can tell from
    /// right ones (Reel writes no checksum), so the file may finish and still not decode clean.
    struct Mutation {
        var bytes: [UInt8]; var what: String; var touchesMedia: Bool; var touchesTiming = false
        init(bytes: [UInt8], what: String, touchesMedia: Bool, touchesTiming: Bool = false) {
            self.bytes = bytes; self.what = what; self.touchesMedia = touchesMedia; self.touchesTiming = touchesTiming
        }
    }

    static func put32(_ d: inout [UInt8], _ o: Int, _ v: UInt32) {
        for i in 0..<4 { d[o + i] = UInt8(truncatingIfNeeded: v >> (24 - 8 * UInt32(i))) }
    }

    /// One mutation of `base`: a box size, a type, a trun's sample count or sample fields, a full
    /// box's flags, a tfdt, a box duplicated (its parents' sizes set right) or removed, bytes
    /// flipped in the media or in the index, a 64-bit size, or the file cut short.
    static func mutate(_ base: [UInt8], _ all: [Box], _ rng: inout Rng) -> Mutation {
        var d = base
        let mdats = all.filter { $0.type == "mdat" && $0.depth == 0 }
        func pick(_ types: Set<String>) -> Box { let c = all.filter { types.contains($0.type) }; return c.randomElement(using: &rng)! }
        switch Int.random(in: 0..<11, using: &rng) {
        case 0:
            let b = all.randomElement(using: &rng)!
            let v: UInt32 = [0, 1, 7, 8, UInt32(b.size - 1), UInt32(b.size + 1), UInt32(b.size + 8), UInt32(b.size * 2), 0xffff_ffff,
                             UInt32.random(in: 0...UInt32.max, using: &rng)].randomElement(using: &rng)!
            put32(&d, b.offset, v)
            return Mutation(bytes: d, what: "size of \(b.type) at \(b.offset) \(b.size) -> \(v)", touchesMedia: false)
        case 1:
            let b = all.randomElement(using: &rng)!
            let t = ["free", "mdat", "moof", "moov", "skip", "zzzz", "trun", "traf"].randomElement(using: &rng)!
            d.replaceSubrange((b.offset + 4)..<(b.offset + 8), with: Array(t.utf8))
            return Mutation(bytes: d, what: "type of \(b.type) at \(b.offset) -> \(t)", touchesMedia: false)
        case 2:
            let b = pick(["trun"])
            let count = PartBytesRead.be32(d, b.offset + 12)
            let v: UInt32 = [0, 1, count &- 1, count + 1, 0xffff_ffff, 0x8000_0000, UInt32.random(in: 0...UInt32.max, using: &rng)].randomElement(using: &rng)!
            put32(&d, b.offset + 12, v)
            return Mutation(bytes: d, what: "trun count at \(b.offset) \(count) -> \(v)", touchesMedia: false)
        case 3:
            let b = pick(["tfhd", "trun", "mvhd", "tkhd", "mdhd", "elst", "tfdt", "trex", "stsd", "hdlr"])
            let bit = Int.random(in: 0..<32, using: &rng)
            d[b.offset + 8 + bit / 8] ^= UInt8(1 << (bit % 8))
            return Mutation(bytes: d, what: "version/flags bit \(bit) of \(b.type) at \(b.offset)", touchesMedia: false)
        case 4:
            let b = pick(["trun"])
            let count = Int(PartBytesRead.be32(d, b.offset + 12))
            let fields = b.size - 20  // flags, count, data offset; then per-sample fields
            guard count > 0, fields > 4 else { return Mutation(bytes: d, what: "nothing (empty trun)", touchesMedia: false) }
            let o = b.offset + 20 + 4 * Int.random(in: 0..<(fields / 4), using: &rng)
            let v = UInt32.random(in: 0...UInt32.max, using: &rng) >> UInt32.random(in: 0..<32, using: &rng)
            put32(&d, o, v)
            // Which field: the per-sample ones follow the data offset (and first-sample flags).
            let tf = PartBytesRead.be32(base, b.offset + 8) & 0xff_ffff
            let samples = b.offset + 20 + (tf & 0x4 != 0 ? 4 : 0)
            let kinds = [(0x100, "duration"), (0x200, "size"), (0x400, "flags"), (0x800, "composition offset")].filter { tf & UInt32($0.0) != 0 }.map(\.1)
            let kind = o < samples ? "first-sample flags" : kinds.isEmpty ? "?" : kinds[((o - samples) / 4) % kinds.count]
            return Mutation(bytes: d, what: "a trun's sample \(kind) at \(o) -> \(v)", touchesMedia: false, touchesTiming: kind != "size")
        case 5:
            let b = pick(["tfdt"])
            let o = b.offset + 12 + (d[b.offset + 8] == 1 ? 4 : 0)
            let v = UInt32.random(in: 0...UInt32.max, using: &rng) >> UInt32.random(in: 0..<32, using: &rng)
            put32(&d, o, v)
            return Mutation(bytes: d, what: "tfdt at \(b.offset) -> \(v)", touchesMedia: false)
        case 6:
            let b = all.filter { $0.type != "ftyp" }.randomElement(using: &rng)!
            d.insert(contentsOf: base[b.offset..<(b.offset + b.size)], at: b.offset + b.size)
            for p in b.parents { put32(&d, p, PartBytesRead.be32(d, p) + UInt32(b.size)) }
            return Mutation(bytes: d, what: "\(b.type) at \(b.offset) duplicated", touchesMedia: false)
        case 7:
            let b = all.filter { $0.type != "ftyp" && $0.depth == 0 }.randomElement(using: &rng)!
            d.removeSubrange(b.offset..<(b.offset + b.size))
            return Mutation(bytes: d, what: "\(b.type) at \(b.offset) removed", touchesMedia: false)
        case 8:
            let inMedia = Bool.random(using: &rng)
            let b = inMedia ? mdats.randomElement(using: &rng)! : pick(["moof", "moov"])
            let n = Int.random(in: 1...4, using: &rng)
            var timing = false
            for _ in 0..<n {
                let o = Int.random(in: (b.offset + 8)..<(b.offset + b.size), using: &rng)
                d[o] ^= UInt8.random(in: 1...255, using: &rng)
                timing = timing || isTimingField(base, all, o)
            }
            return Mutation(bytes: d, what: "\(n) byte(s) flipped in \(b.type) at \(b.offset)", touchesMedia: inMedia, touchesTiming: timing)
        case 9:
            let b = all.filter { $0.depth == 0 && $0.type != "ftyp" && $0.size >= 16 }.randomElement(using: &rng)!
            let big: UInt64 = [0x7fff_ffff_ffff_ffff, 0xffff_ffff_ffff_ffff, 1 << 32, UInt64(b.size), UInt64(b.size + 8)].randomElement(using: &rng)!
            put32(&d, b.offset, 1)
            put32(&d, b.offset + 8, UInt32(big >> 32)); put32(&d, b.offset + 12, UInt32(big & 0xffff_ffff))
            return Mutation(bytes: d, what: "\(b.type) at \(b.offset) given the 64-bit size \(big)", touchesMedia: b.type == "mdat")
        default:
            let at = Int.random(in: 1..<d.count, using: &rng)
            return Mutation(bytes: Array(d.prefix(at)), what: "cut at \(at)", touchesMedia: false)
        }
    }

    /// Whether byte `o` of `base` lies in a sample's duration, flags or composition offset (a
    /// trun's per-sample fields but its sizes, its first-sample flags) or in a tfdt's time.
    static func isTimingField(_ base: [UInt8], _ all: [Box], _ o: Int) -> Bool {
        guard let b = all.last(where: { $0.offset <= o && o < $0.offset + $0.size }) else { return false }
        if b.type == "tfdt" { return o >= b.offset + 12 }
        guard b.type == "trun" else { return false }
        let tf = PartBytesRead.be32(base, b.offset + 8) & 0xff_ffff
        var samples = b.offset + 16
        if tf & 0x1 != 0 { samples += 4 }
        if tf & 0x4 != 0 {
            if o >= samples && o < samples + 4 { return true }
            samples += 4
        }
        let kinds = [(0x100, "duration"), (0x200, "size"), (0x400, "flags"), (0x800, "cto")].filter { tf & UInt32($0.0) != 0 }.map(\.1)
        guard o >= samples, !kinds.isEmpty else { return false }
        return kinds[((o - samples) / 4) % kinds.count] != "size"
    }

    func testMutationsOfARealThreeTakePart() throws {
        let work = "/tmp/reel-mut-\(getpid())"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let base = try realThreeTakePart(in: work)
        let all = Self.boxes(base)
        let top = all.filter { $0.depth == 0 }
        let markers = top.filter { $0.type == "free" && PartBytesRead.be32(base, $0.offset + 8) == 0x5265_656c && base[$0.offset + 12] == 0x54 }  // "ReelT"
        XCTAssertEqual(markers.count, 3, "three take markers in the base file: \(top.map(\.type))")
        // The base fragments (moof and mdat bytes), to tell whether a file still holds whole ones.
        let fragments: [Data] = zip(top, top.dropFirst()).filter { $0.0.type == "moof" && $0.1.type == "mdat" }
            .map { Data(base[$0.0.offset..<($0.1.offset + $0.1.size)]) }
        XCTAssertGreaterThanOrEqual(fragments.count, 4)
        let foreign = PartBytes.ftyp + PartBytes.box("free", 0) + PartBytes.box("moov", 600, fill: 3) + Array(PartBytes.box("mdat", 3000, fill: 9).prefix(1500))
        let seed = UInt64(ProcessInfo.processInfo.environment["REEL_MUTATION_SEED"] ?? "") ?? 22
        var rng = Rng(state: seed)
        var outcomes: [String: Int] = [:]
        var mediaDamageUndecodable = 0, timingDamageUndecodable = 0, slowest: Nanos = 0
        for i in 0..<Self.mutations {
            let m = Self.mutate(base, all, &rng)
            let dir = "\(work)/m\(i)"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            XCTAssertTrue(FileManager.default.createFile(atPath: "\(dir)/m.mp4.part", contents: Data(m.bytes)))
            XCTAssertTrue(FileManager.default.createFile(atPath: "\(dir)/dl.mp4.part", contents: Data(foreign)))
            let t0 = SystemClock.now()
            let results = Storage.recover(in: dir, logger: Logger(label: "mutation") { _ in SwiftLogNoOpLogHandler() })
            let took = SystemClock.now() - t0
            slowest = max(slowest, took)
            let what = "mutation \(i) (\(m.what))"
            XCTAssertLessThan(took, 2 * nanosPerSecond, "\(what): recovery took \(took / 1_000_000) ms")
            if case .leftAlone = results.first(where: { $0.part.hasSuffix("/dl.mp4.part") })?.outcome {} else { XCTFail("\(what): the foreign file was not left alone") }
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: "\(dir)/dl.mp4.part")), Data(foreign), "\(what): touched a file not Reel's")
            guard let mine = results.first(where: { $0.part.hasSuffix("/m.mp4.part") }) else { XCTFail("\(what): no outcome"); continue }
            if ProcessInfo.processInfo.environment["REEL_MUTATION_VERBOSE"] != nil { print("\(what): \(mine.outcome)") }
            let mutated = Data(m.bytes)
            switch mine.outcome {
            case .removed:
                outcomes["removed", default: 0] += 1
                XCTAssertFalse(fragments.contains { mutated.range(of: $0) != nil }, "\(what): removed a file that holds whole fragments")
            case let .leftAlone(why):
                outcomes["left alone", default: 0] += 1
                XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: "\(dir)/m.mp4.part")), mutated, "\(what): left alone (\(why)) but changed")
            case let .movedAside(to, _):
                outcomes["moved aside", default: 0] += 1
                XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: to)), mutated, "\(what): moved aside but changed")
            case let .recovered(file):
                outcomes["recovered", default: 0] += 1
                XCTAssertEqual(file, "\(dir)/m.mp4", what)
                let dec = try run(["/usr/bin/ffmpeg", "-nostdin", "-v", "error", "-xerror", "-threads", "1", "-i", file, "-f", "null", "-"])
                if dec.status != 0 || !dec.err.isEmpty {
                    if m.touchesMedia { mediaDamageUndecodable += 1 }
                    else if m.touchesTiming { timingDamageUndecodable += 1 }
                    else { XCTFail("\(what): finished into \(file), which does not decode clean: \(dec.err.prefix(300))") }
                }
            }
            try? FileManager.default.removeItem(atPath: dir)
        }
        print("recovery of \(Self.mutations) mutations (seed \(seed)): \(outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")); "
              + "finished but not decoding clean: \(mediaDamageUndecodable) with media bytes flipped, \(timingDamageUndecodable) with a sample's timing changed; "
              + "slowest \(slowest / 1_000_000) ms")
    }
}

enum PartBytesRead {
    static func be32(_ b: [UInt8], _ o: Int) -> UInt32 {
        UInt32(b[o]) << 24 | UInt32(b[o + 1]) << 16 | UInt32(b[o + 2]) << 8 | UInt32(b[o + 3])
    }
}

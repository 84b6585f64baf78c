import Foundation
import Synchronization
import XCTest

@testable import ReelControl

/// Runs the built `reelctl` against an in-process server with a fake recorder.
final class ReelctlBinaryTests: XCTestCase {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// `reelctl` is built next to the test bundle (.build/<triple>/debug/).
    static func binary() throws -> URL {
        var candidates: [URL] = []
        let argv0 = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        candidates.append(argv0.deletingLastPathComponent().appendingPathComponent("reelctl"))
        candidates.append(Bundle.main.bundleURL.appendingPathComponent("reelctl"))
        candidates.append(Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("reelctl"))
        // Tests/ReelControlTests/ThisFile.swift -> package root/.build/debug/reelctl
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(root.appendingPathComponent(".build/debug/reelctl"))
        for url in candidates where FileManager.default.isExecutableFile(atPath: url.path) {
            return url
        }
        XCTFail("reelctl not found (looked at \(candidates.map(\.path))); build it with 'swift build --build-tests' or 'swift build --product reelctl'")
        throw XCTSkip("no reelctl binary")
    }

    func reelctl(_ arguments: [String], environment: [String: String] = [:]) throws -> Run {
        let process = Process()
        process.executableURL = try Self.binary()
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: SocketPath.environmentVariable)
        env.merge(environment) { _, new in new }
        process.environment = env
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Read both pipes to the end before waiting, so a full pipe cannot stall the child.
        let errData = Mutex<Data>(Data())
        let errDone = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let data = err.fileHandleForReading.readDataToEndOfFile()
            errData.withLock { $0 = data }
            errDone.signal()
        }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        errDone.wait()
        process.waitUntilExit()
        return Run(status: process.terminationStatus,
                   stdout: String(decoding: outData, as: UTF8.self),
                   stderr: String(decoding: errData.withLock { $0 }, as: UTF8.self))
    }

    func testCommandsPrintWhatTheySayAndExitZero() throws {
        let f = try Fixture()

        let start = try reelctl(["--socket", f.path, "start", "--name", "clip"])
        XCTAssertEqual(start.status, 0, start.stderr)
        XCTAssertEqual(start.stdout, "/srv/reel/clip.mp4.part\n")
        XCTAssertEqual(start.stderr, "")

        // REEL_SOCKET is used when --socket is absent.
        let pause = try reelctl(["pause"], environment: ["REEL_SOCKET": f.path])
        XCTAssertEqual(pause.status, 0, pause.stderr)
        XCTAssertEqual(pause.stdout, "")

        let resume = try reelctl(["resume", "--socket", f.path])
        XCTAssertEqual(resume.status, 0, resume.stderr)

        let status = try reelctl(["status"], environment: ["REEL_SOCKET": f.path])
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertEqual(status.stdout, """
            state:          recording
            file:           /srv/reel/clip.mp4.part
            segments:       2
              #0:           2.000 s
              #1:           0.000 s
            recorded:       2.000 s
            frames:         120
            dropped frames: 1
            audio samples:  192000
            video:          test 640x360 30/1 yuyv
            audio:          test 48000 Hz 1 ch
            uptime:         5.000 s

            """)

        let json = try reelctl(["--socket", f.path, "status", "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        XCTAssertEqual(json.stdout.filter { $0 == "\n" }.count, 1)
        let decoded = try JSONDecoder().decode(StatusInfo.self, from: Data(json.stdout.utf8))
        XCTAssertEqual(decoded.state, .recording)
        XCTAssertEqual(decoded.segments.count, 2)
        XCTAssertTrue(json.stdout.contains(#""lastFile":null"#), json.stdout)

        let stop = try reelctl(["--socket", f.path, "stop"])
        XCTAssertEqual(stop.status, 0, stop.stderr)
        XCTAssertEqual(stop.stdout, "/srv/reel/clip.mp4\n")

        XCTAssertEqual(f.recorder.calls, [.start, .pause, .resume, .status, .status, .stop])
    }

    func testRefusedCommandExitsOneWithTheMessage() throws {
        let f = try Fixture()
        let run = try reelctl(["--socket", f.path, "pause"])
        XCTAssertEqual(run.status, 1)
        XCTAssertEqual(run.stdout, "")
        XCTAssertEqual(run.stderr, "reelctl: cannot pause: not recording (state is idle; run 'reelctl start' first)\n")
    }

    /// A reply without what the command prints (a reeld of another version): the command names
    /// the command and what was missing, and exits 1 with nothing on stdout.
    func testAReplyMissingWhatTheCommandPrintsIsNamedAndRefused() throws {
        let f = try Fixture()
        f.recorder.state.withLock { $0.bareReplies = true }
        for (args, what) in [(["status"], "a status"), (["devices"], "a device list"), (["controls"], "a list"),
                             (["takes"], "takes"), (["snapshot", "-o", "-"], "a readable image")] {
            let run = try reelctl(["--socket", f.path] + args)
            XCTAssertEqual(run.status, 1, args.joined(separator: " "))
            XCTAssertEqual(run.stdout, "")
            XCTAssertEqual(run.stderr, "reelctl: reeld replied to '\(args[0])' without \(what) (is reeld the same version as reelctl?)\n")
        }
    }

    func testUnreachableDaemonAndUsageErrorsExitTwo() throws {
        let dir = TempDir()
        let missing = dir.socket("absent.sock")
        let run = try reelctl(["status"], environment: ["REEL_SOCKET": missing])
        XCTAssertEqual(run.status, 2)
        XCTAssertEqual(run.stderr, "reelctl: cannot connect to \(missing): no such file (is reeld running? start it with 'systemctl start reeld' or set REEL_SOCKET)\n")

        let usage = try reelctl(["frobnicate"])
        XCTAssertEqual(usage.status, 2)
        XCTAssertTrue(usage.stderr.hasPrefix("reelctl: "), usage.stderr)

        let none = try reelctl([])
        XCTAssertEqual(none.status, 2)
    }

    func testHelpDocumentsTheSocket() throws {
        let help = try reelctl(["--help"])
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.stdout.contains("REEL_SOCKET"), help.stdout)
        XCTAssertTrue(help.stdout.contains("/run/reel/reeld.sock"), help.stdout)
    }
}

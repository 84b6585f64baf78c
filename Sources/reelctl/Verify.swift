import ArgumentParser
import Foundation
import ReelVerify

/// `reelctl verify FILE`: checks a recording of `reeld --video test --audio test` (works
/// without reeld; only reads the file).
struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a recording of the synthetic test sources: segments, pauses cut, timestamp gaps, A/V offset.",
        discussion: """
            FILE must be a recording of `reeld --video test --audio test` (see test-sources.md): \
            a timecode strip, a white flash on the first frame of each second and a 1 kHz beep at \
            each second. Reports the streams, the segments of consecutive source frames and each \
            jump between them (the pause cut), video pts off the one-frame grid, audio timestamp \
            gaps, every flash/beep pair with its offset (beep minus flash), the largest |offset| \
            and the offset's drift, and a final list of defects.

            Exit status: 0 when no defects, 1 when there are defects, 2 when FILE cannot be read.
            """)

    @Argument(help: ArgumentHelp("The MP4 file to check.", valueName: "file"))
    var file: String

    @Flag(name: .long, help: "Print one JSON object (the oracle's keys, plus 'defects') instead of the report.")
    var json = false

    @Option(name: .customLong("tolerance-ms"), help: ArgumentHelp(
        "Largest |A/V offset| accepted, in ms (default: half a frame, 500/fps).", valueName: "ms"))
    var toleranceMs: Double?

    func validate() throws {
        if let t = toleranceMs, !(t >= 0) || !t.isFinite {
            throw ValidationError("--tolerance-ms must be a non-negative number of milliseconds")
        }
    }

    func run() throws {
        let report: Report
        do {
            report = try analyze(path: file)
        } catch {
            printError("verify: \(error.message)")
            throw ExitCode(ExitStatus.usage)
        }
        if json {
            print(report.json(syncToleranceMs: toleranceMs).text)
        } else {
            print(report.text(syncToleranceMs: toleranceMs))
        }
        if !report.defects(syncToleranceMs: toleranceMs).isEmpty { throw ExitCode(ExitStatus.refused) }
    }
}

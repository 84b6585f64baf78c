import ReelCore
import ArgumentParser
import Foundation
import ReelCommandLine
import ReelVerify

/// `reel-verify FILE` (also `reelctl verify FILE`, which runs it): checks a recording of
/// `reeld --video test --audio test` (works without reeld; only reads the file). A program of its
/// own because it links FFmpeg to decode: reelctl, which every script and button press starts,
/// then loads none of it (its start-up was 5 times longer with it: docs/ARCHITECTURE.md).
@main
struct ReelVerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reel-verify",
        abstract: "Check a recording of the synthetic test sources: segments, pauses cut, timestamp gaps, A/V offset.",
        discussion: """
            FILE must be a recording of `reeld --video test --audio test` (see test-sources.md): \
            a timecode strip, a white flash on the first frame of each second and a 1 kHz beep at \
            each second. Reports the streams, the segments of consecutive source frames and each \
            jump between them (the pause cut), video pts off the one-frame grid, audio timestamp \
            gaps, every flash/beep pair with its offset (beep minus flash), the largest |offset| \
            and the offset's drift, and a final list of defects. With --pause, the file is also \
            checked against that pause schedule: segment edges, jump lengths, no frame from inside \
            a pause. With --undone, takes removed by 'reelctl undo' count as pause: no frame of \
            them may be in the file.

            Exit status: 0 when no defects, 1 when there are defects, 2 when FILE cannot be read \
            and for usage errors.
            """)

    /// Like ParsableCommand's main, but usage errors exit 2 (not 64), as reelctl's do.
    static func main() { mainExitingTwoOnUsage(program: "reel-verify") }

    @Argument(help: ArgumentHelp("The MP4 file to check.", valueName: "file"))
    var file: String

    @Flag(name: .long, help: "Print one JSON object (the oracle's keys, plus 'defects') instead of the report.")
    var json = false

    @Option(name: .customLong("tolerance-ms"), help: ArgumentHelp(
        "Largest |A/V offset| accepted, in ms (default: half a frame, 500/fps).", valueName: "ms"))
    var toleranceMs: Double?

    @Option(name: .customLong("pause"), help: ArgumentHelp(
        "A pause of the recording, in source seconds (exact decimals or N/D): the file must cut exactly [PAUSE, RESUME). Repeat for each pause, in order.",
        valueName: "pause:resume"))
    var pauses: [String] = []

    @Option(name: .customLong("undone"), help: ArgumentHelp(
        "A take removed with 'reelctl undo', in source seconds from its start to its pause (or the undo): it counts as pause, joined with the pauses it touches. Repeat for each.",
        valueName: "start:end"))
    var undone: [String] = []

    @Option(name: .customLong("schedule-tolerance-ms"), help: ArgumentHelp(
        "With --pause: how far segment edges and jump lengths may be from the schedule, in ms.",
        valueName: "ms"))
    var scheduleToleranceMs = "0"

    func validate() throws {
        if let t = toleranceMs, !(t >= 0) || !t.isFinite {
            throw ValidationError("--tolerance-ms must be a non-negative number of milliseconds")
        }
        _ = try schedule()
    }

    /// The --pause windows and the schedule tolerance in seconds, parsed exactly.
    func schedule() throws -> ([PauseWindow], Rational) {
        func window(_ text: String, _ option: String, _ a: String, _ b: String) throws -> PauseWindow {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, let p = Rational(exactDecimal: String(parts[0])), let r = Rational(exactDecimal: String(parts[1])),
                  !(p < Rational(0)), p < r else {
                throw ValidationError("invalid \(option) '\(text)': use \(a):\(b) in source seconds with \(a) < \(b), e.g. 2.0667:2.6667 or 31/15:40/15")
            }
            return PauseWindow(pause: p, resume: r)
        }
        let windows = PauseWindow.merging(pauses: try pauses.map { try window($0, "--pause", "PAUSE", "RESUME") },
                                          undone: try undone.map { try window($0, "--undone", "START", "END") })
        guard let tol = Rational(exactDecimal: scheduleToleranceMs), !(tol < Rational(0)) else {
            throw ValidationError("invalid --schedule-tolerance-ms '\(scheduleToleranceMs)': use a non-negative number of milliseconds")
        }
        return (windows, tol / Rational(1000))
    }

    func run() throws {
        let report: Report
        do {
            report = try analyze(path: file)
        } catch {
            printError("\(error.message)")
            throw ExitCode(ExitStatus.usage)
        }
        let (windows, tol) = try schedule()
        let scheduleDefects = windows.isEmpty ? [] : report.scheduleDefects(windows, tolPos: tol, tolLen: tol)
        if json {
            print(report.json(syncToleranceMs: toleranceMs, extraDefects: scheduleDefects).text)
        } else {
            print(report.text(syncToleranceMs: toleranceMs, extraDefects: scheduleDefects))
        }
        if !(report.defects(syncToleranceMs: toleranceMs) + scheduleDefects).isEmpty { throw ExitCode(ExitStatus.refused) }
    }
}

func printError(_ message: String) { printError("reel-verify", message) }

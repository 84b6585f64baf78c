import ArgumentParser
import ReelCommandLine
import Foundation

/// `reelctl verify ...` runs `reel-verify` (installed beside reelctl) with the same arguments. The
/// checker decodes with FFmpeg; linking it here made every reelctl call, a pause from a script
/// or a button, load FFmpeg and its codecs' ~130 libraries: 5 times the start-up (50 ms instead of
/// 10 on the host, 1.0 s instead of 0.52 in the test bed's emulated guest).
struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a recording of the synthetic test sources: segments, pauses cut, timestamp gaps, A/V offset (runs reel-verify).",
        discussion: """
            'reelctl verify ARGS' runs 'reel-verify ARGS', installed beside reelctl; \
            'reelctl verify --help' shows its options. Works without reeld: it only reads the file.
            """)

    @Argument(parsing: .captureForPassthrough, help: ArgumentHelp("reel-verify's arguments: the file and its options.", valueName: "args"))
    var arguments: [String] = []

    func run() throws { VerifyTool.run(arguments) }
}

enum VerifyTool {
    /// Replaces this process with reel-verify from reelctl's own directory; reports and exits 2 when
    /// it cannot.
    static func run(_ arguments: [String]) -> Never {
        let path = siblingPath()
        // Unsafe pointers: execv's argv, C strings that live until the exec replaces the process.
        let argv: [UnsafeMutablePointer<CChar>?] = (["reel-verify"] + arguments).map { strdup($0) } + [nil]
        execv(path, argv)
        let reason = String(cString: strerror(errno))
        printError("verify: cannot run \(path): \(reason) (reel-verify is installed beside reelctl: run 'make install', or run reel-verify from the build directory)")
        exit(ExitStatus.usage)
    }

    /// reel-verify in the directory of the running reelctl (/proc/self/exe), whatever PATH says.
    static func siblingPath() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let exe = n > 0 ? String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
        let dir = exe.lastIndex(of: "/").map { String(exe[..<$0]) } ?? "."
        return (dir.isEmpty ? "" : dir) + "/reel-verify"
    }
}

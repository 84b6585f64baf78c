import Foundation
import ReelFuzz
import ReelMedia

#if FUZZING
/// libFuzzer's entry point (`make fuzz` builds with -sanitize=fuzzer; libFuzzer provides main).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFinish(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzChecks.fuzzOne(data, size, FuzzChecks.finish)
}
#else
/// Without libFuzzer: replays the files named through the same checks.
@main
enum ReplayFinish {
    static func main() {
        // --explain FILE...: what the finisher makes of each file (finished on a scratch copy).
        if CommandLine.arguments.dropFirst().first == "--explain" {
            for file in CommandLine.arguments.dropFirst(2) {
                guard let data = FileManager.default.contents(atPath: file) else {
                    print("cannot read \(file) (name .part files)")
                    exit(2)
                }
                print("\(file): \(FuzzChecks.explainFinish(Array(data), name: "explain.mp4.part"))")
            }
            exit(0)
        }
        // --finish FILE: finishes FILE itself, in place, as reeld does (docs/RELIABILITY.md measures
        // the finisher's time and memory on a long recording with it).
        // --finish FILE MIB: with a memory budget of MIB MiB instead of the default.
        if CommandLine.arguments.dropFirst().first == "--finish", (3...4).contains(CommandLine.arguments.count) {
            let budget = CommandLine.arguments.count == 4 ? (Int(CommandLine.arguments[3]) ?? 0) << 20 : MP4Finisher.defaultMemoryBudget
            do {
                let r = try MP4Finisher.finish(path: CommandLine.arguments[2], memoryBudget: budget)
                print("\(CommandLine.arguments[2]): \(r.alreadyFinished ? "already finished" : "finished: \(r.fragments) fragments, \(r.samples) samples, \(r.chapters) chapters, a \(r.moovBytes)-byte moov")")
                exit(0)
            } catch {
                print(error)
                exit(1)
            }
        }
        exit(FuzzChecks.replayMain(FuzzChecks.finish, corpus: "Tests/fuzz/finish"))
    }
}
#endif

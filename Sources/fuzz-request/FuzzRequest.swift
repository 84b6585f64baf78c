import Foundation
import ReelFuzz

#if FUZZING
/// libFuzzer's entry point (`make fuzz` builds with -sanitize=fuzzer; libFuzzer provides main).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequest(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzChecks.fuzzOne(data, size, FuzzChecks.request)
}
#else
/// Without libFuzzer: replays the files named through the same checks.
@main
enum ReplayRequest {
    static func main() { exit(FuzzChecks.replayMain(FuzzChecks.request, corpus: "Tests/fuzz/request")) }
}
#endif

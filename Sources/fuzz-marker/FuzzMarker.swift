import Foundation
import ReelFuzz

#if FUZZING
/// libFuzzer's entry point (`make fuzz` builds with -sanitize=fuzzer; libFuzzer provides main).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMarker(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzChecks.fuzzOne(data, size, FuzzChecks.marker)
}
#else
/// Without libFuzzer: replays the files named through the same checks.
@main
enum ReplayMarker {
    static func main() { exit(FuzzChecks.replayMain(FuzzChecks.marker, corpus: "Tests/fuzz/marker")) }
}
#endif

import Foundation
import ReelFuzz

#if FUZZING
/// libFuzzer's entry point (`make fuzz` builds with -sanitize=fuzzer; libFuzzer provides main).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMarker(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    // Unsafe pointer: libFuzzer's input, valid for this call only, so it is copied at once.
    let bytes = size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size))
    let problems = FuzzChecks.marker(bytes)
    if !problems.isEmpty { fatalError(problems.joined(separator: "\n")) }
    return 0
}
#else
/// Without libFuzzer: replays the files named through the same checks.
@main
enum ReplayMarker {
    static func main() { exit(FuzzChecks.replayMain(FuzzChecks.marker, corpus: "Tests/fuzz/marker")) }
}
#endif

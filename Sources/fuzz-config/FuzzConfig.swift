import Foundation
import ReelFuzz

#if FUZZING
/// libFuzzer's entry point (`make fuzz` builds with -sanitize=fuzzer; libFuzzer provides main).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfig(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzChecks.fuzzOne(data, size, FuzzChecks.config)
}
#else
/// Without libFuzzer: replays the files named through the same checks.
@main
enum ReplayConfig {
    static func main() {
        // --toml-json FILE...: one JSON line per file, what TOMLDocument reads (scripts/toml_oracle.py).
        if CommandLine.arguments.dropFirst().first == "--toml-json" {
            for file in CommandLine.arguments.dropFirst(2) {
                guard let data = FileManager.default.contents(atPath: file) else {
                    print("cannot read \(file) (name files of TOML text)")
                    exit(2)
                }
                print(FuzzChecks.tomlJSON(Array(data)))
            }
            exit(0)
        }
        exit(FuzzChecks.replayMain(FuzzChecks.config, corpus: "Tests/fuzz/config"))
    }
}
#endif

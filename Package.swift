// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "reel",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "reeld", targets: ["reeld"]),
        .executable(name: "reelctl", targets: ["reelctl"]),
        .executable(name: "reel-verify", targets: ["reel-verify"]),
        .executable(name: "reel-web", targets: ["reel-web"]),
        .executable(name: "reel-button", targets: ["reel-button"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        // reel-web's HTTP server only (ReelWeb, reel-web). Without its default traits: no
        // swift-configuration to build (reel-web takes its settings as flags).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0", traits: []),
        // Hummingbird's own dependencies, named for what ReelWeb imports from them (no further builds).
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
    ],
    targets: [
        // --- C interop: one thin module per library, nothing else in them. ---
        .systemLibrary(name: "CX264", path: "Sources/CX264",
                       providers: [.apt(["libx264-dev"])]),
        .systemLibrary(name: "CFFmpeg", path: "Sources/CFFmpeg", pkgConfig: "libavformat",
                       providers: [.apt(["libavformat-dev", "libavcodec-dev", "libavutil-dev", "libswresample-dev"])]),
        .systemLibrary(name: "CYUV", path: "Sources/CYUV",
                       providers: [.apt(["libyuv-dev"])]),
        .systemLibrary(name: "CV4L2", path: "Sources/CV4L2", pkgConfig: "libv4l2",
                       providers: [.apt(["libv4l-dev"])]),
        .systemLibrary(name: "CALSA", path: "Sources/CALSA", pkgConfig: "alsa",
                       providers: [.apt(["libasound2-dev"])]),
        .systemLibrary(name: "CTurboJPEG", path: "Sources/CTurboJPEG", pkgConfig: "libturbojpeg",
                       providers: [.apt(["libturbojpeg0-dev"])]),
        .systemLibrary(name: "CCrypt", path: "Sources/CCrypt",
                       providers: [.apt(["libcrypt-dev"])]),
        .systemLibrary(name: "CSystemd", path: "Sources/CSystemd", pkgConfig: "libsystemd",
                       providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CEvdev", path: "Sources/CEvdev", pkgConfig: "libevdev",
                       providers: [.apt(["libevdev-dev"])]),
        // What Swift cannot import (function-like macros, va_list callbacks, _GNU_SOURCE calls), as
        // creel_* functions: one C shim per library. V4L2's are static inlines in its shim.h;
        // these need C code.
        .target(name: "CFFmpegShim", dependencies: ["CFFmpeg"], path: "Sources/CFFmpegShim"),
        .target(name: "CX264Shim", dependencies: ["CX264"], path: "Sources/CX264Shim"),
        .target(name: "CGlibcShim", path: "Sources/CGlibcShim"),

        // --- Pure Swift core: timeline, clocks, cuts, synthetic signals. No C, no devices. ---
        .target(name: "ReelCore", path: "Sources/ReelCore"),

        // --- FFmpeg's handles (one owner each), av_strerror's text and AVRational as Rational: the one
        // home ReelMedia and ReelVerify share (ReelVerify does not take ReelMedia, whose x264, libyuv and
        // libturbojpeg reelctl does not link). ---
        .target(name: "ReelFFmpeg", dependencies: ["ReelCore", "CFFmpeg"], path: "Sources/ReelFFmpeg"),

        // --- Media: encoders, muxer, pixel conversion over the C modules. ---
        .target(name: "ReelMedia",
                dependencies: ["ReelCore", "ReelSystem", "ReelFFmpeg", "CX264", "CX264Shim", "CFFmpeg", "CFFmpegShim", "CYUV", "CTurboJPEG"],
                path: "Sources/ReelMedia"),

        // --- System: one errno text, one EINTR retry, the monotonic clock, locks and queues,
        // heartbeats. Used by every stage below; no C library but Glibc. ---
        .target(name: "ReelSystem", dependencies: ["ReelCore", "CGlibcShim"], path: "Sources/ReelSystem"),

        // --- Control protocol (line-delimited JSON over a Unix socket), shared by both programs. ---
        .target(name: "ReelControl", dependencies: ["ReelCore", "ReelSystem", .product(name: "Logging", package: "swift-log")],
                path: "Sources/ReelControl"),

        // --- The daemon, one module per stage (docs/ARCHITECTURE.md's diagram, left to right). ---
        // Capture: V4L2, ALSA, file and synthetic sources, device discovery, the frame pools.
        .target(name: "ReelCapture",
                dependencies: ["ReelCore", "ReelSystem", "ReelMedia", "ReelControl", "CV4L2", "CALSA",
                               .product(name: "Logging", package: "swift-log")],
                path: "Sources/ReelCapture"),
        // Storage: durability (fsync, the .part lock), recovery, free space, write-failure text, the finish hook.
        .target(name: "ReelStorage",
                dependencies: ["ReelCore", "ReelSystem", "ReelMedia", "CGlibcShim", .product(name: "Logging", package: "swift-log")],
                path: "Sources/ReelStorage"),
        // Pipeline: the recording session (timeline, encoders, muxer), its queues and audio paths.
        .target(name: "ReelPipeline",
                dependencies: ["ReelCore", "ReelSystem", "ReelMedia", "ReelCapture", "ReelStorage",
                               .product(name: "Logging", package: "swift-log")],
                path: "Sources/ReelPipeline"),
        // Config: the setting table, reeld.toml (TOML 1.0 in Swift), validation.
        .target(name: "ReelConfig", dependencies: ["ReelCore", "ReelSystem", "ReelMedia", "ReelStorage"],
                path: "Sources/ReelConfig"),
        // Service: the recorder state machine, supervisor, notify, socket activation, peer policy, logging.
        .target(name: "ReelService",
                dependencies: ["ReelCore", "ReelSystem", "ReelMedia", "ReelControl", "ReelCapture", "ReelStorage",
                               "ReelPipeline", "ReelConfig", "CSystemd", .product(name: "Logging", package: "swift-log")],
                path: "Sources/ReelService"),

        .executableTarget(name: "reeld",
                          dependencies: ["ReelService", "ReelPipeline", "ReelCapture", "ReelStorage", "ReelConfig",
                                         "ReelSystem", "ReelControl", "ReelMedia", "ReelCore",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser"),
                                         .product(name: "Logging", package: "swift-log")],
                          path: "Sources/reeld"),
        // --- `reel-verify` (and `reelctl verify`): checks a recording of the synthetic sources (port of scripts/reel_verify.py).
        // FFmpeg only (no x264, no devices). ---
        .target(name: "ReelVerify", dependencies: ["ReelCore", "ReelFFmpeg", "CFFmpeg", "CFFmpegShim"], path: "Sources/ReelVerify"),

        // The command-line programs' one main (usage errors exit 2) and exit statuses.
        .target(name: "ReelCommandLine", dependencies: [.product(name: "ArgumentParser", package: "swift-argument-parser")],
                path: "Sources/ReelCommandLine"),
        .executableTarget(name: "reel-verify",
                          dependencies: ["ReelVerify", "ReelCore", "ReelCommandLine",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser")],
                          path: "Sources/reel-verify"),

        // reelctl links no FFmpeg: every script and button press starts it ('reelctl verify' runs reel-verify).
        .executableTarget(name: "reelctl",
                          dependencies: ["ReelControl", "ReelCore", "ReelSystem", "ReelCommandLine",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser")],
                          path: "Sources/reelctl"),

        // --- reel-web: the booth page's HTTP server, a client of reeld's control socket like reelctl.
        // ReelWeb holds its testable pieces (sessions, throttle, origin check, recordings) and the page's files (Web/). ---
        .target(name: "ReelWeb",
                dependencies: ["ReelControl", "ReelCore", "ReelSystem", "CCrypt",
                               .product(name: "Hummingbird", package: "hummingbird"),
                               .product(name: "NIOCore", package: "swift-nio"),
                               .product(name: "HTTPTypes", package: "swift-http-types"),
                               .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                               .product(name: "Logging", package: "swift-log")],
                path: "Sources/ReelWeb", resources: [.copy("Web")]),
        .executableTarget(name: "reel-web",
                          dependencies: ["ReelWeb", "ReelControl", "ReelCore",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser"),
                                         .product(name: "Logging", package: "swift-log")],
                          path: "Sources/reel-web"),
        // --- reel-button: a pedal or keyboard (libevdev) as reeld's remote, with a tally LED. Its
        // decisions (ReelButton: debounce, hold, long press, the LED's pattern) are pure. ---
        .target(name: "ReelButton", dependencies: ["ReelCore", "ReelConfig", "ReelControl"], path: "Sources/ReelButton"),
        .executableTarget(name: "reel-button",
                          dependencies: ["ReelButton", "ReelConfig", "ReelControl", "ReelSystem", "ReelCore", "CEvdev", "ReelCommandLine",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser")],
                          path: "Sources/reel-button"),

        // --- Fuzzing (`make fuzz`): the checks, and one libFuzzer entry point per parser; built
        // normally they replay files through the same checks (Tests/fuzz, docs/RELIABILITY.md). ---
        .target(name: "ReelFuzz", dependencies: ["ReelControl", "ReelConfig", "ReelMedia"], path: "Sources/ReelFuzz"),
        .executableTarget(name: "fuzz-request", dependencies: ["ReelFuzz"], path: "Sources/fuzz-request"),
        .executableTarget(name: "fuzz-config", dependencies: ["ReelFuzz"], path: "Sources/fuzz-config"),
        .executableTarget(name: "fuzz-finish", dependencies: ["ReelFuzz", "ReelMedia"], path: "Sources/fuzz-finish"),
        .executableTarget(name: "fuzz-marker", dependencies: ["ReelFuzz"], path: "Sources/fuzz-marker"),
        .executableTarget(name: "fuzz-boxes", dependencies: ["ReelFuzz"], path: "Sources/fuzz-boxes"),

        // The tests' shared helpers (the seeded generator), not shipped.
        .target(name: "ReelTestSupport", path: "Tests/ReelTestSupport"),
        .testTarget(name: "ReelCoreTests", dependencies: ["ReelCore", "ReelTestSupport"], path: "Tests/ReelCoreTests"),
        .testTarget(name: "ReelMediaTests", dependencies: ["ReelMedia", "ReelFFmpeg", "ReelCore", "CFFmpeg", "CFFmpegShim", "CX264", "CX264Shim"], path: "Tests/ReelMediaTests"),
        .testTarget(name: "ReelControlTests", dependencies: ["ReelControl", "ReelSystem", "ReelCore"], path: "Tests/ReelControlTests"),
        .testTarget(name: "ReelConfigTests", dependencies: ["ReelConfig", "ReelCore", "ReelTestSupport"], path: "Tests/ReelConfigTests"),
        .testTarget(name: "ReelStorageTests", dependencies: ["ReelStorage", "ReelSystem", "ReelCore"], path: "Tests/ReelStorageTests"),
        .testTarget(name: "ReelServiceTests", dependencies: ["ReelService", "ReelStorage", "ReelPipeline", "ReelMedia", "ReelSystem", "ReelControl", "ReelCore", "ReelTestSupport"], path: "Tests/ReelServiceTests"),
        .testTarget(name: "ReelctlTests", dependencies: ["reelctl", "ReelControl", "ReelCore"], path: "Tests/ReelctlTests"),
        .testTarget(name: "ReelVerifyTests", dependencies: ["ReelVerify", "ReelCore"], path: "Tests/ReelVerifyTests"),
        .testTarget(name: "ReelWebTests", dependencies: ["ReelWeb", "ReelControl", "ReelConfig", "ReelCore"], path: "Tests/ReelWebTests"),
        .testTarget(name: "ReelButtonTests", dependencies: ["ReelButton", "ReelConfig", "ReelControl", "ReelCore"], path: "Tests/ReelButtonTests"),
        .testTarget(name: "ReelFuzzTests", dependencies: ["ReelFuzz", "ReelConfig", "ReelControl", "ReelMedia"], path: "Tests/ReelFuzzTests"),
    ],
    swiftLanguageModes: [.v6]
)

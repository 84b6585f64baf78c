// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "reel",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "reeld", targets: ["reeld"]),
        .executable(name: "reelctl", targets: ["reelctl"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
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
        .systemLibrary(name: "CSystemd", path: "Sources/CSystemd", pkgConfig: "libsystemd",
                       providers: [.apt(["libsystemd-dev"])]),
        // C macros and versioned symbols Swift cannot import, re-exported as functions.
        .target(name: "CReelShim", dependencies: ["CX264", "CFFmpeg", "CV4L2"], path: "Sources/CReelShim"),

        // --- Pure Swift core: timeline, clocks, cuts, synthetic signals. No C, no devices. ---
        .target(name: "ReelCore", path: "Sources/ReelCore"),

        // --- Media: encoders, muxer, pixel conversion over the C modules. ---
        .target(name: "ReelMedia",
                dependencies: ["ReelCore", "CReelShim", "CX264", "CFFmpeg", "CYUV", "CTurboJPEG"],
                path: "Sources/ReelMedia"),

        // --- Control protocol (line-delimited JSON over a Unix socket), shared by both programs. ---
        .target(name: "ReelControl", dependencies: ["ReelCore", .product(name: "Logging", package: "swift-log")], path: "Sources/ReelControl"),

        // --- The daemon: sources, pipeline, recorder, control server. ---
        .target(name: "ReelDaemon",
                dependencies: ["ReelCore", "ReelMedia", "ReelControl", "CReelShim", "CV4L2", "CALSA", "CSystemd",
                               .product(name: "Logging", package: "swift-log")],
                path: "Sources/ReelDaemon"),

        .executableTarget(name: "reeld",
                          dependencies: ["ReelDaemon", "ReelCore",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser"),
                                         .product(name: "Logging", package: "swift-log")],
                          path: "Sources/reeld"),
        // --- `reelctl verify`: checks a recording of the synthetic sources (port of scripts/reel_verify.py).
        // CX264 only because CReelShim.o references x264 and must link (see Scanner.swift). ---
        .target(name: "ReelVerify", dependencies: ["ReelCore", "CFFmpeg", "CReelShim", "CX264"], path: "Sources/ReelVerify"),

        .executableTarget(name: "reelctl",
                          dependencies: ["ReelControl", "ReelCore", "ReelVerify",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser")],
                          path: "Sources/reelctl"),

        // --- Fuzzing (`make fuzz`): the checks, and one libFuzzer entry point per parser; built
        // normally they replay files through the same checks (Tests/fuzz, docs/RELIABILITY.md). ---
        .target(name: "ReelFuzz", dependencies: ["ReelControl", "ReelDaemon"], path: "Sources/ReelFuzz"),
        .executableTarget(name: "fuzz-request", dependencies: ["ReelFuzz"], path: "Sources/fuzz-request"),
        .executableTarget(name: "fuzz-config", dependencies: ["ReelFuzz"], path: "Sources/fuzz-config"),

        .testTarget(name: "ReelCoreTests", dependencies: ["ReelCore"], path: "Tests/ReelCoreTests"),
        .testTarget(name: "ReelMediaTests", dependencies: ["ReelMedia", "ReelCore", "CFFmpeg"], path: "Tests/ReelMediaTests"),
        .testTarget(name: "ReelControlTests", dependencies: ["ReelControl", "ReelDaemon"], path: "Tests/ReelControlTests"),
        .testTarget(name: "ReelDaemonTests", dependencies: ["ReelDaemon", "ReelControl", "ReelCore"], path: "Tests/ReelDaemonTests"),
        .testTarget(name: "ReelVerifyTests", dependencies: ["ReelVerify"], path: "Tests/ReelVerifyTests"),
        .testTarget(name: "ReelFuzzTests", dependencies: ["ReelFuzz", "ReelDaemon", "ReelControl"], path: "Tests/ReelFuzzTests"),
    ],
    swiftLanguageModes: [.v6]
)

// swift-tools-version:6.1
import PackageDescription

// Linux only: the code imports Glibc (or Musl) and uses epoll, timerfd, signalfd and systemd's
// protocols, so the manifest names no Apple platform (`platforms:` would only claim one).
let package = Package(
    name: "vigil",
    products: [
        .library(name: "Vigil", targets: ["Vigil"]),
        .library(name: "VigilLifecycle", targets: ["VigilLifecycle"]),
        .library(name: "VigilSystemd", targets: ["VigilSystemd"]),
        .library(name: "VigilTesting", targets: ["VigilTesting"]),
        .executable(name: "vigild", targets: ["vigild"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
    ],
    targets: [
        // The single-threaded executor (epoll, timerfd, signalfd) behind EventLoopExecutor.
        .target(name: "CVigilEventLoop"),
        // vigild's constructor that blocks its signals before the Swift runtime starts.
        .target(name: "CVigilEarlySignals"),
        .target(
            name: "VigilSystemd",
            dependencies: [
                .product(name: "Logging", package: "swift-log")
            ]
        ),
        .target(
            name: "VigilLifecycle",
            dependencies: [
                "CVigilEventLoop",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "Vigil",
            dependencies: [
                "VigilLifecycle",
                "VigilSystemd",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "VigilTesting",
            dependencies: [
                "Vigil",
                "VigilLifecycle",
                "VigilSystemd",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "VigildCore",
            dependencies: ["Vigil", .product(name: "Logging", package: "swift-log")]
        ),
        .executableTarget(
            name: "vigild",
            dependencies: [
                "Vigil", "VigildCore", "CVigilEarlySignals",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The benchmarks are a package of their own (Benchmarks/Package.swift, as SwiftNIO's are)
        // that depends on this one by path: this package ships no benchmark and no malloc
        // interposer, and the benchmarks see only the public API.
        // Fuzzing (issue 10): Tests/Fuzz/run.sh builds vigil-fuzz with libFuzzer (`-sanitize=fuzzer
        // -D FUZZING`) into .build-fuzz and runs each target for a bounded time; in a normal build
        // it is a small replay tool (`VIGIL_FUZZ_TARGET=… vigil-fuzz FILE…`), and VigilTests
        // replays every committed corpus file through the same functions. They live in this
        // package, not in one of their own (as the benchmarks are), because the parser
        // and VigildConfiguration are `package` symbols, visible only inside this package; as
        // targets without a declared product they are not offered to the package's dependents.
        .target(
            name: "VigilFuzzTargets",
            dependencies: ["Vigil", "VigildCore"],
            path: "Tests/Fuzz/VigilFuzzTargets"
        ),
        .target(name: "CVigilFuzzer", path: "Tests/Fuzz/CVigilFuzzer"),
        .executableTarget(
            name: "vigil-fuzz",
            dependencies: ["CVigilFuzzer", "VigilFuzzTargets"],
            path: "Tests/Fuzz/Driver"
        ),
        .testTarget(
            name: "VigilLifecycleTests",
            dependencies: [
                "VigilLifecycle", "VigilTesting",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "VigilSystemdTests",
            dependencies: ["VigilSystemd", "VigilTesting", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "VigilTests",
            dependencies: [
                "Vigil", "VigildCore", "VigilFuzzTargets", "VigilTesting",
                .product(name: "InMemoryLogging", package: "swift-log"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "VigilTestingTests",
            dependencies: ["VigilTesting"]
        ),
        .testTarget(
            name: "vigildTests",
            dependencies: ["vigild", "Vigil", "VigilTesting"]
        ),
        // The child of Tests/VigilSystemdTests/NotifierTests.swift: it notifies and reads the
        // watchdog from its own environment, so the test runner never calls setenv.
        .executableTarget(
            name: "vigil-notify-probe",
            dependencies: ["VigilSystemd"],
            path: "Tests/NotifyProbe"
        ),
        // The socket-activated child of Tests/VigilSystemdTests/SocketActivationProcessTests.swift
        // (not a product: `swift build` builds it next to the test bundle).
        .executableTarget(
            name: "vigil-socket-probe",
            dependencies: ["VigilSystemd"],
            path: "Tests/SocketActivationProbe"
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The same strict settings for every Swift target (as swift-log's manifest applies its own); C
// targets ignore them.
for target in package.targets where [.executable, .test, .regular].contains(target.type) {
    var settings = target.swiftSettings ?? []
    // https://github.com/apple/swift-evolution/blob/main/proposals/0335-existential-any.md
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    // https://github.com/swiftlang/swift-evolution/blob/main/proposals/0444-member-import-visibility.md
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    target.swiftSettings = settings
}

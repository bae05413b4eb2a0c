// swift-tools-version:6.1
import PackageDescription

// Linux only: the code imports Glibc (or Musl) and uses epoll, timerfd, signalfd and systemd's
// protocols, so the manifest names no Apple platform (`platforms:` would only claim one).
let package = Package(
    name: "vigil",
    products: [
        .library(name: "Vigil", targets: ["Vigil"]),
        .library(name: "VigilConfiguration", targets: ["VigilConfiguration"]),
        .library(name: "VigilPersistence", targets: ["VigilPersistence"]),
        .library(name: "VigilPOSIX", targets: ["VigilPOSIX"]),
        .library(name: "VigilEventLoop", targets: ["VigilEventLoop"]),
        // Opt-in: blocks a daemon's signals before its runtime starts, in every process that
        // links it, so only a daemon's executable links it (see EarlySignals).
        .library(name: "VigilEarlySignals", targets: ["VigilEarlySignals"]),
        .library(name: "VigilLifecycle", targets: ["VigilLifecycle"]),
        .library(name: "VigilSystemd", targets: ["VigilSystemd"]),
        .library(name: "VigilTesting", targets: ["VigilTesting"]),
        // Opt-in, for daemons that already read their configuration through swift-configuration
        // (it brings swift-system and FoundationEssentials; vigild does not link it).
        .library(name: "VigilSwiftConfiguration", targets: ["VigilSwiftConfiguration"]),
        .executable(name: "vigild", targets: ["vigild"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // Only for VigilSwiftConfiguration; its default JSON trait (Foundation's JSON parser) off:
        // the listener parses the file with Vigil's own parser.
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0", traits: []),
    ],
    targets: [
        // The single-threaded executor (epoll, timerfd, signalfd) behind EventLoopExecutor.
        // The C library (Glibc or Musl) for every Swift target: `import VigilPlatform` (not a
        // product; see the loop at the end).
        .target(name: "VigilPlatform"),
        .target(name: "CVigilEventLoop"),
        // EventLoopExecutor, its sleep and signal delivery, MonotonicClock: for every module
        // that must sleep or take signals the way the process's executor wants.
        .target(name: "VigilEventLoop", dependencies: ["CVigilEventLoop", "VigilPOSIX"]),
        // The preinit function that blocks a daemon's signals before the Swift runtime starts.
        // It takes /dev/null for closed 0-2 from CVigilEventLoop (one copy of that code).
        .target(name: "CVigilEarlySignals", dependencies: ["CVigilEventLoop"]),
        .target(name: "VigilEarlySignals", dependencies: ["CVigilEarlySignals"]),
        // memfd_create, which Swift cannot call, for snapshots in systemd's fd store.
        .target(name: "CVigilMemoryFile"),
        .target(
            name: "VigilSystemd",
            dependencies: [
                "CVigilMemoryFile",
                "VigilPOSIX",
                "VigilEventLoop",
                // Its seams (ServiceManagerNotifier, LifecycleObserver): VigilSystemd conforms to
                // them and spells them in systemd's terms, as NIOPosix conforms to NIOCore.
                "VigilLifecycle",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "VigilLifecycle",
            dependencies: [
                "VigilEventLoop",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // System calls without Foundation: the one errno-carrying error type and file I/O.
        .target(name: "VigilPOSIX"),
        // JSON with comments, the configuration loader, its errors and its listener.
        .target(
            name: "VigilConfiguration",
            dependencies: [
                "VigilLifecycle", "VigilPOSIX",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The state store, its listener (which logs an unclean shutdown under its journal MESSAGE_ID),
        // and trusted directories for files other processes read.
        .target(
            name: "VigilPersistence",
            dependencies: [
                "VigilConfiguration", "VigilLifecycle", "VigilPOSIX", "VigilSystemd",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "Vigil",
            dependencies: [
                "VigilConfiguration",
                "VigilEventLoop",
                "VigilLifecycle",
                "VigilPersistence",
                "VigilPOSIX",
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
                "VigilConfiguration",
                "VigilEventLoop",
                "VigilLifecycle",
                "VigilPOSIX",
                "VigilSystemd",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // SwiftConfigurationListener and its provider: swift-configuration's readers and watchers
        // on Vigil's two-phase reload.
        .target(
            name: "VigilSwiftConfiguration",
            dependencies: [
                "VigilConfiguration", "VigilLifecycle", "VigilPOSIX",
                .product(name: "Configuration", package: "swift-configuration"),
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
                "Vigil", "VigildCore", "VigilEarlySignals",
                .product(name: "Logging", package: "swift-log"),
            ],
            // Release builds lay out the functions a running vigild executes (start, reload,
            // stop; packaging/vigild.order, made by packaging/order-file.sh) next to each other
            // at the start of .text, so start-up faults in a few 64 KiB blocks of code instead
            // of one per function spread over 9 MB (README "Performance").
            linkerSettings: [
                .unsafeFlags(
                    ["-Xlinker", "--section-ordering-file=\(Context.packageDirectory)/packaging/vigild.order"],
                    .when(platforms: [.linux], configuration: .release)
                )
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
            name: "VigilEventLoopTests",
            dependencies: ["VigilEventLoop", "VigilPOSIX", "VigilTesting"]
        ),
        .testTarget(
            name: "VigilSystemdTests",
            dependencies: [
                "VigilLifecycle", "VigilPOSIX", "VigilSystemd", "VigilTesting",
                .product(name: "Logging", package: "swift-log"),
            ]
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
            name: "VigilConfigurationTests",
            dependencies: ["VigilConfiguration", "VigilPOSIX", "VigilTesting"]
        ),
        .testTarget(
            name: "VigilPersistenceTests",
            dependencies: ["VigilConfiguration", "VigilPersistence", "VigilPOSIX", "VigilTesting"]
        ),
        .testTarget(
            name: "VigilSwiftConfigurationTests",
            dependencies: [
                "VigilSwiftConfiguration", "VigilTesting",
                .product(name: "Configuration", package: "swift-configuration"),
            ]
        ),
        .testTarget(
            name: "VigilTestingTests",
            dependencies: ["VigilTesting"]
        ),
        // Runs the built vigild (`swift test` builds every target) rather than depending on it:
        // a dependency would link vigild's early signal block into the test runner.
        .testTarget(
            name: "vigildTests",
            dependencies: ["Vigil", "VigilTesting"]
        ),
        // The child of Tests/VigilSystemdTests/NotifierTests.swift: it notifies and reads the
        // watchdog from its own environment, so the test runner never calls setenv.
        .executableTarget(
            name: "vigil-notify-probe",
            dependencies: ["VigilPOSIX", "VigilSystemd"],
            path: "Tests/NotifyProbe"
        ),
        // The child of Tests/VigilEventLoopTests: runs one scenario on the event loop and prints
        // what happened, one line per step.
        .executableTarget(
            name: "vigil-loop-probe",
            dependencies: ["VigilEventLoop", "CVigilEventLoop", "VigilPOSIX"],
            path: "Tests/EventLoopProbe"
        ),
        // libsystemd's answer for the inputs Tests/VigilSystemdTests/LibsystemdConformanceTests.swift
        // gives Vigil (sd_journal_sendv, sd_listen_fds_with_names): the reference Vigil's own
        // protocol code is compared with. C, linked with libsystemd (libsystemd-dev,
        // packaging/build-deps.sh); not a product.
        .executableTarget(
            name: "vigil-libsystemd-reference",
            path: "Tests/LibsystemdReference",
            linkerSettings: [.linkedLibrary("systemd")]
        ),
        // The socket-activated child of Tests/VigilSystemdTests/SocketActivationProcessTests.swift
        // (not a product: `swift build` builds it next to the test bundle).
        .executableTarget(
            name: "vigil-socket-probe",
            dependencies: ["VigilSystemd", .product(name: "Logging", package: "swift-log")],
            path: "Tests/SocketActivationProbe"
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The same strict settings for every Swift target (as swift-log's manifest applies its own); C
// targets ignore them.
for target in package.targets where [.executable, .test, .regular].contains(target.type) {
    // C targets (CVigil…) need no Swift module; every Swift target may `import VigilPlatform`.
    if !target.name.hasPrefix("CVigil") && !["VigilPlatform", "vigil-libsystemd-reference"].contains(target.name) {
        target.dependencies.append("VigilPlatform")
    }
    var settings = target.swiftSettings ?? []
    // https://github.com/apple/swift-evolution/blob/main/proposals/0335-existential-any.md
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    // https://github.com/swiftlang/swift-evolution/blob/main/proposals/0444-member-import-visibility.md
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    target.swiftSettings = settings
}

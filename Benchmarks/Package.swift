// swift-tools-version:6.1
import PackageDescription

// Vigil's benchmarks, a package of their own (as SwiftNIO's Benchmarks/ is) that depends on the
// library by path, so the library package ships no benchmark product and no malloc interposer.
//
// - Benchmarks/VigilBenchmarks: the in-process microbenchmarks (fan-out, in-process reload,
//   journal handler, notifier) on ordo-one/package-benchmark, whose malloc interposer counts
//   allocations: `bash Benchmarks/in-process.sh` (or `swift package benchmark` here, see that
//   script for the journal socket). Benchmarks/StderrBenchmarks: the stderr fallback, in a
//   process of its own (swift-log is bootstrapped once per process).
// - vigil-process-benchmarks: the process harness (start, reload, stop, RSS, wake-ups against the
//   C floor, the Go peer and a static Swift hello-world): `bash Benchmarks/run.sh`.
//
// Linux only, as the library is.
let package = Package(
    name: "vigil-benchmarks",
    dependencies: [
        .package(name: "vigil", path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark", exact: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // libsystemd, for the raw C calls the handlers are compared against (libsystemd-dev).
        .systemLibrary(
            name: "CVigilSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        // The clock, the error and the socket both executables use.
        .target(name: "BenchmarkSupport"),
        // pidfd_open for the process harness's stop, which waits for the exit in the reader's loop.
        .target(name: "CProcessSupport"),
        .executableTarget(
            name: "VigilBenchmarks",
            dependencies: [
                "BenchmarkSupport",
                "CVigilSystemd",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Vigil", package: "vigil"),
                .product(name: "VigilLifecycle", package: "vigil"),
                .product(name: "VigilSystemd", package: "vigil"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/VigilBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "StderrBenchmarks",
            dependencies: [
                "BenchmarkSupport",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Vigil", package: "vigil"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/StderrBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "vigil-process-benchmarks",
            dependencies: [
                "BenchmarkSupport",
                "CProcessSupport",
                .product(name: "VigilTesting", package: "vigil"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// swift-tools-version:6.1
// hello-http: a real HTTP service built only with the calls a Vigil daemon author has.
// A package of its own, depending on this repository by path. SwiftPM names a path dependency
// after its directory, which differs between clones, so it is named explicitly.
import PackageDescription

let package = Package(
    name: "hello-http",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "hello-http", targets: ["hello-http"])
    ],
    dependencies: [
        .package(name: "vigil", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // Already in Hummingbird's graph; named here because DescriptorServer imports them.
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.24.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        .executableTarget(
            name: "hello-http",
            dependencies: [
                .product(name: "Vigil", package: "vigil"),
                // Opt-in: blocks the daemon's signals before the Swift runtime starts.
                .product(name: "VigilEarlySignals", package: "vigil"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("MemberImportVisibility"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)

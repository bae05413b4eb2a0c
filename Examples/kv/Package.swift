// swift-tools-version:6.1
// kv: a small key-value server on Vigil — a line protocol on a socket-activated Unix socket (and
// an optional loopback TCP port), values in SQLite through GRDB. A package of its own, depending
// on this repository by path. SwiftPM names a path dependency after its directory, which differs
// between clones, so it is named explicitly.
import PackageDescription

let package = Package(
    name: "kv",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "kv", targets: ["kv"])
    ],
    dependencies: [
        .package(name: "vigil", path: "../.."),
        // SQLite through the system's libsqlite3 (libsqlite3-dev, which ci.sh installs).
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        .executableTarget(
            name: "kv",
            dependencies: [
                .product(name: "Vigil", package: "vigil"),
                // Opt-in: blocks the daemon's signals before the Swift runtime starts.
                .product(name: "VigilEarlySignals", package: "vigil"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("MemberImportVisibility"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)

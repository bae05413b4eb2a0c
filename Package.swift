// swift-tools-version:6.1
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "vigil",
    platforms: [.macOS(.v15)],
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
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // libsystemd, linked dynamically: Debian ships no libsystemd.a.
        .systemLibrary(
            name: "CVigilSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        .target(
            name: "VigilSystemd",
            dependencies: [
                "CVigilSystemd",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "VigilLifecycle",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "Vigil",
            dependencies: [
                "VigilLifecycle",
                "VigilSystemd",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "VigilTesting",
            dependencies: [
                "Vigil",
                "VigilLifecycle",
                "VigilSystemd",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "vigild",
            dependencies: [
                "Vigil",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "VigilLifecycleTests",
            dependencies: [
                "VigilLifecycle", "VigilTesting",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "VigilSystemdTests",
            dependencies: ["VigilSystemd", "VigilTesting", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "VigilTests",
            dependencies: ["Vigil", "VigilTesting", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "VigilTestingTests",
            dependencies: ["VigilTesting"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "vigildTests",
            dependencies: ["vigild", "Vigil", "VigilTesting"],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)

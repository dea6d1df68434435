// swift-tools-version:6.2
import PackageDescription

// Swift 6 language mode everywhere; full data-race checking comes with it.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "revsync",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "RevsyncWire", targets: ["RevsyncWire"]),
        .library(name: "RevsyncServer", targets: ["RevsyncServer"]),
        .executable(name: "revsync", targets: ["revsync"]),
        .executable(name: "revsync-sim", targets: ["revsync-sim"]),
    ],
    dependencies: [
        // Default traits make `swift build` and `swift test` pass different flags,
        // which recompiles Hummingbird on every switch (see PITFALLS.md).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/adam-fowler/compress-nio", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
    ],
    targets: [
        // The contract's JSON shapes and the dataset schema model. Foundation only.
        .target(name: "RevsyncWire", swiftSettings: swiftSettings),
        // The sync rules as pure functions over values, and the vocabulary the server and the
        // device share (record keys, temporary-id mappings, relations and the on-delete walk,
        // value and name rules): no I/O, no SQL.
        .target(name: "RevsyncRules", dependencies: ["RevsyncWire"], swiftSettings: swiftSettings),
        // Debian's zlib (zlib1g-dev) as a Swift module: raw deflate fragments and crc32_combine.
        .systemLibrary(name: "CZlib", path: "Sources/CZlib"),
        // Strict gzip for HTTP bodies, the same on the server and the device, and gzip answers
        // assembled from change sets compressed once.
        .target(
            name: "RevsyncGzip",
            dependencies: [
                "CZlib",
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The server: Sync (the service that puts the rules in order), Stores (the protocols it
        // needs), Postgres and Redis (their implementations), HTTP (controllers and guards),
        // Devices (tokens and their cache) and Metrics. It decides nothing RevsyncRules does not.
        .target(
            name: "RevsyncServer",
            dependencies: [
                "RevsyncHarness",
                "RevsyncWire",
                "RevsyncRules",
                "RevsyncGzip",
                "RevsyncRedis",
                "RevsyncSnapshotFile",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // Snapshot files read one chunk at a time (FileBody), as Hummingbird's FileIO reads them.
                .product(name: "_NIOFileSystem", package: "swift-nio"),
            ],
            resources: [.copy("Resources/openapi.json")],
            swiftSettings: swiftSettings
        ),
        // A small Redis client on SwiftNIO: RESP2, pipelined calls on a few shared connections.
        .target(
            name: "RevsyncRedis",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The SQLite file a device keeps its records in, as the server builds it for devices to
        // start from (`GET /snapshot` as application/vnd.sqlite3): tables, values, writing and checks.
        .target(
            name: "RevsyncSnapshotFile",
            dependencies: [
                "RevsyncWire",
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's own calls, to bind a row's values without GRDB's `StatementArguments` (SnapshotRowInsert).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swiftSettings
        ),
        // The device side of the contract: SQLite store, outbox, sync loop, on the shared rules and gzip.
        .target(
            name: "RevsyncDevice",
            dependencies: [
                "RevsyncWire",
                "RevsyncRules",
                "RevsyncGzip",
                "RevsyncSnapshotFile",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Free loopback ports and a service run beside a body: shared by the server, the CLI, the bench, the simulator and the tests.
        .target(
            name: "RevsyncHarness",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "revsync",
            dependencies: [
                "RevsyncHarness",
                "RevsyncServer",
                "RevsyncWire",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Catch-up and write benchmarks (Scripts/bench): figures, not tests.
        .executableTarget(
            name: "revsync-bench",
            dependencies: [
                "RevsyncHarness",
                "RevsyncGzip",
                // The snapshot bench's devices (JSON against the SQLite file).
                "RevsyncDevice",
                "RevsyncSnapshotFile",
                "RevsyncServer",
                "RevsyncRedis",
                "RevsyncRules",
                // The simulator's seeded generator, for the text-like log.
                "RevsyncLink",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "CompressNIO", package: "compress-nio"),
                // The push bench's waiting devices: raw channels, far lighter than AsyncHTTPClient at 10,000 connections.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Simulator: a seeded fault-injecting HTTP proxy between a virtual device and the server.
        .target(
            name: "RevsyncLink",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Simulator/Sources/RevsyncLink",
            swiftSettings: swiftSettings
        ),
        // Simulator: virtual devices, workload, server faults, the convergence verdict and the report.
        .target(
            name: "RevsyncSim",
            dependencies: [
                "RevsyncHarness",
                "RevsyncWire",
                "RevsyncRules",
                "RevsyncServer",
                "RevsyncDevice",
                "RevsyncLink",
                "RevsyncRedis",
                "RevsyncGzip",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Simulator/Sources/RevsyncSim",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "revsync-sim",
            dependencies: [
                "RevsyncSim",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Simulator/Sources/revsync-sim",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RevsyncSimTests",
            dependencies: [
                "RevsyncSim", "RevsyncHarness", "RevsyncTestSupport", "RevsyncLink", "RevsyncGzip",
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Simulator/Tests/RevsyncSimTests",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RevsyncLinkTests",
            dependencies: [
                "RevsyncHarness",
                "RevsyncLink",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // TCPRelayTests' raw echo server and clients.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Simulator/Tests/RevsyncLinkTests",
            swiftSettings: swiftSettings
        ),
        // RevsyncLink for its seeded generator (`SplitMix64`), so that random cases reproduce.
        .testTarget(name: "RevsyncWireTests", dependencies: ["RevsyncWire", "RevsyncLink"], swiftSettings: swiftSettings),
        .testTarget(name: "RevsyncRulesTests", dependencies: ["RevsyncRules", "RevsyncLink"], swiftSettings: swiftSettings),
        .testTarget(name: "RevsyncGzipTests", dependencies: ["RevsyncGzip", "RevsyncLink"], swiftSettings: swiftSettings),
        .testTarget(
            name: "RevsyncSnapshotFileTests",
            dependencies: ["RevsyncSnapshotFile", "RevsyncWire", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: swiftSettings),
        // What tests of several targets share: throwaway databases, Redis servers, a live server.
        .target(
            name: "RevsyncTestSupport",
            dependencies: [
                "RevsyncHarness",
                "RevsyncServer",
                "RevsyncRedis",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/RevsyncTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RevsyncRedisTests",
            dependencies: [
                // RevsyncLink for its TCP relay: a path to Redis that dies without a reset.
                "RevsyncRedis", "RevsyncHarness", "RevsyncTestSupport", "RevsyncLink",
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RevsyncHarnessTests",
            dependencies: ["RevsyncHarness", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RevsyncDeviceTests", dependencies: ["RevsyncDevice", "RevsyncRules", "RevsyncGzip", "RevsyncSnapshotFile", "RevsyncTestSupport"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "RevsyncServerTests",
            dependencies: [
                "RevsyncHarness",
                "RevsyncGzip",
                "RevsyncServer",
                "RevsyncRedis",
                "RevsyncSnapshotFile",
                "RevsyncTestSupport",
                // Its TCPRelay cuts one instance from Redis (DeviceLifecycleTests).
                "RevsyncLink",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)

import Glibc
import Testing
import VigilSystemd
import VigilTesting

/// Snapshots in systemd's file-descriptor store: what goes out (through a fake notify socket)
/// and what comes back (a memory file passed as LISTEN_FDS to the probe, as systemd passes it),
/// validated like a state file.
@Suite struct StoredSnapshotTests {
    /// The old snapshot is removed first, then the new one goes with its descriptor.
    @Test func storingRemovesTheOldOneThenPassesASealedFile() async throws {
        let fake = try FakeNotifySocket()
        let reports = try await NotifyProbe.run(
            ["snapshot-store=cache:hello"],
            environment: ["NOTIFY_SOCKET": fake.path]
        )
        #expect(reports == ["stored=true"])
        let datagrams = try await fake.datagrams.wait { $0.count == 2 }
        #expect(datagrams.map(\.text) == ["FDSTOREREMOVE=1\nFDNAME=cache", "FDSTORE=1\nFDNAME=cache"])
        #expect(datagrams[0].passedDescriptors.isEmpty && datagrams[1].passedDescriptors.count == 1)
    }

    @Test func withoutNotifySocketNothingIsStored() async throws {
        #expect(try await NotifyProbe.run(["snapshot-store=cache:hello"]) == ["stored=false"])
    }

    /// A probe started with `file` passed as LISTEN_FDS under `cache`, restoring it.
    static func restore(_ file: Int32) async throws -> String {
        let probe = try NotifyProbe(
            ["snapshot-restore=cache", "snapshot-restore=cache"],
            listenFileDescriptors: [(fileDescriptor: file, name: "cache")]
        )
        let reports = try await probe.reports(2)
        #expect(try await probe.process.waitForExit() == 0)
        #expect(reports[1] == "restored cache none", "a snapshot is restored once")
        return reports[0]
    }

    @Test func aSealedFileComesBackWithItsBytes() async throws {
        let file = try StoredSnapshot.makeSealedFile(Array("count=42".utf8), name: "cache")
        defer { close(file) }
        #expect(try await Self.restore(file) == "restored cache=count=42")
    }

    @Test func nothingPassedIsNone() async throws {
        #expect(try await NotifyProbe.run(["snapshot-restore=cache"]) == ["restored cache none"])
    }

    /// An unsealed memory file could have been changed by whoever else holds it; a plain file or
    /// a pipe is no snapshot at all.
    @Test func whatIsNotASealedMemoryFileIsRefused() async throws {
        let unsealed = try StoredSnapshot.makeSealedFile(Array("x".utf8), name: "cache", seal: false)
        defer { close(unsealed) }
        let report = try await Self.restore(unsealed)
        #expect(report.hasPrefix("error code=invalid: "), "\(report)")
        #expect(report.contains("is not sealed against writing, shrinking and growing"), "\(report)")

        let path = temporaryDirectory() + "/state"
        writeFile(path, "x")
        let plain = open(path, O_RDONLY | O_CLOEXEC)
        defer { close(plain) }
        // Not sealable on most file systems; on tmpfs sealable in principle, but never sealed.
        let plainReport = try await Self.restore(plain)
        #expect(
            plainReport.contains("it cannot be sealed (not a memory file)")
                || plainReport.contains("is not sealed against writing, shrinking and growing"),
            "\(plainReport)"
        )

        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]); close(ends[1]) }
        #expect(try await Self.restore(ends[0]).contains("it is a FIFO (named pipe), not a sealed memory file"))
    }

    @Test func aSnapshotOverTheLimitIsRefused() async throws {
        let big = try StoredSnapshot.makeSealedFile(
            [UInt8](repeating: 1, count: StoredSnapshot.sizeLimit + 1),
            name: "cache"
        )
        defer { close(big) }
        #expect(try await Self.restore(big).contains("it is larger than the limit of 16 MiB"))
        let reports = try await NotifyProbe.run(
            ["snapshot-store=bad:name:x"],
            environment: ["NOTIFY_SOCKET": "/nonexistent"]
        )
        #expect(reports[0].hasPrefix("error code=storeFailed: "), "\(reports)")
    }

    @Test(arguments: ["", "a:b", "tab\there", String(repeating: "n", count: 256)])
    func anInvalidNameIsRefused(name: String) throws {
        let error = try #require(throws: SystemdError.self) { try StoredSnapshot.store([], name: name) }
        #expect(error.code == .invalidName)
    }
}

import Testing
import VigilPOSIX
import VigilPersistence
import VigilPlatform
import VigilTesting

/// Rows of README's failure-mode table with the failing call failed through `SystemCall`'s
/// seam: a full disk, an I/O error, a file another process holds, no descriptors left, without
/// root, a tmpfs or a spawned process (the end-to-end checks of the same rows stay).
@Suite struct StateStoreSystemCallFailureTests {
    /// "disk full": the checkpoint fails with the OS's words, the previous file stays whole and
    /// no temporary file is left; once there is space the next checkpoint writes.
    @Test(arguments: [
        (SystemCall.Name.write, ENOSPC, "write", "No space left on device"),
        (SystemCall.Name.fsync, EIO, "fsync", "Input/output error"),
        (SystemCall.Name.rename, ENOSPC, "rename", "No space left on device"),
    ])
    func aFailedCheckpointKeepsThePreviousFile(
        call: SystemCall.Name,
        code: Int32,
        operation: String,
        words: String
    )
        throws
    {
        let path = temporaryDirectory() + "/state.json"
        let store = try StateStore(path: path)
        try store.set(Counter(count: 1), forKey: "heartbeat")
        #expect(try store.checkpoint())
        let before = readFile(path)
        try store.set(Counter(count: 2), forKey: "heartbeat")
        let failure = SystemCall.inject(call, .pathContaining(path), errno: code)
        defer { failure.remove() }
        let error = #expect(throws: SystemError.self) { try store.checkpoint() }
        #expect(failure.injected == 1)
        #expect(error?.errno == code)
        let target = call == .rename ? "\(path)" : "\(path).tmp"
        #expect(error?.description.hasPrefix("cannot \(operation) \(target)") == true, "\(String(describing: error))")
        #expect(error?.description.hasSuffix(": \(words)") == true, "\(String(describing: error))")
        #expect(readFile(path) == before, "the previous checkpoint is intact")
        #expect(access(path + ".tmp", F_OK) != 0, "no temporary file is left")
        #expect(store.hasUnsavedChanges, "the change is not counted as saved")
        #expect(try store.checkpoint(), "the next checkpoint writes")
        #expect(readFile(path)?.contains("\"count\": 2") == true)
    }

    /// "A read that fails for a reason that passes (EAGAIN from a lease or lock another process
    /// holds, EIO, out of descriptors) fails the start instead and leaves the file where it is."
    @Test(arguments: [
        (SystemCall.Name.read, EIO, "Input/output error"),
        (SystemCall.Name.open, EAGAIN, "another process holds a lease or lock on it"),
        (SystemCall.Name.open, EMFILE, "EMFILE: the process reached its limit"),
    ])
    func aReadThatFailsForAPassingReasonLeavesTheFile(call: SystemCall.Name, code: Int32, words: String) throws {
        let path = temporaryDirectory() + "/state.json"
        let contents = "{ \"formatVersion\": 1, \"heartbeat\": { \"count\": 3 } }\n"
        writeFile(path, contents)
        let failure = SystemCall.inject(call, .pathContaining(path), errno: code)
        defer { failure.remove() }
        let error = #expect(throws: StateStoreError.self) { try StateStore(path: path) }
        #expect(error?.code == .unreadable)
        #expect(failure.injected == 1)
        #expect(error?.cause?.errno == code)
        let message = error?.description ?? ""
        #expect(message.hasPrefix("cannot read the state file \(path) now: "), "\(message)")
        #expect(message.contains(words), "\(message)")
        #expect(message.hasSuffix("it was left as it is, start again once it reads"), "\(message)")
        #expect(readFile(path) == contents, "left where it is")
        #expect(access(path + ".corrupt-1", F_OK) != 0, "not moved aside")
        failure.remove()
        #expect(try StateStore(path: path).value(Counter.self, forKey: "heartbeat") == Counter(count: 3))
    }
}

/// The runtime files other processes read (`status.json`, the unclean-shutdown marker) are written
/// through the same seam: a failed create, `fchmod`, `write` or rename leaves the previous file
/// whole and no temporary file behind.
@Suite struct RuntimeFileSystemCallFailureTests {
    @Test(arguments: [
        (SystemCall.Name.open, EMFILE, "create", "status.json.tmp"),
        (SystemCall.Name.fchmod, EIO, "set the mode of", "status.json.tmp"),
        (SystemCall.Name.write, ENOSPC, "write", "status.json.tmp"),
        (SystemCall.Name.rename, ENOSPC, "rename status.json.tmp to", "status.json"),
    ])
    func aFailedWriteKeepsThePreviousFile(
        call: SystemCall.Name,
        code: Int32,
        operation: String,
        named: String
    )
        throws
    {
        let path = temporaryDirectory()
        let directory = try TrustedDirectory.open(path)
        try directory.writeAtomically(Array("first".utf8), to: "status.json")
        let failure = SystemCall.inject(call, .pathContaining(path + "/status.json"), errno: code)
        defer { failure.remove() }
        let error = #expect(throws: SystemError.self) {
            try directory.writeAtomically(Array("second".utf8), to: "status.json")
        }
        #expect(failure.injected == 1)
        #expect(error?.errno == code)
        #expect(
            error?.description.hasPrefix("cannot \(operation) \(path)/\(named)") == true,
            "\(String(describing: error))"
        )
        #expect(try directory.read("status.json") == Array("first".utf8), "the previous file is intact")
        #expect(access(path + "/status.json.tmp", F_OK) != 0, "no temporary file is left")
        try directory.writeAtomically(Array("third".utf8), to: "status.json")
        #expect(try directory.read("status.json") == Array("third".utf8), "the next write lands")
    }
}

/// The seam itself: which call fails, how many times, and that a removed scope fails none.
@Suite struct FailureSeamTests {
    @Test func failsTheNthMatchingCallAndCountsWhatItSaw() throws {
        let directory = temporaryDirectory()
        let path = directory + "/file"
        writeFile(path, "x")
        let failure = SystemCall.inject(.open, .pathContaining(path), errno: EIO, after: 2, count: 2)
        defer { failure.remove() }
        var results: [Int32?] = []
        for _ in 0..<5 {
            do {
                _ = try FileSystem.read(path)
                results.append(nil)
            } catch {
                results.append(error.errno)
            }
        }
        #expect(results == [nil, nil, EIO, EIO, nil])
        #expect(failure.seen == 5)
        #expect(failure.injected == 2)
        writeFile(directory + "/other", "y")
        let failAll = SystemCall.inject(.open, .pathContaining(path), errno: EIO, count: .max)
        #expect(try FileSystem.read(directory + "/other") == Array("y".utf8), "another path is not failed")
        failAll.remove()
        failure.remove()
        #expect(try FileSystem.read(path) == Array("x".utf8), "a removed scope fails nothing")
        #expect(failAll.injected == 0)
    }
}

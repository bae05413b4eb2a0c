import Glibc
import Testing
import VigilPersistence
import VigilTesting

@Suite struct StateStoreTests {
    @Test func roundTripsEachListenersValueUnderItsKey() throws {
        let path = temporaryDirectory() + "/state.json"
        let store = try StateStore(path: path)
        #expect(try store.value(Counter.self, forKey: "heartbeat") == nil)
        try store.set(Counter(count: 41), forKey: "heartbeat")
        try store.set(["x", "y"], forKey: "other")
        #expect(store.hasUnsavedChanges)
        #expect(try store.checkpoint())
        #expect(!store.hasUnsavedChanges)
        #expect(try store.checkpoint() == false, "nothing changed")
        #expect(
            readFile(path)
                == "{\n  \"formatVersion\": 1,\n  \"heartbeat\": {\n    \"count\": 41\n  },\n  \"other\": [\n    \"x\",\n    \"y\"\n  ]\n}\n"
        )
        let reopened = try StateStore(path: path)
        #expect(try reopened.value(Counter.self, forKey: "heartbeat") == Counter(count: 41))
        #expect(try reopened.value([String].self, forKey: "other") == ["x", "y"])
        #expect(reopened.restored.keys == 2)
    }

    /// A directory at the state file's path was moved aside as a corrupt file, with all it
    /// held (a daemon that passed its state directory for the file lost the directory's
    /// contents, the running daemon's instance.lock among them: helper 54). Now the open fails
    /// naming the mistake, and the directory stays where it is.
    @Test func aDirectoryAtThePathIsAnErrorAndStaysWhereItIs() throws {
        let directory = temporaryDirectory() + "/state"
        #expect(mkdir(directory, 0o700) == 0)
        writeFile(directory + "/kept", "x")
        let error = try #require(throws: StateStoreError.self) { try StateStore(path: directory) }
        #expect(error.code == .unreadable)
        #expect(
            error.description
                == "the state file \(directory) is a directory: the path must name a file in it "
                + "(DaemonOptions.stateFile, not stateDirectory); the directory was left as it is"
        )
        #expect(readFile(directory + "/kept") == "x")
        #expect(access(directory + ".corrupt-1", F_OK) != 0)
    }

    /// Whether the file holds a state, known without the file system (a failed final
    /// checkpoint says whether the previous one is kept; it asked the file system with an
    /// lstat on the daemon's thread, which a hung mount would have held).
    @Test func theStoreKnowsWhetherItsFileHoldsAState() throws {
        let path = temporaryDirectory() + "/state.json"
        let first = try StateStore(path: path)
        #expect(!first.fileHoldsAState, "a first start: no file")
        try first.set(Counter(count: 1), forKey: "c")
        #expect(!first.fileHoldsAState)
        #expect(try first.checkpoint())
        #expect(first.fileHoldsAState)
        #expect(try StateStore(path: path).fileHoldsAState, "restored")
        writeFile(path, "not JSON")
        #expect(try !StateStore(path: path).fileHoldsAState, "moved aside")
    }

    /// A key a daemon no longer uses goes from the file at the next checkpoint; removing a key
    /// that is not there changes nothing (no checkpoint is due for it).
    @Test func aRemovedKeyLeavesTheFileAtTheNextCheckpoint() throws {
        let path = temporaryDirectory() + "/state.json"
        let store = try StateStore(path: path)
        try store.set(Counter(count: 41), forKey: "heartbeat")
        try store.set(["x"], forKey: "tally")
        #expect(try store.checkpoint())
        #expect(store.removeValue(forKey: "nothing here") == false)
        #expect(!store.hasUnsavedChanges)
        #expect(store.removeValue(forKey: "tally"))
        #expect(try store.value([String].self, forKey: "tally") == nil)
        #expect(store.hasUnsavedChanges)
        #expect(store.unsavedSummary == "tally removed (on disk: [\"x\"])")
        #expect(try store.checkpoint())
        #expect(readFile(path) == "{\n  \"formatVersion\": 1,\n  \"heartbeat\": {\n    \"count\": 41\n  }\n}\n")
        let reopened = try StateStore(path: path)
        #expect(try reopened.value([String].self, forKey: "tally") == nil)
        #expect(try reopened.value(Counter.self, forKey: "heartbeat") == Counter(count: 41))
    }

    @Test(arguments: [
        "{ \"formatVersion\": 1, \"heartbeat\": { \"count\": 4", "", "[]", "{ \"heartbeat\": {} }", "\u{1}garbage",
    ])
    func aCorruptFileIsMovedAsideNeverOverwritten(content: String) throws {
        let directory = temporaryDirectory()
        let path = directory + "/state.json"
        writeFile(path, content)
        let store = try StateStore(path: path)
        #expect(store.restored.movedAside == path + ".corrupt-1")
        #expect(store.restored.problem != nil)
        #expect(readFile(path + ".corrupt-1") == content)
        #expect(try store.value(Counter.self, forKey: "heartbeat") == nil, "starts from empty state")
        writeFile(path, "not json either")
        #expect(try StateStore(path: path).restored.movedAside == path + ".corrupt-2", "the first one is kept")
    }

    @Test func aNewerFormatIsRefused() throws {
        let path = temporaryDirectory() + "/state.json"
        writeFile(path, "{ \"formatVersion\": 99 }")
        let error = #expect(throws: StateStoreError.self) { try StateStore(path: path) }
        #expect(error?.code == .newerFormat)
        #expect(error?.description.contains("format 99; this build reads up to 1") == true)
        #expect(readFile(path) == "{ \"formatVersion\": 99 }", "left untouched")
    }

    /// A key the file's reader would refuse is refused when stored, so a checkpoint never writes
    /// a file that the next start would set aside with every other key in it.
    @Test func keysTheFileCannotHoldAreRefusedWhenStored() throws {
        let path = temporaryDirectory() + "/state.json"
        let store = try StateStore(path: path)
        try store.set(Counter(count: 1), forKey: "heartbeat")
        let hostile = "e" + String(repeating: "\u{301}", count: 31)
        let inside = #expect(throws: (any Error).self) { try store.set([hostile: 1], forKey: "clients") }
        #expect("\(inside.map { String(describing: $0) } ?? "")".contains("30 combining marks") == true)
        let outside = #expect(throws: StateStoreError.self) { try store.set(1, forKey: hostile) }
        #expect(outside?.code == .invalidKey)
        #expect(outside?.description.contains("30 combining marks") == true)
        let reserved = #expect(throws: StateStoreError.self) { try store.set(2, forKey: "formatVersion") }
        #expect(reserved?.code == .invalidKey)
        #expect(reserved?.description.contains("formatVersion is the state file's own key") == true)
        #expect(try store.checkpoint())
        let reopened = try StateStore(path: path)
        #expect(reopened.restored.movedAside == nil)
        #expect(try reopened.value(Counter.self, forKey: "heartbeat") == Counter(count: 1), "what was stored stays")
        #expect(try reopened.value([String: Int].self, forKey: "clients") == nil)
    }

    @Test func leftoverTemporaryFilesAreRemoved() throws {
        let path = temporaryDirectory() + "/state.json"
        writeFile(path + ".tmp", "half a checkp")
        _ = try StateStore(path: path)
        #expect(access(path + ".tmp", F_OK) != 0)
    }
}

import Glibc
import Testing
import VigilConfiguration
import VigilPOSIX
import VigilPersistence
import VigilTesting

/// A value nested `depth` arrays deep: `[[[…]]]`.
private struct Nested: Codable, Equatable {
    var depth: Int
    init(depth: Int) { self.depth = depth }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        if depth > 1 { try container.encode(Nested(depth: depth - 1)) }
    }
    init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        depth = try container.isAtEnd ? 1 : container.decode(Nested.self).depth + 1
    }
}

/// The size of the file at `path`, or -1.
private func fileSize(_ path: String) -> Int {
    var info = stat()
    return stat(path, &info) == 0 ? Int(info.st_size) : -1
}

/// What a checkpoint writes, against what the store holds and what its reader takes. Before,
/// the writer indented every level of nesting by two more spaces and the checkpoint wrote
/// whatever came out: a state file comes back far larger than it went in, or larger than the
/// next start reads (which then set it aside, and the daemon lost its state).
@Suite struct StateSizeTests {
    /// The security review's file: 200 arrays each nested 250 deep, about 100 KB. It came back
    /// from a checkpoint as 25 MB (1 MiB of it as 266 MB, 330 MB of memory). Now the file is
    /// at most twice the compact text, still indented where it is shallow, and reads back the
    /// same.
    @Test func aDeeplyNestedStateRoundTripsWithinTwiceItsSize() throws {
        let path = temporaryDirectory() + "/state.json"
        let deep = String(repeating: "[", count: 250) + String(repeating: "]", count: 250)
        let nested = "[" + Array(repeating: deep, count: 200).joined(separator: ",") + "]"
        let original = #"{"formatVersion":1,"heartbeat":{"count":1000},"o":"# + nested + "}"
        writeFile(path, original)
        let store = try StateStore(path: path)
        #expect(store.restored.movedAside == nil)
        try store.set(Counter(count: 1001), forKey: "heartbeat")
        #expect(try store.checkpoint())

        let size = fileSize(path)
        #expect(size <= 2 * original.utf8.count, "\(size) bytes from \(original.utf8.count)")
        let text = try #require(readFile(path))
        #expect(
            text.hasPrefix("{\n  \"formatVersion\": 1,\n  \"heartbeat\": {\n    \"count\": 1001\n  },\n  \"o\": [\n")
        )
        #expect(!text.contains(String(repeating: " ", count: 2 * JSONWriter.indentedDepth + 1)))
        let reopened = try StateStore(path: path)
        #expect(reopened.restored.movedAside == nil)
        #expect(try reopened.value(Counter.self, forKey: "heartbeat") == Counter(count: 1001))
        let expected = try JSONParser.parse(Array(original.utf8))["o"].map { JSONWriter.write($0, pretty: false) }
        let written = try JSONParser.parse(Array(text.utf8))["o"].map { JSONWriter.write($0, pretty: false) }
        #expect(written == expected, "the same value, element for element")
    }

    /// A long list of small values, indented, is several times its compact text (a 5 MiB list of
    /// `1` came back as 18.35 MB, over the reader's 16 MiB: the next start moved it aside and
    /// the count began again at 0). Nested seven levels, 2 MiB came back as 20 MB. Now such a
    /// state is written compactly, and read back.
    @Test func aLongListIsWrittenCompactlyAndReadBack() throws {
        let path = temporaryDirectory() + "/state.json"
        let list = String(repeating: "1,", count: 1 << 20) + "1"
        let wrapped = String(repeating: "[", count: 7) + list + String(repeating: "]", count: 7)
        let original = #"{"formatVersion":1,"heartbeat":{"count":7},"list":"# + wrapped + "}"
        writeFile(path, original)
        let store = try StateStore(path: path)
        try store.set(Counter(count: 8), forKey: "heartbeat")
        #expect(try store.checkpoint())

        #expect(fileSize(path) == original.utf8.count, "compact, as it was")
        let reopened = try StateStore(path: path)
        #expect(reopened.restored.movedAside == nil, "\(reopened.restored.problem ?? "")")
        #expect(try reopened.value(Counter.self, forKey: "heartbeat") == Counter(count: 8))
        #expect(reopened.restored.keys == 2)
    }

    /// A state that is not small is still indented when that costs less than its compact size
    /// again: a few hundred records of a few fields each (100 KB) stay as an admin reads them.
    @Test func aLargerStateOfRecordsStaysIndented() throws {
        struct Record: Codable, Equatable { var name: String, port: Int, enabled: Bool }
        let path = temporaryDirectory() + "/state.json"
        let store = try StateStore(path: path)
        let records = (0..<2000).map { Record(name: "service-\($0)", port: 8000 + $0, enabled: $0 % 2 == 0) }
        try store.set(records, forKey: "records")
        #expect(try store.checkpoint())
        let text = try #require(readFile(path))
        #expect(text.utf8.count > StateStore.readableSize)
        #expect(text.contains("\n  \"records\": [\n    {\n      \"name\": \"service-0\",\n      \"port\": 8000,"))
        #expect(try StateStore(path: path).value([Record].self, forKey: "records") == records)
    }

    /// A state over what the reader takes (16 MiB, compactly) is never written: the checkpoint
    /// fails saying what is too large and what to do, and the file keeps the previous
    /// checkpoint. Before, a file of 18 MiB was written, and the next start set it aside.
    @Test func aStateOverTheLimitFailsTheCheckpointAndKeepsThePreviousFile() throws {
        let path = temporaryDirectory() + "/state.json"
        let store = try StateStore(path: path)
        try store.set(Counter(count: 1), forKey: "heartbeat")
        #expect(try store.checkpoint())
        let previous = try #require(readFile(path))

        let nine = String(repeating: "x", count: 9 << 20)
        try store.set(nine, forKey: "first")
        try store.set(nine, forKey: "second")
        try store.set(Counter(count: 2), forKey: "heartbeat")
        let error = #expect(throws: StateStoreError.self) { try store.checkpoint() }
        #expect(error?.code == .tooLarge)
        #expect(
            error?.description
                == "cannot write a checkpoint to \(path): the state takes more than 16 MiB (16777216 bytes) even "
                + "written compactly, more than the reader at the next start takes; the largest of its 3 values: "
                + "\"second\" 9437195 bytes, \"first\" 9437194 bytes, \"heartbeat\" 23 bytes. The file keeps the "
                + "previous checkpoint; store less under those keys, or remove those no longer used "
                + "(removeValue(forKey:))"
        )
        #expect(error?.description.contains("file system") == false)
        #expect(readFile(path) == previous, "the previous checkpoint stays")
        #expect(access(path + ".tmp", F_OK) != 0, "nothing half-written beside it")
        #expect(store.hasUnsavedChanges)
        #expect(store.unsavedSummary.hasPrefix("heartbeat = {\"count\":2} (on disk: {\"count\":1}); first = \"xxx"))

        // Once it fits again, the next checkpoint writes it all.
        #expect(store.removeValue(forKey: "second"))
        #expect(try store.checkpoint())
        let reopened = try StateStore(path: path)
        #expect(try reopened.value(String.self, forKey: "first") == nine)
        #expect(try reopened.value(Counter.self, forKey: "heartbeat") == Counter(count: 2))
    }

    /// A value no state file can hold is refused when stored, as a key the reader refuses is:
    /// nothing is stored, what was there stays, and the checkpoints go on. Before, a value
    /// nested 256 deep was written, and the next start set the whole file aside.
    @Test func aValueNoFileCanHoldIsRefusedWhenStored() throws {
        let path = temporaryDirectory() + "/state.json"
        let store = try StateStore(path: path)
        try store.set(Nested(depth: 2), forKey: "tree")

        let deep = #expect(throws: StateStoreError.self) {
            try store.set(Nested(depth: StateStore.maximumValueDepth + 1), forKey: "tree")
        }
        #expect(deep?.code == .tooLarge)
        #expect(
            deep?.description
                == "cannot store the key \"tree\": its value nests arrays and objects more than 255 levels deep, "
                + "which the state file's reader refuses (so the next start would set the whole file aside); store "
                + "it flatter. Nothing was stored, and what was stored before under the key stays"
        )
        let huge = #expect(throws: StateStoreError.self) {
            try store.set(String(repeating: "x", count: 16 << 20), forKey: "text")
        }
        #expect(huge?.code == .tooLarge)
        #expect(
            huge?.description
                == "cannot store the key \"text\": its value takes more than 16 MiB written compactly, more than the "
                + "state file may hold (what its reader takes); store less under it. Nothing was stored, and what "
                + "was stored before under the key stays"
        )
        #expect(try store.value(Nested.self, forKey: "tree") == Nested(depth: 2), "what was stored stays")
        #expect(try store.value(String.self, forKey: "text") == nil)

        // The deepest value the reader takes is stored, written and read back.
        try store.set(Nested(depth: StateStore.maximumValueDepth), forKey: "tree")
        #expect(try store.checkpoint())
        let reopened = try StateStore(path: path)
        #expect(reopened.restored.movedAside == nil, "\(reopened.restored.problem ?? "")")
        #expect(try reopened.value(Nested.self, forKey: "tree") == Nested(depth: StateStore.maximumValueDepth))
    }

    /// A file under 16 MiB can be over it written back: a character the writer escapes (DEL,
    /// C1 controls) takes six bytes. Such a state could never be checkpointed, so every change
    /// after the start would be lost: it is moved aside at open, as a file over 16 MiB is,
    /// with its bytes intact and the reason.
    @Test func aFileOverTheLimitOnceWrittenBackIsMovedAsideAtOpen() throws {
        let path = temporaryDirectory() + "/state.json"
        let original = #"{"formatVersion":1,"text":""# + String(repeating: "\u{7F}", count: 3 << 20) + #""}"#
        writeFile(path, original)
        let store = try StateStore(path: path)
        #expect(store.restored.movedAside == path + ".corrupt-1")
        #expect(
            store.restored.problem
                == "written back it would take more than 16 MiB, the most the state file may hold (its strings hold "
                + "characters it writes escaped, as \\u007f, six bytes each), so no checkpoint could write it"
        )
        #expect(readFile(path + ".corrupt-1") == original)
        #expect(store.restored.keys == 0)

        // A file that fits written back is restored as it was, and checkpointed escaped.
        let text = String(repeating: "\u{7F}", count: 1000)
        writeFile(path, #"{"formatVersion":1,"text":""# + text + #""}"#)
        let restored = try StateStore(path: path)
        #expect(restored.restored.movedAside == nil)
        #expect(try restored.checkpoint(force: true))
        #expect(readFile(path)?.contains(String(repeating: "\\u007f", count: 1000)) == true)
        #expect(try StateStore(path: path).value(String.self, forKey: "text") == text)
    }
}

import Configuration
import Testing
import VigilConfiguration
import VigilLifecycle
import VigilSwiftConfiguration
import VigilTesting

/// A daemon that reads its configuration through swift-configuration while Vigil owns the
/// reload: a rejected file leaves readers on the old snapshot and reaches no watcher; a
/// committed one reaches swift-configuration's watchers.
@Suite struct SwiftConfigurationListenerTests {
    static func listener(_ path: String) -> SwiftConfigurationListener {
        SwiftConfigurationListener(source: .file(path, required: true)) { snapshot in
            let port = try snapshot.requiredInt(forKey: "http.port")
            guard (1...65535).contains(port) else {
                throw InvalidValue(["http", "port"], "must be from 1 to 65535 (found \(port))")
            }
        }
    }

    @Test func aRejectedFileKeepsTheOldSnapshotAndACommittedOneReachesTheWatchers() async throws {
        let directory = temporaryDirectory()
        let path = directory + "/app.json"
        writeFile(path, #"{ "http": { "port": 8080 }, "greeting": "hello" /* comments are fine */ }"#)
        let configuration = Self.listener(path)
        let seen = AsyncRecorder<Int>()
        try await withRunningDaemon(listeners: [configuration]) { daemon in
            #expect(configuration.reader.int(forKey: "http.port") == 8080)
            #expect(configuration.reader.string(forKey: "greeting") == "hello")
            // A watcher, as a part of the daemon would hold one: every value it is handed.
            let watching = Task {
                try await configuration.reader.watchInt(forKey: "http.port", default: 0) { updates in
                    for try await port in updates {
                        seen.append(port)
                        if port == 9090 { return }
                    }
                }
            }
            try await seen.wait("the first value") { $0 == [8080] }

            // Rejected: out of range. The reload is rejected by the listener's prepare.
            writeFile(path, "{\n  \"http\": { \"port\": 70000 },\n  \"greeting\": \"bad\"\n}")
            daemon.group.requestReload()
            let records = try await daemon.observer.kinds.wait("the rejection") {
                $0.contains { if case .reloadRejected = $0 { true } else { false } }
            }
            let rejection = records.lazy.compactMap { record -> ReloadTransaction.Rejection? in
                if case .reloadRejected(let rejection, _, _) = record { rejection } else { nil }
            }.first
            #expect(rejection?.listener == "configuration")
            #expect(rejection?.reason == "\(path):2:21: http.port: must be from 1 to 65535 (found 70000)")
            #expect(configuration.reader.int(forKey: "http.port") == 8080, "readers keep the old snapshot")
            #expect(configuration.reader.string(forKey: "greeting") == "hello")

            // Committed: the watcher is handed the new value, readers read it.
            writeFile(path, #"{ "http": { "port": 9090 }, "greeting": "hi" }"#)
            daemon.group.requestReload()
            try await watching.value
            #expect(seen.values == [8080, 9090], "the rejected 70000 never reached the watcher")
            #expect(configuration.reader.string(forKey: "greeting") == "hi")
            try await daemon.observer.kinds.wait("the applied reload") {
                $0.contains { if case .reloadApplied = $0 { true } else { false } }
            }
            #expect(daemon.group.context.generation == 2)
        }
    }

    @Test func aFileThatDoesNotParseOrMissesARequiredKeyIsRejectedWithItsPosition() throws {
        let directory = temporaryDirectory()
        let path = directory + "/app.json"
        for (text, reason) in [
            (
                "{ \"http\": { \"port\": 80 ",
                "\(path):1:11: not valid JSON: the object opened here is never closed with }"
            ),
            (#"{ "greeting": "x" }"#, "\(path): "),
            (
                #"{ "http": { "port": [1, "a"] } }"#,
                "\(path):1:21: http.port: an array must hold strings, numbers or booleans, all of one kind"
            ),
            (#"{ "http": { "port": 1e999 } }"#, "\(path):1:21: http.port: the number is out of range"),
        ] {
            writeFile(path, text)
            let error = #expect(throws: ConfigurationError.self) { try Self.listener(path).load() }
            #expect(error?.description.hasPrefix(reason) == true, "\(String(describing: error)) for \(text)")
        }
    }

    @Test func valuesOfEveryKindAreReadable() throws {
        let directory = temporaryDirectory()
        let path = directory + "/app.json"
        writeFile(
            path,
            #"{ "http": { "port": 1, "ratio": 0.5, "tls": false, "hosts": ["a", "b"], "ports": [1, 2], "null": null } }"#
        )
        let listener = Self.listener(path)
        listener.provider.commit(try listener.load())
        let reader = listener.reader.scoped(to: "http")
        #expect(reader.double(forKey: "port") == 1, "a whole number reads as a double too")
        #expect(reader.double(forKey: "ratio") == 0.5)
        #expect(reader.bool(forKey: "tls") == false)
        #expect(reader.stringArray(forKey: "hosts") == ["a", "b"])
        #expect(reader.intArray(forKey: "ports") == [1, 2])
        #expect(reader.string(forKey: "null") == nil)
        #expect(reader.int(forKey: "missing", default: 7) == 7)
    }
}

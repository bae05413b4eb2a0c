import Glibc
import Testing
import VigilConfiguration
import VigilLifecycle
import VigilPOSIX
import VigilTesting

@Suite struct ConfigurationLoaderTests {
    private func load(_ text: String) throws(ConfigurationError) -> SampleConfiguration {
        try ConfigurationLoader<SampleConfiguration>().decode(Array(text.utf8), file: "/etc/sample.json")
    }

    @Test func commentsTrailingCommasAndDefaults() throws {
        let configuration = try load(
            """
            {
              // a comment
              "name": "svc", /* inline */
              "server": { "port": 9000, },
              "tags": ["a", "b",],
            }
            """
        )
        #expect(configuration.name == "svc")
        #expect(configuration.server.port == 9000)
        #expect(configuration.server.host == "localhost", "left out: the default")
        #expect(configuration.ratio == 0.5)
        #expect(configuration.tags == ["a", "b"])
        #expect(try load("{}") == SampleConfiguration.defaultConfiguration)
    }

    @Test(arguments: [
        ("", "/etc/sample.json:1:1: the file is empty; write {} to use every default, or remove the file"),
        (
            "  // only a comment\n",
            "/etc/sample.json:2:1: the file is empty; write {} to use every default, or remove the file"
        ),
        ("[1, 2]", "/etc/sample.json:1:1: the top level must be an object ({ … }), found an array"),
        ("\"text\"", "/etc/sample.json:1:1: the top level must be an object ({ … }), found the string \"text\""),
        (
            "{\n  \"name\": \"x\"\n  \"ratio\": 1\n}",
            "/etc/sample.json:3:3: not valid JSON: expected ',' or '}' after the value of \"name\", found '\"'"
        ),
        (
            "{\n  \"server\": {\n    \"port\": 1\n",
            "/etc/sample.json:2:13: not valid JSON: the object opened here is never closed with }"
        ),
        ("{ 'name': 1 }", "/etc/sample.json:1:3: not valid JSON: expected a key in double quotes or }, found '''"),
        (
            "{ \"name\": \"a\", \"name\": \"b\" }",
            "/etc/sample.json:1:16: not valid JSON: the key \"name\" appears twice in this object"
        ),
        ("{ /* open", "/etc/sample.json:1:3: not valid JSON: a /* comment is never closed with */"),
        ("{}\n}", "/etc/sample.json:2:1: not valid JSON: unexpected '}' after the end of the document"),
        (
            "{\n  \"nmae\": \"x\"\n}",
            "/etc/sample.json:2:3: nmae: unknown key \"nmae\" at the top level; did you mean \"name\"?"
        ),
        (
            "{ \"server\": { \"prot\": 1 } }",
            "/etc/sample.json:1:15: server.prot: unknown key \"prot\" in \"server\"; did you mean \"port\"?"
        ),
        (
            "{ \"zzzzzz\": 1 }",
            "/etc/sample.json:1:3: zzzzzz: unknown key \"zzzzzz\" at the top level; known keys: \"name\", \"ratio\", \"server\", \"tags\", \"verbose\""
        ),
        (
            "{ \"server\": { \"port\": \"80\" } }",
            "/etc/sample.json:1:23: server.port: expected a whole number, found the string \"80\""
        ),
        (
            "{ \"server\": { \"port\": 80.5 } }",
            "/etc/sample.json:1:23: server.port: expected a whole number, found the number 80.5"
        ),
        (
            "{ \"server\": { \"port\": 99999999999999999999 } }",
            "/etc/sample.json:1:23: server.port: 99999999999999999999 is out of range (-9223372036854775808 to 9223372036854775807)"
        ),
        ("{ \"server\": 3 }", "/etc/sample.json:1:13: server: expected an object, found the number 3"),
        (
            "{ \"verbose\": \"yes\" }",
            "/etc/sample.json:1:14: verbose: expected true or false, found the string \"yes\""
        ),
        ("{ \"tags\": [1] }", "/etc/sample.json:1:12: tags.0: expected a string, found the number 1"),
        (
            "{ \"server\": { \"port\": 0 } }",
            "/etc/sample.json:1:23: server.port: must be between 1 and 65535 (found 0)"
        ),
        ("{ \"ratio\": 2 }", "/etc/sample.json:1:12: ratio: must be between 0 and 1 (found 2.0)"),
        // null is a value of the wrong type, not an absent key: it ran silently on the default.
        ("{ \"ratio\": null }", "/etc/sample.json:1:12: ratio: expected a number, found null"),
        ("{ \"server\": null }", "/etc/sample.json:1:13: server: expected an object, found null"),
        (
            "{ \"server\": { \"host\": null } }",
            "/etc/sample.json:1:23: server.host: expected a string, found null"
        ),
    ])
    func badInputGetsAClearError(text: String, message: String) {
        #expect(throws: ConfigurationError.self) { try load(text) }
        do {
            _ = try load(text)
        } catch {
            #expect(error.description == message)
        }
    }

    /// A megabyte-long unknown key, at the top or inside an object, gives a short error: the key
    /// cut to 64 characters where it is the key path, quoted with its length where the reason
    /// names it. (Before, the error held the key twice: 2 MB from `check-config`, and a reload
    /// rejection that made status.json too large for `reload` and `status` to read.)
    @Test func aHugeUnknownKeyGivesAShortError() {
        let key = String(repeating: "k", count: 1_000_000)
        for (text, path) in [
            ("{ \"\(key)\": 1 }", String(repeating: "k", count: 64) + "…"),
            ("{ \"server\": { \"\(key)\": 1 } }", "server." + String(repeating: "k", count: 64) + "…"),
        ] {
            let error = #expect(throws: ConfigurationError.self) { try load(text) }
            #expect(error?.keyPath == path)
            #expect((error?.description.utf8.count ?? .max) < 400, "\(error?.description.utf8.count ?? 0) bytes")
            #expect(error?.reason.contains("\"… (1000000 bytes)") == true, "\(error?.reason.prefix(200) ?? "")")
        }
    }

    @Test func unreadableFilesSayWhy() throws {
        let error = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader<SampleConfiguration>().load(path: "/nonexistent/sample.json")
        }
        #expect(error?.description == "/nonexistent/sample.json: cannot read the file: No such file or directory")
        #expect(error?.cause == SystemError(path: "/nonexistent/sample.json", operation: "read", errno: ENOENT))
        let directory = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader<SampleConfiguration>().load(path: "/tmp")
        }
        #expect(directory?.description == "/tmp: cannot read the file: it is a directory, not a regular file")
        #expect(directory?.cause?.errno == EISDIR)
        let invalid = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader<SampleConfiguration>().decode(Array("{".utf8), file: "/etc/sample.json")
        }
        #expect(invalid != nil && invalid?.cause == nil, "a syntax error is no failed call")
    }
}

/// A `ServiceListener` hears the committed configuration, typed, without a second listener
/// (issue 23 item 2).
@Suite struct ServiceListenerConfigurationTests {
    @Test func thePartGetsEachCommittedConfigurationAndMayRefuseOne() async throws {
        let directory = temporaryDirectory("vigil-service-configuration")
        let path = directory + "/part.json"
        TextFile.write(path, #"{ "name": "one" }"#)
        let committed = AsyncRecorder<String>()
        let configuration = ConfigurationListener<SampleConfiguration>(source: .file(path, required: true))
        let part = ServiceListener(
            name: "part",
            configuration: SampleConfiguration.self,
            check: { proposed in
                proposed.name == "forbidden" ? .reject(reason: "name: this part cannot take \"forbidden\"") : .accept
            },
            onCommit: { configuration in committed.append(configuration.name) },
            run: { ready in
                // Runs until the stop hands it its deadline.
                ready()
                _ = try await ready.waitForStop()
            }
        )
        try await withRunningDaemon(listeners: [configuration, part]) { daemon in
            TextFile.write(path, #"{ "name": "two" }"#)
            daemon.group.requestReload()
            try await committed.wait { $0 == ["two"] }
            // Refused by the part: not committed, and the reason names the key.
            TextFile.write(path, #"{ "name": "forbidden" }"#)
            daemon.group.requestReload()
            try await daemon.notifier.notifications.wait { all in
                all.contains {
                    $0.map(\.description).joined().contains(
                        #"reload rejected: part: name: this part cannot take "forbidden""#
                    )
                }
            }
            // Rejected by the configuration listener: the part hears nothing either.
            TextFile.write(path, #"{ "name": 3 }"#)
            daemon.group.requestReload()
            TextFile.write(path, #"{ "name": "three" }"#)
            daemon.group.requestReload()
            try await committed.wait { $0.count == 2 }
            #expect(committed.values == ["two", "three"])
        }
    }
}

import Testing
import VigilConfiguration

/// A configuration with synthesized `Codable` and nothing else: what README's first snippet
/// shows. Without ``DefaultedConfiguration``, `{}` fails with "the required key … is missing".
private struct Greeter: DefaultedConfiguration {
    struct Server: Codable, Equatable {
        var host = "localhost"
        var port = 8080
    }
    var greeting = "hello"
    var interval = 5.0
    var server = Server()
    var tags: [String] = ["a", "b"]
    var nickname: String? = nil

    static let defaultConfiguration = Greeter()
    func validate() throws(InvalidValue) {
        guard interval > 0 else { throw InvalidValue(["interval"], "must be greater than 0 (found \(interval))") }
    }
}

/// Keys whose type is an enum with raw values (what a daemon's `Logger.Level` key is).
private struct Modes: DefaultedConfiguration {
    enum Mode: String, Codable, CaseIterable, CodingKeyRepresentable { case fast, careful }
    enum Port: Int, Codable, CaseIterable, CodingKeyRepresentable { case http = 80, https = 443 }
    /// A value whose own decoding fails with the standard library's words for a key.
    struct Picky: Codable, Equatable {
        init(from decoder: any Decoder) throws {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "Could not convert key to type Mode")
            )
        }
    }
    enum Hidden: String, Codable { case one }
    enum Renamed: String, Codable, CaseIterable {
        case fast, careful
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let value = Self(rawValue: text.lowercased()) else {
                throw DecodingError.dataCorruptedError(
                    in: container,
                    debugDescription: "\"\(text)\" was renamed \"careful\" in 2.0"
                )
            }
            self = value
        }
    }
    var mode = Mode.fast
    var port = Port.http
    var hidden = Hidden.one
    var renamed = Renamed.fast
    var weights: [Mode: Int] = [:]
    var ports: [Port: Bool] = [:]
    var picky: [Mode: Picky] = [:]
    static let defaultConfiguration = Modes()
    func validate() throws(InvalidValue) {}
}

/// The same type without the protocol: a synthesized `Decodable` makes every key required.
private struct RequiredGreeter: ValidatedConfiguration, Encodable {
    var greeting = "hello"
    static let defaultConfiguration = RequiredGreeter()
    func validate() throws(InvalidValue) {}
}

@Suite struct DefaultedConfigurationTests {
    private func load(_ text: String) throws(ConfigurationError) -> Greeter {
        try ConfigurationLoader<Greeter>().decode(Array(text.utf8), file: "/etc/greeter.json")
    }

    @Test func anEmptyObjectIsTheDefault() throws {
        #expect(try load("{}") == Greeter.defaultConfiguration)
    }

    @Test func keysLeftOutTakeTheirDefaultsAtAnyDepth() throws {
        let loaded = try load(#"{ "greeting": "hi", "server": { "port": 9000 }, "nickname": "g" }"#)
        #expect(loaded.greeting == "hi")
        #expect(loaded.interval == 5)
        #expect(loaded.server == Greeter.Server(host: "localhost", port: 9000))
        #expect(loaded.tags == ["a", "b"])
        #expect(loaded.nickname == "g")
        #expect(try load(#"{ "tags": ["c"] }"#).tags == ["c"], "an array replaces the default whole")
    }

    @Test func errorsStillNameTheFilesKeyLineAndColumn() {
        let unknown = #expect(throws: ConfigurationError.self) { try load("{\n  \"greting\": \"x\"\n}") }
        #expect(unknown?.description.hasPrefix("/etc/greeter.json:2:3: greting: unknown key") == true)
        let type = #expect(throws: ConfigurationError.self) { try load(#"{ "server": { "port": "x" } }"#) }
        #expect(
            type?.description.description
                == #"/etc/greeter.json:1:23: server.port: expected a whole number, found the string "x""#
        )
        let invalid = #expect(throws: ConfigurationError.self) { try load("{\n \"interval\": -1 }") }
        #expect(invalid?.description == "/etc/greeter.json:2:14: interval: must be greater than 0 (found -1.0)")
    }

    /// Before: the standard library's "Cannot initialize Mode from invalid String value FAST",
    /// which names no value the key takes (a helper's daemon with a `Logger.Level` key).
    @Test func anEnumKeyNamesTheValuesItTakes() {
        func error(_ text: String) -> String? {
            let error = #expect(throws: ConfigurationError.self) {
                try ConfigurationLoader<Modes>().decode(Array(text.utf8), file: "/etc/m.json")
            }
            return error?.description
        }
        #expect(
            error(#"{ "mode": "FAST" }"#)
                == #"/etc/m.json:1:11: mode: expected one of "fast", "careful", found the string "FAST""#
        )
        #expect(error(#"{ "port": 8080 }"#) == "/etc/m.json:1:11: port: expected one of 80, 443, found the number 8080")
        #expect(
            error(#"{ "mode": 1 }"#) == "/etc/m.json:1:11: mode: expected a string, found the number 1",
            "a value of the wrong kind keeps its own message"
        )
        // Without CaseIterable the values are not known; the value found is still shown cut.
        #expect(
            error(#"{ "hidden": "two" }"#)
                == #"/etc/m.json:1:13: hidden: expected a value of Hidden, found the string "two""#
        )
        let long = String(repeating: "x", count: 5000)
        #expect(error(#"{ "hidden": "\#(long)" }"#)?.count ?? .max < 200, "a hostile value is not echoed whole")
        // A daemon's own init(from:) keeps its own words (a helper's review: they were replaced).
        #expect(error(#"{ "renamed": "slow" }"#) == #"/etc/m.json:1:14: renamed: "slow" was renamed "careful" in 2.0"#)
        #expect(
            (try? ConfigurationLoader<Modes>().decode(Array(#"{ "mode": "careful", "port": 443 }"#.utf8), file: "m"))
                == Modes(mode: .careful, port: .https, hidden: .one, renamed: .fast)
        )
        // An enum as a dictionary's key: the key is named with what keys the object takes (it said
        // the standard library's "Could not convert key to type Mode").
        #expect(
            error(#"{ "weights": { "fast": 1, "FAST": 2 } }"#)
                == #"/etc/m.json:1:27: weights.FAST: expected a key that is one of "fast", "careful", found "FAST""#,
            "the position is the key's, as for an unknown key"
        )
        // An object's keys are strings: an Int enum's choices are quoted too.
        #expect(
            error(#"{ "ports": { "8080": true } }"#)
                == #"/etc/m.json:1:14: ports.8080: expected a key that is one of "80", "443", found "8080""#
        )
        // A quote in the key is escaped, so the message cannot be made to read otherwise.
        #expect(
            error(#"{ "weights": { "a\"b, found \"fast": 2 } }"#)?.hasSuffix(#"found "a\"b, found \"fast""#) == true
        )
        // A value's own init(from:) that says the standard library's words blames no valid key.
        #expect(
            error(#"{ "picky": { "fast": "x" } }"#)
                == #"/etc/m.json:1:22: picky.fast: Could not convert key to type Mode"#
        )
        #expect(
            (try? ConfigurationLoader<Modes>().decode(Array(#"{ "weights": { "careful": 3 } }"#.utf8), file: "m"))?
                .weights == [.careful: 3]
        )
    }

    @Test func withoutTheProtocolAKeyWithASwiftDefaultIsRequired() {
        let error = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader<RequiredGreeter>().decode(Array("{}".utf8), file: "/etc/r.json")
        }
        #expect(error?.description.contains("greeting") == true)
    }
}

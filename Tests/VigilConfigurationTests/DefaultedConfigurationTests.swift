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

    @Test func withoutTheProtocolAKeyWithASwiftDefaultIsRequired() {
        let error = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader<RequiredGreeter>().decode(Array("{}".utf8), file: "/etc/r.json")
        }
        #expect(error?.description.contains("greeting") == true)
    }
}

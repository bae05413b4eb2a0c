import VigilConfiguration

/// A small configuration type standing in for a daemon author's own, shared by the
/// configuration, command-line and listener tests.
package struct SampleConfiguration: ValidatedConfiguration {
    package struct Server: Decodable, Sendable, Equatable {
        package var port = 8080
        package var host = "localhost"
        package init() {}
        enum CodingKeys: String, CodingKey { case port, host }
        package init(from decoder: any Decoder) throws {
            let keys = try decoder.container(keyedBy: CodingKeys.self)
            port = try keys.decode(Int.self, forKey: .port, default: 8080)
            host = try keys.decode(String.self, forKey: .host, default: "localhost")
        }
    }

    package var name = "sample"
    package var ratio = 0.5
    package var verbose = false
    package var server = Server()
    package var tags: [String] = []

    package static let defaultConfiguration = SampleConfiguration()
    package init() {}
    enum CodingKeys: String, CodingKey { case name, ratio, verbose, server, tags }
    package init(from decoder: any Decoder) throws {
        let keys = try decoder.container(keyedBy: CodingKeys.self)
        name = try keys.decode(String.self, forKey: .name, default: "sample")
        ratio = try keys.decode(Double.self, forKey: .ratio, default: 0.5)
        verbose = try keys.decode(Bool.self, forKey: .verbose, default: false)
        server = try keys.decode(Server.self, forKey: .server, default: Server())
        tags = try keys.decode([String].self, forKey: .tags, default: [])
    }

    package func validate() throws(InvalidValue) {
        guard (1...65535).contains(server.port) else {
            throw InvalidValue(["server", "port"], "must be between 1 and 65535 (found \(server.port))")
        }
        guard ratio >= 0 && ratio <= 1 else {
            throw InvalidValue(["ratio"], "must be between 0 and 1 (found \(ratio))")
        }
    }
}

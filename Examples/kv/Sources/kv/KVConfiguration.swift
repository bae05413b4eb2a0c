import Vigil

/// kv's configuration (`$CONFIGURATION_DIRECTORY/kv.json`, or `--config FILE`); every key is
/// optional.
///
/// ```
/// { "maxValueBytes": 65536, "maxConnections": 64, "idleTimeout": 300, "tcpPort": 0 }
/// ```
///
/// | key | default | allowed | reload |
/// | --- | --- | --- | --- |
/// | `maxValueBytes` | 65536 | 1 … 1048576: the longest value a `SET` may store | applies to the next request |
/// | `maxConnections` | 64 | 1 … 10000: connections served at once (Unix and TCP together) | applies to the next connection |
/// | `idleTimeout` | 300 | 1 … 86400 seconds: a connection that sends no complete request for that long is closed (`ERR idle`), so idle clients cannot hold every place of `maxConnections` | applies to the next request |
/// | `tcpPort` | 0 | 0 (no TCP) or 1 … 65535: also listen on 127.0.0.1 at this port (clients send `AUTH` and the credential `kv-token` first) | rejected: needs a restart |
struct KVConfiguration: ValidatedConfiguration {
    var maxValueBytes = 65536
    var maxConnections = 64
    var idleTimeout = 300
    var tcpPort = 0

    static let defaultConfiguration = KVConfiguration()

    init() {}

    enum CodingKeys: String, CodingKey { case maxValueBytes, maxConnections, idleTimeout, tcpPort }

    init(from decoder: any Decoder) throws {
        let keys = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = Self.defaultConfiguration
        maxValueBytes = try keys.decode(Int.self, forKey: .maxValueBytes, default: defaults.maxValueBytes)
        maxConnections = try keys.decode(Int.self, forKey: .maxConnections, default: defaults.maxConnections)
        idleTimeout = try keys.decode(Int.self, forKey: .idleTimeout, default: defaults.idleTimeout)
        tcpPort = try keys.decode(Int.self, forKey: .tcpPort, default: defaults.tcpPort)
    }

    func validate() throws(InvalidValue) {
        guard (1...1_048_576).contains(maxValueBytes) else {
            throw InvalidValue(["maxValueBytes"], "must be 1 to 1048576 bytes (found \(maxValueBytes))")
        }
        guard (1...10_000).contains(maxConnections) else {
            throw InvalidValue(["maxConnections"], "must be 1 to 10000 (found \(maxConnections))")
        }
        guard (1...86_400).contains(idleTimeout) else {
            throw InvalidValue(["idleTimeout"], "must be 1 to 86400 seconds (found \(idleTimeout))")
        }
        guard (0...65_535).contains(tcpPort) else {
            throw InvalidValue(["tcpPort"], "must be 0 (no TCP) or a port from 1 to 65535 (found \(tcpPort))")
        }
    }
}

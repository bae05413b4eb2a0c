import Logging
import Vigil

/// vigild's configuration. Every key is optional; these are the defaults:
///
/// ```
/// {
///   "logLevel": "info",
///   "heartbeat": { "interval": 5, "message": "alive" },
///   "persistence": { "checkpointInterval": 30 }
/// }
/// ```
struct VigildConfiguration: ValidatedConfiguration {
    struct Heartbeat: Decodable, Sendable, Equatable {
        /// Seconds between heartbeats, > 0.
        var interval: Double = 5
        /// What each heartbeat logs.
        var message: String = "alive"

        init() {}

        enum CodingKeys: String, CodingKey { case interval, message }

        init(from decoder: any Decoder) throws {
            let keys = try decoder.container(keyedBy: CodingKeys.self)
            let defaults = Heartbeat()
            interval = try keys.decode(Double.self, forKey: .interval, default: defaults.interval)
            message = try keys.decode(String.self, forKey: .message, default: defaults.message)
        }
    }

    struct Persistence: Decodable, Sendable, Equatable {
        /// Seconds between periodic checkpoints, >= 0; 0 = only on SIGUSR1 and stop.
        var checkpointInterval: Double = 30

        init() {}

        enum CodingKeys: String, CodingKey { case checkpointInterval }

        init(from decoder: any Decoder) throws {
            let keys = try decoder.container(keyedBy: CodingKeys.self)
            checkpointInterval = try keys.decode(Double.self, forKey: .checkpointInterval, default: 30)
        }
    }

    var logLevel = "info"
    var heartbeat = Heartbeat()
    var persistence = Persistence()

    static let defaultConfiguration = VigildConfiguration()

    init() {}

    enum CodingKeys: String, CodingKey { case logLevel, heartbeat, persistence }

    init(from decoder: any Decoder) throws {
        let keys = try decoder.container(keyedBy: CodingKeys.self)
        logLevel = try keys.decode(String.self, forKey: .logLevel, default: "info")
        heartbeat = try keys.decode(Heartbeat.self, forKey: .heartbeat, default: Heartbeat())
        persistence = try keys.decode(Persistence.self, forKey: .persistence, default: Persistence())
    }

    static let levels = Logger.Level.allCases.map(\.rawValue)

    /// The level `logLevel` names.
    var level: Logger.Level { Logger.Level(rawValue: logLevel) ?? .info }

    func validate() throws(InvalidValue) {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw InvalidValue(
                ["logLevel"],
                "must be one of \(Self.levels.joined(separator: ", ")) (found \"\(logLevel)\")"
            )
        }
        guard heartbeat.interval.isFinite, heartbeat.interval > 0 else {
            throw InvalidValue(
                ["heartbeat", "interval"],
                "must be a number of seconds greater than 0 (found \(heartbeat.interval))"
            )
        }
        guard heartbeat.interval <= 86_400 else {
            throw InvalidValue(
                ["heartbeat", "interval"],
                "must be at most 86400 seconds (found \(heartbeat.interval))"
            )
        }
        guard !heartbeat.message.isEmpty else {
            throw InvalidValue(["heartbeat", "message"], "must not be empty")
        }
        guard persistence.checkpointInterval.isFinite, persistence.checkpointInterval >= 0 else {
            throw InvalidValue(
                ["persistence", "checkpointInterval"],
                "must be a number of seconds, 0 or more (found \(persistence.checkpointInterval))"
            )
        }
    }
}

extension Duration {
    /// A duration from fractional seconds, to the microsecond.
    static func seconds(fractional value: Double) -> Duration {
        .microseconds(Int64((value * 1_000_000).rounded()))
    }
}

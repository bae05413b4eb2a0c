import Logging
import Vigil

/// vigild's configuration (in a module of its own so that the benchmarks decode the same type).
/// Every key is optional; these are the defaults:
///
/// ```
/// {
///   "logLevel": "info",
///   "heartbeat": { "interval": 5, "message": "alive" },
///   "persistence": { "checkpointInterval": 30 }
/// }
/// ```
package struct VigildConfiguration: ValidatedConfiguration {
    package struct Heartbeat: Decodable, Sendable, Equatable {
        /// Seconds between heartbeats; 0 turns the heartbeat off.
        package var interval: Double = 5
        /// What each heartbeat logs.
        package var message: String = "alive"

        package init() {}

        enum CodingKeys: String, CodingKey { case interval, message }

        package init(from decoder: any Decoder) throws {
            let keys = try decoder.container(keyedBy: CodingKeys.self)
            let defaults = Heartbeat()
            interval = try keys.decode(Double.self, forKey: .interval, default: defaults.interval)
            message = try keys.decode(String.self, forKey: .message, default: defaults.message)
        }
    }

    package struct Persistence: Decodable, Sendable, Equatable {
        /// Seconds between periodic checkpoints, >= 0; 0 = only on SIGUSR1 and stop.
        package var checkpointInterval: Double = 30

        package init() {}

        enum CodingKeys: String, CodingKey { case checkpointInterval }

        package init(from decoder: any Decoder) throws {
            let keys = try decoder.container(keyedBy: CodingKeys.self)
            checkpointInterval = try keys.decode(Double.self, forKey: .checkpointInterval, default: 30)
        }
    }

    package var logLevel = "info"
    package var heartbeat = Heartbeat()
    package var persistence = Persistence()

    package static let defaultConfiguration = VigildConfiguration()

    package init() {}

    enum CodingKeys: String, CodingKey { case logLevel, heartbeat, persistence }

    package init(from decoder: any Decoder) throws {
        let keys = try decoder.container(keyedBy: CodingKeys.self)
        logLevel = try keys.decode(String.self, forKey: .logLevel, default: "info")
        heartbeat = try keys.decode(Heartbeat.self, forKey: .heartbeat, default: Heartbeat())
        persistence = try keys.decode(Persistence.self, forKey: .persistence, default: Persistence())
    }

    package static let levels = Logger.Level.allCases.map(\.rawValue)

    /// The level `logLevel` names.
    package var level: Logger.Level { Logger.Level(rawValue: logLevel) ?? .info }

    package func validate() throws(InvalidValue) {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw InvalidValue(
                ["logLevel"],
                "must be one of \(Self.levels.joined(separator: ", ")) (found \"\(logLevel)\")"
            )
        }
        guard heartbeat.interval.isFinite, heartbeat.interval >= 0 else {
            throw InvalidValue(
                ["heartbeat", "interval"],
                "must be a number of seconds, 0 (no heartbeat) or more (found \(heartbeat.interval))"
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
    package static func seconds(fractional value: Double) -> Duration {
        .microseconds(Int64((value * 1_000_000).rounded()))
    }
}

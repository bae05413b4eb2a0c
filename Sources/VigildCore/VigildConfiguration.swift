import Logging
import Vigil

/// vigild's configuration (in a module of its own so that the fuzz targets decode the same type).
/// Every key is optional; these are the defaults:
///
/// ```
/// {
///   "logLevel": "info",
///   "heartbeat": { "interval": 5, "message": "alive" },
///   "persistence": { "checkpointInterval": 30 }
/// }
/// ```
///
/// The ranges ``validate()`` enforces (an error names the key, the range and the value found,
/// escaped and cut short):
///
/// | key | allowed |
/// | --- | --- |
/// | `logLevel` | one of `trace`, `debug`, `info`, `notice`, `warning`, `error`, `critical` |
/// | `heartbeat.interval` | `0` (no heartbeat) or 0.1 … 86400 seconds |
/// | `heartbeat.message` | 1 … 1024 bytes of UTF-8, no control characters, at least one visible character |
/// | `persistence.checkpointInterval` | `0` (only on `SIGUSR1` and at stop) or 0.1 … 86400 seconds |
///
/// NaN, infinities, negative numbers, `-0` and values between 0 and 0.1 (`1e-9`, say) are
/// rejected rather than rounded: a tiny interval would spin a CPU (or an fsync loop), and
/// silently turning a feature off is worse than an error.
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
        /// Seconds between periodic checkpoints: 0 = only on SIGUSR1 and at stop, else 0.1 to 86400.
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

    /// The smallest interval other than 0, in seconds.
    package static let minimumInterval = 0.1
    /// The largest interval, in seconds: one day.
    package static let maximumInterval = 86_400.0
    /// The longest heartbeat message, in bytes of UTF-8.
    package static let maximumMessageBytes = 1024

    package func validate() throws(InvalidValue) {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw InvalidValue(
                ["logLevel"],
                "must be one of \(Self.levels.joined(separator: ", ")) (found \(DisplayText.quoted(logLevel)))"
            )
        }
        try Self.checkInterval(heartbeat.interval, ["heartbeat", "interval"], zeroMeans: "no heartbeat")
        let bytes = heartbeat.message.utf8.count
        guard (1...Self.maximumMessageBytes).contains(bytes) else {
            throw InvalidValue(
                ["heartbeat", "message"],
                "must be 1 to \(Self.maximumMessageBytes) bytes of UTF-8 (found \(bytes) bytes: "
                    + "\(DisplayText.quoted(heartbeat.message)))"
            )
        }
        guard !heartbeat.message.unicodeScalars.contains(where: DisplayText.isControl) else {
            throw InvalidValue(
                ["heartbeat", "message"],
                "must not contain control characters such as line breaks, tabs or escapes, "
                    + "nor bidirectional overrides (U+202A–U+202E, U+2066–U+2069) "
                    + "(found \(DisplayText.quoted(heartbeat.message)))"
            )
        }
        // Spaces and invisible format characters alone (U+200B, U+FEFF, the direction marks)
        // would log a heartbeat that shows nothing.
        guard
            heartbeat.message.unicodeScalars.contains(where: {
                !$0.properties.isWhitespace && $0.properties.generalCategory != .format
            })
        else {
            throw InvalidValue(
                ["heartbeat", "message"],
                "must hold a visible character, not only spaces or invisible characters such as U+200B "
                    + "(found \(DisplayText.quoted(heartbeat.message)))"
            )
        }
        try Self.checkInterval(
            persistence.checkpointInterval,
            ["persistence", "checkpointInterval"],
            zeroMeans: "checkpoints only on SIGUSR1 and at stop"
        )
    }

    /// An interval is exactly 0 or within ``minimumInterval`` … ``maximumInterval``.
    private static func checkInterval(_ value: Double, _ keyPath: [String], zeroMeans: String) throws(InvalidValue) {
        if value == 0 && value.sign == .plus { return }
        guard value >= minimumInterval && value <= maximumInterval else {
            let found = value == 0 ? "-0, which is not 0" : value.isNaN ? "not a number" : "\(value)"
            throw InvalidValue(
                keyPath,
                "must be 0 (\(zeroMeans)) or a number of seconds from 0.1 to 86400 (found \(found))"
            )
        }
    }
}

extension Duration {
    /// A duration from fractional seconds, to the microsecond. Never traps: NaN gives zero, and
    /// a value beyond what `Int64` microseconds hold (about 292,000 years) saturates.
    package static func seconds(fractional value: Double) -> Duration {
        let micros = (value * 1_000_000).rounded()
        if let exact = Int64(exactly: micros) { return .microseconds(exact) }
        if micros.isNaN { return .zero }
        return .microseconds(micros < 0 ? Int64.min : Int64.max)
    }
}

import Vigil
import VigildCore

/// vigild: the command line and control protocol are the library's (``DaemonCommandLine``);
/// what is vigild's own is its configuration, its listeners and two keys in its status file.
enum Vigild {
    static let version = "0.1.0"

    static let commandLine = DaemonCommandLine(
        name: "vigild",
        version: version,
        abstract: "The Vigil reference daemon: a heartbeat worker with configuration, persistence and logging.",
        configuration: VigildConfiguration.self,
        stateContents: "state.json, the heartbeat count",
        // `vigild systemd-unit` prints systemd/vigild.service from this (a test keeps them equal).
        unit: SystemdUnit(
            description: "Vigil reference daemon",
            documentation: ["file:/usr/share/doc/vigild/README.md"],
            watchdog: .seconds(30)
        ),
        statusLines: { status in
            guard let own = try? status.decode(StatusKeys.self) else {
                return [("heartbeats", "unknown (not started yet, or the status file has no readable heartbeat keys)")]
            }
            // `interval` 0 is no heartbeat: "every 0.0 s" said what is not (an attacker's note).
            let schedule =
                own.heartbeat.interval == 0
                ? "off" : "every \(own.heartbeat.interval) s: \"\(own.heartbeat.message)\""
            return [("heartbeats", "\(own.heartbeats) (\(schedule))")]
        }
    )

    /// vigild's keys in status.json (under `daemon`, and at the top level of `status --json`),
    /// from its heartbeat worker's start on.
    struct StatusKeys: Codable, Sendable {
        struct Heartbeat: Codable, Sendable {
            var interval: Double
            var message: String
        }

        var heartbeats: Int
        var heartbeat: Heartbeat
    }

    /// The daemon `vigild run` runs.
    @Sendable static func daemon(_ options: DaemonOptions) -> Daemon {
        let values = ValueStore()
        let configuration = ConfigurationListener<VigildConfiguration>(source: options.configurationSource)
        let persistence = PersistenceListener<VigildConfiguration>(
            path: options.stateFile,
            checkpointInterval: { .seconds(fractional: $0.persistence.checkpointInterval) }
        )
        let logLevel = LoggingListener<VigildConfiguration>(logging: options.logging) { $0.level }
        let heartbeat = HeartbeatWorker()
        options.status.addKeys { () -> StatusKeys? in
            // None while starting: a count of 0 and the default interval would be guesses.
            guard heartbeat.hasStarted, let settings = values[CurrentConfiguration<VigildConfiguration>.self]?.heartbeat
            else { return nil }
            return StatusKeys(
                heartbeats: heartbeat.count,
                heartbeat: .init(interval: settings.interval, message: settings.message)
            )
        }
        heartbeat.onBeat { options.status.update() }
        return Daemon(
            identifier: options.name,
            version: options.version,
            // Failpoints first: a slow reload is slow before the configuration can reject it.
            listeners: Failpoints.fromEnvironment().listeners + [configuration, logLevel, persistence, heartbeat],
            values: values,
            logging: options.logging
        )
    }
}

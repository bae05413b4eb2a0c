import ArgumentParser
import Logging
import Vigil
import VigildCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

struct Vigild: AsyncParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "vigild",
        abstract: "The Vigil reference daemon: a heartbeat worker with configuration, persistence and logging.",
        discussion: """
            Runs in the foreground, under systemd or in a terminal; it never forks into the background.

            Examples:
              vigild                                  run with the embedded default configuration
              vigild run --config /etc/vigild/vigild.json
              vigild check-config /etc/vigild/vigild.json
              vigild reload                           reload the running daemon and wait for the outcome
              vigild status --json
            """,
        version: version,
        subcommands: [Run.self, CheckConfig.self, Reload.self, Status.self],
        defaultSubcommand: Run.self
    )
}

/// Where files go when systemd does not say.
enum Directories {
    static func environment(_ name: String) -> String? {
        guard let value = getenv(name).map({ String(cString: $0) }), !value.isEmpty else { return nil }
        // systemd may list several directories separated by colons: the first is ours.
        return String(value.split(separator: ":").first ?? Substring(value))
    }

    static var home: String { environment("HOME") ?? "/tmp" }

    static func configurationSource(_ explicit: String?) -> ConfigurationSource {
        if let explicit { return .file(explicit, required: true) }
        if let directory = environment("CONFIGURATION_DIRECTORY") {
            return .file(directory + "/vigild.json", required: false)
        }
        return .embeddedDefault
    }

    static func state(_ explicit: String?) -> String {
        explicit ?? environment("STATE_DIRECTORY") ?? (environment("XDG_STATE_HOME") ?? home + "/.local/state")
            + "/vigild"
    }

    static func runtime(_ explicit: String?) -> String {
        explicit ?? environment("RUNTIME_DIRECTORY") ?? environment("XDG_RUNTIME_DIR").map { $0 + "/vigild" }
            ?? "/tmp/vigild-\(getuid())"
    }

    /// For `reload` and `status`: the explicit or systemd-given directory, else the per-user
    /// one, else the unit's `/run/vigild`, whichever holds a status file.
    static func runtimeForClient(_ explicit: String?) -> String {
        if let explicit { return explicit }
        let candidates = [runtime(nil), "/run/vigild"]
        return candidates.first { FileSystem.exists(RuntimeStatus.path(in: $0)) } ?? candidates[0]
    }
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the daemon in the foreground (the default command)."
    )

    @Option(help: "The configuration file (default: $CONFIGURATION_DIRECTORY/vigild.json, else the embedded default).")
    var config: String?

    @Option(help: "Where state.json lives (default: $STATE_DIRECTORY, else ~/.local/state/vigild).")
    var stateDirectory: String?

    @Option(help: "Where status.json lives (default: $RUNTIME_DIRECTORY, else $XDG_RUNTIME_DIR/vigild).")
    var runtimeDirectory: String?

    @Option(help: "The signal that reloads, as systemd's ReloadSignal= names it (SIGHUP, SIGRTMIN+3, …).")
    var reloadSignal = "SIGHUP"

    func validate() throws {
        guard ProcessSignal(name: reloadSignal) != nil else {
            throw ValidationError("--reload-signal: '\(reloadSignal)' is not a signal name (try SIGHUP or SIGRTMIN+3)")
        }
    }

    func run() async throws {
        let logging = Daemon.bootstrapLogging(identifier: "vigild")
        let runtimeDirectory = Directories.runtime(runtimeDirectory)
        let values = ValueStore()

        let configuration = ConfigurationListener<VigildConfiguration>(source: Directories.configurationSource(config))
        let persistence = PersistenceListener<VigildConfiguration>(
            path: Directories.state(stateDirectory) + "/state.json",
            checkpointInterval: { .seconds(fractional: $0.persistence.checkpointInterval) }
        )
        let logLevel = LoggingListener<VigildConfiguration>(control: logging.levelControl) { $0.level }
        let heartbeat = HeartbeatWorker()
        let status = RuntimeStatusWriter(
            directory: runtimeDirectory,
            heartbeat: heartbeat,
            persistence: persistence,
            values: values
        )
        heartbeat.onBeat { status.heartbeatCounted() }

        var daemon = Daemon(
            identifier: "vigild",
            version: Vigild.version,
            listeners: [configuration, logLevel, persistence, heartbeat] + Failpoints.fromEnvironment().listeners,
            startupCommands: [
                StartupStep("create \(runtimeDirectory)") { _ in try FileSystem.makeDirectories(runtimeDirectory) }
            ],
            values: values,
            logging: logging
        )
        daemon.observers = [status]
        daemon.signals.reloadSignal = ProcessSignal(name: reloadSignal)
        let exitStatus = await daemon.run()
        if exitStatus != 0 { throw ExitCode(exitStatus) }
    }
}

struct CheckConfig: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate a configuration file, like nginx -t: exit 0 when valid, 1 with the error on stderr.",
        discussion: """
            Examples:
              vigild check-config /etc/vigild/vigild.json
              vigild check-config          checks $CONFIGURATION_DIRECTORY/vigild.json
            """
    )

    @Argument(help: "The file to check (default: $CONFIGURATION_DIRECTORY/vigild.json).")
    var file: String?

    func run() throws {
        let source = Directories.configurationSource(file)
        guard case .file(let path, _) = source else {
            print("No file given and $CONFIGURATION_DIRECTORY is not set: vigild would run with its embedded default.")
            return
        }
        do {
            _ = try ConfigurationLoader<VigildConfiguration>().load(path: path)
            print("\(path): configuration is valid")
        } catch {
            FileHandleStderr.write("vigild: \(error)\n")
            throw ExitCode(1)
        }
    }
}

struct Reload: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Reload the running daemon and wait for the outcome (what ExecReload= runs).",
        discussion: """
            Exit status: 0 when the new configuration was applied, 1 when it was rejected (the reason
            on stderr), 2 when there is no daemon or no answer in time.

            Examples:
              vigild reload
              vigild reload --pid $MAINPID
            """
    )

    @Option(help: "The daemon's pid (default: from the runtime directory's status.json).")
    var pid: Int32?

    @Option(
        help:
            "Where the daemon's status.json is (default: $RUNTIME_DIRECTORY, else the per-user directory, else /run/vigild)."
    )
    var runtimeDirectory: String?

    @Option(help: "Seconds to wait for the outcome.")
    var timeout: Double = 90

    @Option(help: "The signal to send: the daemon's --reload-signal.")
    var signal = "SIGHUP"

    func validate() throws {
        guard ProcessSignal(name: signal) != nil else {
            throw ValidationError("--signal: '\(signal)' is not a signal name (try SIGHUP or SIGRTMIN+3)")
        }
    }

    func run() throws {
        let directory = Directories.runtimeForClient(runtimeDirectory)
        let target: Int32
        if let pid {
            target = pid
        } else if let status = try? RuntimeStatus.read(from: directory) {
            target = status.pid
        } else {
            FileHandleStderr.write("vigild reload: no running vigild found (no \(RuntimeStatus.path(in: directory)))\n")
            throw ExitCode(2)
        }
        let sent = MonotonicClock.microseconds()
        guard kill(target, ProcessSignal(name: signal)!.rawValue) == 0 else {
            FileHandleStderr.write("vigild reload: cannot signal pid \(target): \(String(cString: strerror(errno)))\n")
            throw ExitCode(2)
        }
        let deadline = sent + UInt64(timeout * 1_000_000)
        while MonotonicClock.microseconds() < deadline {
            // The daemon answers through its status file; poll it every 5 ms.
            if let status = try? RuntimeStatus.read(from: directory), status.pid == target,
                let reload = status.lastReload, reload.beganMonotonicUsec >= sent
            {
                if reload.result == "applied" {
                    print("vigild: reload applied; configuration generation \(status.generation) is in force")
                    return
                }
                FileHandleStderr.write(
                    "vigild: reload rejected: \(reload.reason ?? "unknown reason"); still running generation \(status.generation)\n"
                )
                throw ExitCode(1)
            }
            if kill(target, 0) != 0 && errno == ESRCH {
                FileHandleStderr.write("vigild reload: pid \(target) exited before answering\n")
                throw ExitCode(2)
            }
            usleep(5_000)
        }
        FileHandleStderr.write("vigild reload: no answer from pid \(target) within \(timeout) s\n")
        throw ExitCode(2)
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the running daemon's status.",
        discussion: """
            Examples:
              vigild status
              vigild status --json | jq .heartbeats
            """
    )

    @Option(
        help:
            "Where the daemon's status.json is (default: $RUNTIME_DIRECTORY, else the per-user directory, else /run/vigild)."
    )
    var runtimeDirectory: String?

    @Flag(help: "Print JSON.")
    var json = false

    func run() throws {
        let directory = Directories.runtimeForClient(runtimeDirectory)
        let status: RuntimeStatus
        do {
            status = try RuntimeStatus.read(from: directory)
        } catch {
            FileHandleStderr.write("vigild status: no running vigild found (\(error))\n")
            throw ExitCode(2)
        }
        if json {
            print(try status.json(), terminator: "")
            return
        }
        let reload = status.lastReload.map { "\($0.result)" + ($0.reason.map { ": \($0)" } ?? "") } ?? "none"
        print(
            """
            vigild pid \(status.pid): \(status.state), configuration generation \(status.generation)
              last reload:    \(reload)
              heartbeats:     \(status.heartbeats) (every \(status.heartbeat.interval) s: "\(status.heartbeat.message)")
              uptime:         \(status.uptimeSeconds) s
              previous stop:  \(status.previousShutdownClean ? "clean" : "UNCLEAN (crash, kill -9 or power loss)")
            """
        )
    }
}

enum FileHandleStderr {
    static func write(_ text: String) {
        var text = text
        text.withUTF8 { bytes in _ = Glibc.write(2, bytes.baseAddress, bytes.count) }
    }
}

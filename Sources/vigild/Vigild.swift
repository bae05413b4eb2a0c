import ArgumentParser
import Logging
import Synchronization
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

    /// A runtime directory and whether it is the last resort in `/tmp`, which must be the
    /// caller's own with mode 0700 (see ``TrustedDirectory``).
    struct Runtime: Equatable {
        var path: String
        var privateToCaller = false
    }

    /// The explicit directory, else `$RUNTIME_DIRECTORY` (systemd's `RuntimeDirectory=`), else
    /// `/run/vigild` for root, `$XDG_RUNTIME_DIR/vigild` for others, and only as a last resort
    /// `/tmp/vigild-<uid>` — a directory the caller owns with mode 0700.
    static func runtime(_ explicit: String?) -> Runtime {
        if let explicit { return Runtime(path: explicit) }
        if let directory = environment("RUNTIME_DIRECTORY") { return Runtime(path: directory) }
        if geteuid() == 0 { return Runtime(path: "/run/vigild") }
        if let directory = environment("XDG_RUNTIME_DIR") { return Runtime(path: directory + "/vigild") }
        return Runtime(path: "/tmp/vigild-\(geteuid())", privateToCaller: true)
    }

    /// For `reload` and `status`: the explicit or systemd-given directory; else the caller's
    /// default (``runtime(_:)``), then the unit's `/run/vigild`: the first that is trusted and
    /// holds a status file that reads. Never a directory that fails ``TrustedDirectory``'s rule.
    ///
    /// - Throws: ``ClientError`` naming each directory tried and why it was not used.
    static func runtimeForClient(_ explicit: String?) throws(ClientError) -> (TrustedDirectory, RuntimeStatus) {
        let first = runtime(explicit)
        var candidates = [first]
        if explicit == nil && environment("RUNTIME_DIRECTORY") == nil && first.path != "/run/vigild" {
            candidates.append(Runtime(path: "/run/vigild"))
        }
        var reasons: [String] = []
        for candidate in candidates {
            do {
                let directory = try TrustedDirectory.open(candidate.path, privateToCaller: candidate.privateToCaller)
                return (directory, try RuntimeStatus.read(from: directory))
            } catch let error as TrustedDirectoryError where error.errno == ENOENT {
                reasons.append("no \(error.path)")
            } catch {
                reasons.append("\(error)")
            }
        }
        throw ClientError("no running vigild found (\(reasons.joined(separator: "; ")))")
    }
}

/// A client failure with the message to print; exit status 2 unless said otherwise.
struct ClientError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the daemon in the foreground (the default command)."
    )

    @Option(help: "The configuration file (default: $CONFIGURATION_DIRECTORY/vigild.json, else the embedded default).")
    var config: String?

    @Option(help: "Where state.json lives (default: $STATE_DIRECTORY, else ~/.local/state/vigild).")
    var stateDirectory: String?

    @Option(
        help:
            "Where status.json lives (default: $RUNTIME_DIRECTORY, else /run/vigild for root, $XDG_RUNTIME_DIR/vigild for others)."
    )
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
            heartbeat: heartbeat,
            persistence: persistence,
            values: values
        )
        heartbeat.onBeat { status.heartbeatCounted() }

        var daemon = Daemon(
            identifier: "vigild",
            version: Vigild.version,
            // Failpoints first: a slow reload is slow before the configuration can reject it.
            listeners: Failpoints.fromEnvironment().listeners + [configuration, logLevel, persistence, heartbeat],
            startupCommands: [
                StartupStep("create \(runtimeDirectory.path)") { _ in
                    status.use(
                        try TrustedDirectory.create(
                            runtimeDirectory.path,
                            privateToCaller: runtimeDirectory.privateToCaller
                        )
                    )
                }
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
            print("\(path.escapingControlCharacters): configuration is valid")
        } catch {
            Console.error("vigild: \(error)")
            throw ExitCode(1)
        }
    }
}

struct Reload: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Reload the running daemon and wait for the outcome (what ExecReload= runs).",
        discussion: """
            Signals only the daemon that the runtime directory's status.json describes, and only
            after proving that the process with that pid started when the daemon did.

            Exit status: 0 when the new configuration was applied (or the daemon is stopping: a
            stop supersedes the reload), 1 when it was rejected (the reason on stderr), 2 when
            there is no daemon, the pid is not the daemon's, or no answer came in time.

            Examples:
              vigild reload
              vigild reload --pid $MAINPID
            """
    )

    @Option(help: "The daemon's pid; must match the runtime directory's status.json (default: from status.json).")
    var pid: Int32?

    @Option(
        help:
            "Where the daemon's status.json is (default: $RUNTIME_DIRECTORY, else /run/vigild for root, $XDG_RUNTIME_DIR/vigild for others)."
    )
    var runtimeDirectory: String?

    @Option(help: "Seconds to wait for the outcome (more than 0, at most 86400).")
    var timeout: Double = 90

    @Option(help: "The signal to send: the daemon's --reload-signal.")
    var signal = "SIGHUP"

    static let maximumTimeout = 86_400.0

    func validate() throws {
        guard ProcessSignal(name: signal) != nil else {
            throw ValidationError("--signal: '\(signal)' is not a signal name (try SIGHUP or SIGRTMIN+3)")
        }
        guard timeout.isFinite, timeout > 0, timeout <= Self.maximumTimeout else {
            throw ValidationError(
                "--timeout: '\(timeout)' is not a number of seconds more than 0 and at most \(Int(Self.maximumTimeout))"
            )
        }
    }

    func run() throws {
        do {
            try reload()
        } catch let error as ClientError {
            Console.error("vigild reload: \(error)")
            throw ExitCode(2)
        }
    }

    private func reload() throws {
        if let pid, pid <= 1 {
            throw ClientError("refusing to signal pid \(pid): only a vigild's own pid (more than 1) can be reloaded")
        }
        let (directory, status) = try Directories.runtimeForClient(runtimeDirectory)
        let file = directory.path(of: RuntimeStatus.fileName)
        let target = try Self.verifiedDaemon(status, requested: pid, file: file)
        guard let signal = ProcessSignal(name: signal) else { return }  // validate() checked it
        let interruption = ClientInterruption()
        let sent = MonotonicClock.microseconds()
        guard kill(target, signal.rawValue) == 0 else {
            throw ClientError("cannot signal pid \(target): \(String(cString: strerror(errno)))")
        }
        // validate() bounds the timeout: the product fits in a UInt64.
        var deadline = sent + UInt64(timeout * 1_000_000)
        var interrupted: Int32?
        var rejected = false
        while MonotonicClock.microseconds() < deadline {
            if let signal = interruption.received { interrupted = signal }
            // The daemon answers through its status file; poll it every 5 ms.
            let current = try? RuntimeStatus.read(from: directory)
            if !rejected, let current, current.pid == target, let reload = current.lastReload,
                reload.beganMonotonicUsec >= sent
            {
                if reload.result == "applied" {
                    print("vigild: reload applied; configuration generation \(current.generation) is in force")
                    return
                }
                Console.error(
                    "vigild: reload rejected: \(reload.reason ?? "unknown reason"); still running generation \(current.generation)"
                )
                guard interrupted != nil else { throw ExitCode(1) }
                // Stopped while the rejected reload ran: wait briefly for the stop to show.
                rejected = true
                deadline = min(deadline, MonotonicClock.microseconds() + 5_000_000)
            }
            let gone = kill(target, 0) != 0 && errno == ESRCH
            if let interrupted, gone || current.map({ ["stopping", "stopped"].contains($0.state) }) == true {
                // `systemctl stop` during `systemctl reload`: systemd cancels the reload job and
                // sends SIGTERM to the whole unit, this client included. The stop supersedes the
                // reload; exiting 0 keeps a clean stop clean (killed by the signal, this client
                // makes systemd record Result=signal for the unit; exiting non-zero,
                // Result=exit-code — both checked under systemd 252).
                Console.error(
                    "vigild reload: \(ProcessSignal(rawValue: interrupted)) while pid \(target) is stopping: the stop supersedes the reload"
                )
                return
            }
            if gone { throw ClientError("pid \(target) exited before answering") }
            usleep(5_000)
        }
        if rejected { throw ExitCode(1) }
        if let interrupted { interruption.dieOf(interrupted) }
        throw ClientError("no answer from pid \(target) within \(timeout) s")
    }

    /// The pid to signal: the status file's, when the process with that pid started when the
    /// daemon that wrote the file did (and, with `--pid`, when that is the pid asked for).
    ///
    /// Under the shipped unit `ExecReload=` cannot read `/proc/$MAINPID`: with `PrivateUsers=`
    /// every process of the unit gets a user namespace of its own, and `ProtectProc=invisible`
    /// hides processes the reader could not ptrace. There systemd vouches instead: it sets
    /// `$MAINPID` for a unit's control processes only, so a hidden pid is accepted when it is
    /// `$MAINPID` (and the status file's pid).
    ///
    /// - Parameters:
    ///   - startTime: the start time of a pid, `nil` when `/proc` does not show it.
    ///   - mainPID: `$MAINPID`, as systemd sets it for `ExecReload=`.
    static func verifiedDaemon(
        _ status: RuntimeStatus,
        requested: Int32?,
        file: String,
        startTime: (Int32) -> UInt64? = ProcessStartTime.of,
        mainPID: String? = Directories.environment("MAINPID")
    ) throws(ClientError) -> Int32 {
        if let requested, requested != status.pid {
            throw ClientError(
                "refusing to signal pid \(requested): it is not the vigild that \(file) describes (pid \(status.pid))"
            )
        }
        let pid = status.pid
        guard pid > 1 else { throw ClientError("refusing to signal pid \(pid) named in \(file): not a daemon's pid") }
        guard let recorded = status.processStartTime else {
            throw ClientError(
                "\(file) does not record the daemon's start time (written by an older vigild): restart the daemon, then reload"
            )
        }
        guard let actual = startTime(pid) else {
            guard kill(pid, 0) == 0 || errno == EPERM else {
                throw ClientError("pid \(pid) named in \(file) is not running")
            }
            if mainPID == "\(pid)" { return pid }
            throw ClientError(
                "refusing to signal pid \(pid): /proc/\(pid) is hidden from this process, so its start time cannot be checked (run as root, or as ExecReload= with $MAINPID)"
            )
        }
        guard actual == recorded else {
            throw ClientError(
                "refusing to signal pid \(pid): it started at tick \(actual), but the vigild that \(file) describes started at tick \(recorded) (a different process now has that pid)"
            )
        }
        return pid
    }
}

/// SIGTERM and SIGINT while `vigild reload` waits: recorded by a handler instead of killing
/// the client, so it can tell a stop (the daemon is stopping too) from an admin giving up.
///
/// - Important: installs process-wide handlers for SIGTERM and SIGINT.
final class ClientInterruption: Sendable {
    private static let count = Atomic<Int>(0)
    private static let last = Atomic<Int32>(0)
    private let seen = Atomic<Int>(0)

    init() {
        for signal in [SIGTERM, SIGINT] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { signal in
                ClientInterruption.last.store(signal, ordering: .relaxed)
                ClientInterruption.count.add(1, ordering: .relaxed)
            }
            sigemptyset(&action.sa_mask)
            sigaction(signal, &action, nil)
            // main may have blocked the handled signals for the daemon; the client takes them.
            var set = sigset_t()
            sigemptyset(&set)
            sigaddset(&set, signal)
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
        }
    }

    /// The signal that arrived since the last call, if any; when a second one has arrived since
    /// the first (the admin insists), the process dies of it.
    var received: Int32? {
        let count = Self.count.load(ordering: .relaxed)
        let seen = self.seen.exchange(count, ordering: .relaxed)
        guard count > seen else { return nil }
        let signal = Self.last.load(ordering: .relaxed)
        if count >= 2 { dieOf(signal) }
        return signal
    }

    /// Ends the process as the signal would have without the handler.
    func dieOf(_ signal: Int32) -> Never {
        Glibc.signal(signal, SIG_DFL)
        raise(signal)
        exit(128 + signal)
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
            "Where the daemon's status.json is (default: $RUNTIME_DIRECTORY, else /run/vigild for root, $XDG_RUNTIME_DIR/vigild for others)."
    )
    var runtimeDirectory: String?

    @Flag(help: "Print JSON.")
    var json = false

    func run() throws {
        let status: RuntimeStatus
        do {
            (_, status) = try Directories.runtimeForClient(runtimeDirectory)
        } catch {
            Console.error("vigild status: \(error)")
            throw ExitCode(2)
        }
        if json {
            print(try status.json(), terminator: "")
            return
        }
        print(Self.text(status))
    }

    /// The human-readable status; everything that came from the file has its control characters
    /// escaped.
    static func text(_ status: RuntimeStatus) -> String {
        let reload = status.lastReload.map { "\($0.result)" + ($0.reason.map { ": \($0)" } ?? "") } ?? "none"
        let message = status.heartbeat.message.escapingControlCharacters
        return """
            vigild pid \(status.pid): \(status.state.escapingControlCharacters), configuration generation \(status.generation)
              last reload:    \(reload.escapingControlCharacters)
              heartbeats:     \(status.heartbeats) (every \(status.heartbeat.interval) s: "\(message)")
              uptime:         \(status.uptimeSeconds) s
              previous stop:  \(status.previousShutdownClean ? "clean" : "UNCLEAN (crash, kill -9 or power loss)")
            """
    }
}

/// Where the clients write diagnostics: stderr, one line per message, control characters
/// escaped (under systemd each stderr line is a journal entry and a `<N>` prefix sets its
/// priority, so a newline from a file must never reach it raw).
enum Console {
    static func error(_ message: String) {
        FileHandleStderr.write(message.escapingControlCharacters + "\n")
    }
}

enum FileHandleStderr {
    static func write(_ text: String) {
        var text = text
        text.withUTF8 { bytes in _ = Glibc.write(2, bytes.baseAddress, bytes.count) }
    }
}

import Synchronization
import VigilLifecycle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What the commands read from the process: environment variables and the effective uid.
/// Tests pass their own.
package struct CommandEnvironment: Sendable {
    package var variable: @Sendable (String) -> String?
    package var effectiveUID: uid_t

    package init(variable: @escaping @Sendable (String) -> String?, effectiveUID: uid_t) {
        self.variable = variable
        self.effectiveUID = effectiveUID
    }

    /// The process's environment and euid.
    package static var process: CommandEnvironment {
        CommandEnvironment(
            variable: { name in getenv(name).map { String(cString: $0) } },
            effectiveUID: geteuid()
        )
    }

    /// A variable that is set and not empty; when systemd lists several directories separated
    /// by colons, the first.
    package func directory(_ name: String) -> String? {
        guard let value = variable(name), !value.isEmpty else { return nil }
        return String(value.split(separator: ":").first ?? Substring(value))
    }
}

/// Where the commands write: stdout and stderr unless a test captures them.
package struct CommandOutput: Sendable {
    package var standardOutput: @Sendable (String) -> Void
    package var standardError: @Sendable (String) -> Void

    package init(
        standardOutput: @escaping @Sendable (String) -> Void,
        standardError: @escaping @Sendable (String) -> Void
    ) {
        self.standardOutput = standardOutput
        self.standardError = standardError
    }

    package static let process = CommandOutput(
        standardOutput: { writeAll(1, $0) },
        standardError: { writeAll(2, $0) }
    )

    /// A diagnostic on stderr: one line, control characters escaped (under systemd each stderr
    /// line is a journal entry and a `<N>` prefix sets its priority, so a newline from a file
    /// must never reach it raw).
    package func error(_ message: String) {
        standardError(DisplayText.escapingControlCharacters(message) + "\n")
    }

    package func print(_ text: String) { standardOutput(text + "\n") }

    private static func writeAll(_ descriptor: Int32, _ text: String) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
        }
    }
}

/// The directories a daemon named `name` uses when the command line does not say.
package struct DaemonDirectories: Sendable {
    package var name: String
    package var environment: CommandEnvironment

    package init(name: String, environment: CommandEnvironment) {
        self.name = name
        self.environment = environment
    }

    /// The explicit file, else `$CONFIGURATION_DIRECTORY/<name>.json` (optional), else the
    /// embedded default.
    package func configurationSource(_ explicit: String?) -> ConfigurationSource {
        if let explicit { return .file(explicit, required: true) }
        if let directory = environment.directory("CONFIGURATION_DIRECTORY") {
            return .file(directory + "/\(name).json", required: false)
        }
        return .embeddedDefault
    }

    /// The explicit directory, else `$STATE_DIRECTORY`, else `$XDG_STATE_HOME/<name>`, else
    /// `~/.local/state/<name>`.
    package func state(_ explicit: String?) -> String {
        if let explicit { return explicit }
        if let directory = environment.directory("STATE_DIRECTORY") { return directory }
        let home = environment.directory("HOME") ?? "/tmp"
        return (environment.directory("XDG_STATE_HOME") ?? home + "/.local/state") + "/" + name
    }

    /// A runtime directory and whether it is the last resort in `/tmp`, which must be the
    /// caller's own with mode 0700 (see ``TrustedDirectory``).
    package struct Runtime: Equatable, Sendable {
        package var path: String
        package var privateToCaller = false

        package init(path: String, privateToCaller: Bool = false) {
            self.path = path
            self.privateToCaller = privateToCaller
        }
    }

    /// The system-wide runtime directory: `/run/<name>`.
    package var systemRuntime: String { "/run/" + name }

    /// The explicit directory, else `$RUNTIME_DIRECTORY` (systemd's `RuntimeDirectory=`), else
    /// `/run/<name>` for root, `$XDG_RUNTIME_DIR/<name>` for others, and only as a last resort
    /// `/tmp/<name>-<uid>` — a directory the caller owns with mode 0700.
    package func runtime(_ explicit: String?) -> Runtime {
        if let explicit { return Runtime(path: explicit) }
        if let directory = environment.directory("RUNTIME_DIRECTORY") { return Runtime(path: directory) }
        if environment.effectiveUID == 0 { return Runtime(path: systemRuntime) }
        if let directory = environment.directory("XDG_RUNTIME_DIR") { return Runtime(path: directory + "/" + name) }
        return Runtime(path: "/tmp/\(name)-\(environment.effectiveUID)", privateToCaller: true)
    }

    /// For `reload` and `status`: the explicit or systemd-given directory; else the caller's
    /// default (``runtime(_:)``), then the unit's `/run/<name>`: the first that is trusted and
    /// holds a status file that reads. Never a directory that fails ``TrustedDirectory``'s rule.
    ///
    /// - Throws: ``ControlClientError`` naming each directory tried and why it was not used.
    package func runtimeForClient(_ explicit: String?) throws(ControlClientError) -> (TrustedDirectory, RuntimeStatus) {
        let first = runtime(explicit)
        var candidates = [first]
        if explicit == nil && environment.directory("RUNTIME_DIRECTORY") == nil && first.path != systemRuntime {
            candidates.append(Runtime(path: systemRuntime))
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
        throw ControlClientError("no running \(name) found (\(reasons.joined(separator: "; ")))")
    }
}

/// A client failure with the message to print; exit status 2.
package struct ControlClientError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// `<name> reload`: signal the daemon that the status file describes, then wait for the outcome.
package struct ReloadClient: Sendable {
    package var name: String
    package var directories: DaemonDirectories
    package var output: CommandOutput

    /// The largest `--timeout`, in seconds.
    package static let maximumTimeout = 86_400.0

    /// Runs the client; returns its exit status: 0 applied (or superseded by a stop), 1
    /// rejected, 2 no daemon, not the daemon, or no answer in time.
    package func run(pid: Int32?, runtimeDirectory: String?, timeout: Double, signal: ProcessSignal) -> Int32 {
        do {
            return try reload(pid: pid, runtimeDirectory: runtimeDirectory, timeout: timeout, signal: signal)
        } catch {
            output.error("\(name) reload: \(error)")
            return 2
        }
    }

    private func reload(
        pid: Int32?,
        runtimeDirectory: String?,
        timeout: Double,
        signal: ProcessSignal
    ) throws(ControlClientError) -> Int32 {
        if let pid, pid <= 1 {
            throw ControlClientError(
                "refusing to signal pid \(pid): only a \(name)'s own pid (more than 1) can be reloaded"
            )
        }
        let (directory, status) = try directories.runtimeForClient(runtimeDirectory)
        let file = directory.path(of: RuntimeStatus.fileName)
        let target = try Self.verifiedDaemon(
            status,
            requested: pid,
            file: file,
            name: name,
            mainPID: directories.environment.directory("MAINPID")
        )
        let interruption = ClientInterruption()
        let sent = MonotonicClock.microseconds()
        guard kill(target, signal.rawValue) == 0 else {
            throw ControlClientError("cannot signal pid \(target): \(String(cString: strerror(errno)))")
        }
        // The parser bounds the timeout (0 < timeout ≤ 86400): the product fits in a UInt64.
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
                    output.print("\(name): reload applied; configuration generation \(current.generation) is in force")
                    return 0
                }
                output.error(
                    "\(name): reload rejected: \(reload.reason ?? "unknown reason"); still running generation \(current.generation)"
                )
                guard interrupted != nil else { return 1 }
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
                output.error(
                    "\(name) reload: \(ProcessSignal(rawValue: interrupted)) while pid \(target) is stopping: the stop supersedes the reload"
                )
                return 0
            }
            if gone { throw ControlClientError("pid \(target) exited before answering") }
            usleep(5_000)
        }
        if rejected { return 1 }
        if let interrupted { interruption.dieOf(interrupted) }
        throw ControlClientError("no answer from pid \(target) within \(timeout) s")
    }

    /// The pid to signal: the status file's, when the process with that pid started when the
    /// daemon that wrote the file did (and, with `--pid`, when that is the pid asked for).
    ///
    /// Under a hardened unit `ExecReload=` cannot read `/proc/$MAINPID`: with `PrivateUsers=`
    /// every process of the unit gets a user namespace of its own, and `ProtectProc=invisible`
    /// hides processes the reader could not ptrace. There systemd vouches instead: it sets
    /// `$MAINPID` for a unit's control processes only, so a hidden pid is accepted when it is
    /// `$MAINPID` (and the status file's pid).
    ///
    /// - Parameters:
    ///   - startTime: the start time of a pid, `nil` when `/proc` does not show it.
    ///   - mainPID: `$MAINPID`, as systemd sets it for `ExecReload=`.
    package static func verifiedDaemon(
        _ status: RuntimeStatus,
        requested: Int32?,
        file: String,
        name: String,
        startTime: (Int32) -> UInt64? = ProcessStartTime.of,
        mainPID: String?
    ) throws(ControlClientError) -> Int32 {
        if let requested, requested != status.pid {
            throw ControlClientError(
                "refusing to signal pid \(requested): it is not the \(name) that \(file) describes (pid \(status.pid))"
            )
        }
        let pid = status.pid
        guard pid > 1 else {
            throw ControlClientError("refusing to signal pid \(pid) named in \(file): not a daemon's pid")
        }
        guard let recorded = status.processStartTime else {
            throw ControlClientError(
                "\(file) does not record the daemon's start time (written by an older \(name)): restart the daemon, then reload"
            )
        }
        guard let actual = startTime(pid) else {
            guard kill(pid, 0) == 0 || errno == EPERM else {
                throw ControlClientError("pid \(pid) named in \(file) is not running")
            }
            if mainPID == "\(pid)" { return pid }
            throw ControlClientError(
                "refusing to signal pid \(pid): /proc/\(pid) is hidden from this process, so its start time cannot be checked (run as root, or as ExecReload= with $MAINPID)"
            )
        }
        guard actual == recorded else {
            throw ControlClientError(
                "refusing to signal pid \(pid): it started at tick \(actual), but the \(name) that \(file) describes started at tick \(recorded) (a different process now has that pid)"
            )
        }
        return pid
    }
}

/// `<name> status`: the runtime status file, as text or JSON.
package struct StatusClient: Sendable {
    package var name: String
    package var directories: DaemonDirectories
    package var output: CommandOutput
    package var lines: @Sendable (RuntimeStatus) -> [(label: String, value: String)]

    /// Prints the status; returns 0, or 2 when there is no daemon.
    package func run(runtimeDirectory: String?, json: Bool) -> Int32 {
        let status: RuntimeStatus
        do {
            (_, status) = try directories.runtimeForClient(runtimeDirectory)
        } catch {
            output.error("\(name) status: \(error)")
            return 2
        }
        if json {
            do {
                output.standardOutput(try status.json())
            } catch {
                output.error("\(name) status: cannot encode the status: \(error)")
                return 2
            }
            return 0
        }
        output.print(text(status))
        return 0
    }

    /// The human-readable status: the library's lines with the daemon's after `last reload`.
    /// Everything that came from the file has its control characters escaped.
    package func text(_ status: RuntimeStatus) -> String {
        func line(_ label: String, _ value: String) -> String {
            let label = DisplayText.escapingControlCharacters(label) + ":"
            let padding = String(repeating: " ", count: max(1, 16 - label.count))
            return "  " + label + padding + DisplayText.escapingControlCharacters(value)
        }
        let reload = status.lastReload.map { "\($0.result)" + ($0.reason.map { ": \($0)" } ?? "") } ?? "none"
        var text = [
            "\(name) pid \(status.pid): \(DisplayText.escapingControlCharacters(status.state)), configuration generation \(status.generation)",
            line("last reload", reload),
        ]
        text += lines(status).map { line($0.label, $0.value) }
        text += [
            line("uptime", "\(status.uptimeSeconds) s"),
            line("previous stop", status.previousShutdownClean ? "clean" : "UNCLEAN (crash, kill -9 or power loss)"),
        ]
        return text.joined(separator: "\n")
    }
}

/// SIGTERM and SIGINT while `reload` waits: recorded by a handler instead of killing the
/// client, so it can tell a stop (the daemon is stopping too) from an admin giving up.
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

import VigilLifecycle
import VigilPlatform

/// A parsed command line.
package enum DaemonInvocation: Equatable, Sendable {
    case help(Command?)
    case version
    case run(config: String?, stateDirectory: String?, runtimeDirectory: String?, reloadSignal: ProcessSignal)
    case checkConfig(file: String?)
    /// `signal` is `--signal`'s; `nil` sends the one the daemon's status file names (SIGHUP
    /// for a file that names none).
    case reload(pid: Int32?, runtimeDirectory: String?, timeout: Double, signal: ProcessSignal?)
    case status(runtimeDirectory: String?, json: Bool)
    case systemdUnit(executable: String?, socket: String?)

    package enum Command: String, CaseIterable, Sendable {
        case run
        case checkConfig = "check-config"
        case reload
        case status
        case systemdUnit = "systemd-unit"

        /// An option: its name and, when it takes one, its value's name.
        package struct Option: Sendable {
            package var name: String
            package var value: String?
        }

        package var options: [Option] {
            switch self {
            case .run:
                [
                    Option(name: "--config", value: "file"), Option(name: "--state-directory", value: "dir"),
                    Option(name: "--runtime-directory", value: "dir"), Option(name: "--reload-signal", value: "signal"),
                ]
            case .checkConfig: []
            case .reload:
                [
                    Option(name: "--pid", value: "pid"), Option(name: "--runtime-directory", value: "dir"),
                    Option(name: "--timeout", value: "seconds"), Option(name: "--signal", value: "signal"),
                ]
            case .status: [Option(name: "--runtime-directory", value: "dir"), Option(name: "--json")]
            case .systemdUnit:
                [Option(name: "--executable", value: "path"), Option(name: "--socket", value: "address")]
            }
        }
    }

    /// A usage error: the message names the argument; `command` selects the usage line.
    package struct UsageError: Error, Equatable {
        package var message: String
        package var command: Command?
    }

    /// Parses the arguments after the executable's name.
    package static func parse(_ arguments: [String]) throws(UsageError) -> DaemonInvocation {
        var rest = arguments[...]
        if rest.first == "help" {
            rest.removeFirst()
            guard let topic = rest.popFirst(), topic != "-h", topic != "--help" else { return .help(nil) }
            guard let command = Command(rawValue: topic) else {
                throw UsageError(message: "unknown command '\(quoted(topic))' for help", command: nil)
            }
            if let extra = rest.first {
                throw UsageError(message: "unexpected argument '\(quoted(extra))'", command: nil)
            }
            return .help(command)
        }
        let explicit = rest.first.flatMap(Command.init(rawValue:))
        if explicit != nil { rest.removeFirst() }
        let command = explicit ?? .run

        var values: [String: String] = [:]
        var positionals: [String] = []
        var optionsEnded = false
        while let argument = rest.popFirst() {
            if optionsEnded || argument == "-" || !argument.hasPrefix("-") || Double(argument) != nil {
                positionals.append(argument)
                continue
            }
            if argument == "--" {
                optionsEnded = true
                continue
            }
            if argument == "-h" || argument == "--help" { return .help(explicit) }
            if argument == "--version" { return .version }
            let split = argument.firstIndex(of: "=")
            let name = String(argument[..<(split ?? argument.endIndex)])
            let inline = split.map { String(argument[argument.index(after: $0)...]) }
            guard let option = command.options.first(where: { $0.name == name }) else {
                throw UsageError(
                    message: "unknown option '\(quoted(name))'"
                        + (explicit == nil ? "" : " for '\(command.rawValue)'"),
                    command: explicit
                )
            }
            guard let valueName = option.value else {
                if inline != nil {
                    throw UsageError(message: "'\(name)' takes no value", command: explicit)
                }
                values[name] = ""
                continue
            }
            if let inline, !inline.isEmpty {
                values[name] = inline
            } else if inline == nil, let next = rest.first, !next.isEmpty, next == "-" || !next.hasPrefix("--") {
                values[name] = rest.removeFirst()
            } else {
                throw UsageError(message: "missing value for '\(name) <\(valueName)>'", command: explicit)
            }
            if let value = values[name], valueName == "dir" || valueName == "file",
                value.utf8.count > DaemonDirectories.pathLimit
            {
                throw UsageError(
                    message: "\(name): '\(quoted(value))' is a path of \(value.utf8.count) bytes, longer than the "
                        + "\(DaemonDirectories.pathLimit) a path may have",
                    command: explicit
                )
            }
        }
        if command == .checkConfig, let file = positionals.first, file.utf8.count > DaemonDirectories.pathLimit {
            throw UsageError(
                message: "'\(quoted(file))' is a path of \(file.utf8.count) bytes, longer than the "
                    + "\(DaemonDirectories.pathLimit) a path may have",
                command: explicit
            )
        }
        let allowed = command == .checkConfig ? 1 : 0
        if positionals.count > allowed {
            let extra = positionals[allowed]
            let hint = explicit == nil ? " (commands: run, check-config, reload, status, systemd-unit, help)" : ""
            throw UsageError(message: "unexpected argument '\(quoted(extra))'\(hint)", command: explicit)
        }

        switch command {
        case .run:
            return .run(
                config: values["--config"],
                stateDirectory: values["--state-directory"],
                runtimeDirectory: values["--runtime-directory"],
                reloadSignal: try signal(values["--reload-signal"], option: "--reload-signal", command: explicit)
            )
        case .checkConfig:
            return .checkConfig(file: positionals.first)
        case .reload:
            var pid: Int32?
            if let text = values["--pid"] {
                guard let value = Int32(text) else {
                    throw UsageError(
                        message: "--pid: '\(quoted(text))' is not a process id (a whole number)",
                        command: .reload
                    )
                }
                pid = value
            }
            var timeout = 90.0
            if let text = values["--timeout"] {
                // Decimal only: Double(_:) also reads "0x10" (16), "1e1" and "inf".
                let decimal =
                    text.utf8.allSatisfy {
                        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: ".")
                    }
                    && text.utf8.contains { $0 != UInt8(ascii: ".") }
                guard decimal, let value = Double(text), value.isFinite, value >= ReloadClient.minimumTimeout,
                    value <= ReloadClient.maximumTimeout
                else {
                    throw UsageError(
                        message:
                            "--timeout: '\(quoted(text))' is not a number of seconds from \(ReloadClient.minimumTimeout) to \(Int(ReloadClient.maximumTimeout))",
                        command: .reload
                    )
                }
                timeout = value
            }
            return .reload(
                pid: pid,
                runtimeDirectory: values["--runtime-directory"],
                timeout: timeout,
                signal: try values["--signal"].map { text throws(UsageError) in
                    try signal(text, option: "--signal", command: .reload)
                }
            )
        case .status:
            return .status(runtimeDirectory: values["--runtime-directory"], json: values["--json"] != nil)
        case .systemdUnit:
            let executable = values["--executable"]
            if let executable,
                !executable.hasPrefix("/")
                    || executable.unicodeScalars.contains(where: {
                        $0.value < 0x21 || $0.value == 0x7F || "%$\\\"'".unicodeScalars.contains($0)
                    })
            {
                throw UsageError(
                    message:
                        "--executable: '\(quoted(executable))' is not an absolute path without white space, quotes, %, $ or \\",
                    command: .systemdUnit
                )
            }
            let socket = values["--socket"]
            if let socket, let problem = SystemdUnit.problem(withSocketAddress: socket) {
                throw UsageError(message: "--socket: '\(quoted(socket))': \(problem)", command: .systemdUnit)
            }
            return .systemdUnit(executable: executable, socket: socket)
        }
    }

    private static func signal(_ text: String?, option: String, command: Command?) throws(UsageError) -> ProcessSignal {
        guard let text else { return .sighup }
        guard let signal = ProcessSignal(name: text) else {
            throw UsageError(
                message: "\(option): '\(quoted(text))' is not a signal name (try SIGHUP or SIGRTMIN+3)",
                command: command
            )
        }
        if let what = reloadSignalProblem(signal) {
            throw UsageError(
                message: "\(option): \(signal) \(what); it cannot be the reload signal (try SIGHUP or SIGRTMIN+3)",
                command: command
            )
        }
        return signal
    }

    /// Why `signal` cannot be a reload signal, or `nil` when it can: for `run --reload-signal`,
    /// `reload --signal` and the reload signal a status file names.
    package static func reloadSignalProblem(_ signal: ProcessSignal) -> String? {
        // Signals that cannot reload: the daemon's stop signals (a reload on one would take its
        // stop away, so that `systemctl stop` waits for SIGKILL), those whose default action
        // ends or stops a process that does not handle them (`reload --signal` with one would do
        // that to the daemon), and those the kernel or a terminal raises by itself (a reload
        // nobody asked for: with SIGPIPE, a log reader that went away made every log line a
        // reload, which logged a line, for ever). The same for both options, so that a daemon
        // started with a reload signal can always be reloaded by `reload --signal` with it.
        let refused: [ProcessSignal: String] = [
            .sigterm: "stops the daemon", .sigint: "stops the daemon", .sigquit: "makes a process dump core",
            .sigalrm: "ends a process", ProcessSignal(rawValue: SIGTSTP): "stops a process",
            ProcessSignal(rawValue: SIGPIPE): "is raised by the kernel on a write to a closed pipe or socket",
            ProcessSignal(rawValue: SIGCHLD): "is raised by the kernel whenever a child process ends",
            ProcessSignal(rawValue: SIGCONT): "is raised by the kernel whenever a stopped process resumes",
            ProcessSignal(rawValue: SIGWINCH): "is raised by a terminal whenever it is resized",
        ]
        return refused[signal]
    }

    /// An argument as it may appear in a message: control characters escaped, at most 64
    /// characters (the cut of the configuration's errors), then how long it was.
    private static func quoted(_ text: String) -> String {
        let escaped = DisplayText.escapingControlCharacters(text)
        return escaped.count > 64 ? String(escaped.prefix(64)) + "… (\(text.utf8.count) bytes)" : escaped
    }
}

extension DaemonInvocation {
    /// Whether the command reads the directories systemd passes (all but help and version).
    var readsDirectories: Bool {
        switch self {
        case .help, .version, .systemdUnit: false
        case .run, .checkConfig, .reload, .status: true
        }
    }

    /// What the command does, for "cannot …" in a failure before its work.
    var verb: String {
        switch self {
        case .run: "start"
        case .checkConfig: "check the configuration"
        case .reload: "reload"
        case .status: "read the status"
        case .help: "print help"
        case .version: "print the version"
        case .systemdUnit: "print the unit"
        }
    }

    /// The status for a failure before the command's work: 1 for `run` and `check-config`
    /// (could not start, not valid), 2 for `reload` and `status` (no daemon reached).
    var failureStatus: Int32 {
        switch self {
        case .reload, .status: 2
        default: 1
        }
    }
}

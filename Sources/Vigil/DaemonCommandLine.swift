import Logging
import Synchronization
import VigilLifecycle
import VigilPlatform

/// A daemon's whole command line and control protocol, in one call from its `main`:
///
/// ```swift
/// import Vigil
///
/// struct Settings: DefaultedConfiguration {
///     var greeting = "hello"
///     static let defaultConfiguration = Settings()
///     func validate() throws(InvalidValue) {}
/// }
///
/// let commandLine = DaemonCommandLine(
///     name: "mydaemon", version: "1.0", abstract: "Serves greetings.", configuration: Settings.self)
/// EventLoopExecutor.run {
///     await commandLine.main { options in
///         let configuration = ConfigurationListener<Settings>(source: options.configurationSource)
///         return Daemon(identifier: options.name, version: options.version,
///                       listeners: [configuration], logging: options.logging)
///     }
/// }
/// ```
///
/// The commands, parsed by hand (exit status 64 with the usage on stderr for a usage error):
///
/// - `run` (the default): `--config FILE`, `--state-directory DIR`, `--runtime-directory DIR`,
///   `--reload-signal SIG`. Builds the daemon with the closure, adds the runtime status file
///   (`<runtime directory>/status.json`, see ``RuntimeStatus``) and the reload signal, runs it,
///   and exits with its status (0 clean, 1 failed).
/// - `check-config [FILE]`: 0 when valid, 1 with the error on stderr.
/// - `reload [--pid PID] [--runtime-directory DIR] [--timeout S] [--signal SIG]`: signals the
///   daemon its status file describes (its pid proven by start time) with the reload signal the
///   file names, and waits for the outcome:
///   0 applied, 1 rejected with the reason, 2 no daemon or no answer. What `ExecReload=` runs.
/// - `status [--runtime-directory DIR] [--json]`: 0, or 2 without a daemon.
/// - `systemd-unit [--executable PATH] [--socket ADDRESS]`: prints the hardened `.service` unit
///   the daemon needs, from the `unit:` given to the initializer (`ExecStart=` at `PATH`, default `/usr/bin/<name>`), or with
///   `--socket` the `.socket` unit that listens on `ADDRESS` for it.
/// - `--help`, `help [COMMAND]`, `COMMAND --help`, `--version`.
///
/// Defaults follow systemd, one rule for the service and a run by hand:
/// `$CONFIGURATION_DIRECTORY/<name>.json` (else the embedded default), `$STATE_DIRECTORY` (else
/// `/var/lib/<name>` for root, `$XDG_STATE_HOME/<name>` or `$HOME/.local/state/<name>` for
/// others; with none of them `run` fails rather than use a shared directory),
/// `$RUNTIME_DIRECTORY` (else `/run/<name>` for root, `$XDG_RUNTIME_DIR/<name>` for others).
/// `run` creates the runtime directory, and the state directory of a daemon that keeps state
/// (`stateContents:` is given, or a listener keeps a `ShutdownHistory`, as `PersistenceListener`
/// does), mode 0700 whatever the umask, and holds an `InstanceLock` on each for its life: a
/// second daemon on either fails at start naming the first's pid.
public struct DaemonCommandLine<Configuration: ValidatedConfiguration>: Sendable {
    /// The executable's name: in help, messages, default paths and the status file's client.
    package var name: String
    /// What `--version` prints.
    package var version: String
    /// One line for the help's overview.
    package var abstract: String
    /// Lines the daemon adds to `status` (after `last reload`), from its own keys in the status
    /// file (``RuntimeStatus/decode(_:)``); label and value, escaped and aligned by the library.
    package var statusLines: @Sendable (RuntimeStatus) -> [(label: String, value: String)]
    /// What the daemon keeps in its state directory, for `--help` ("state.json, the heartbeat
    /// count"); `nil` for a daemon that keeps nothing there of its own. When set, `run` creates
    /// and locks the state directory even without a `PersistenceListener`.
    package var stateContents: String?
    /// What `systemd-unit` prints the units from.
    package var unit: SystemdUnit

    /// A command line for the daemon `name`, whose configuration is of type `configuration`.
    ///
    /// `name` names the unit, the executable and the default directories (`/var/lib/NAME`):
    /// 1 to 64 ASCII letters, digits, `.`, `_` and `-`, beginning with a letter or digit.
    /// Any other name makes every command exit 1 saying so.
    public init(
        name: String,
        version: String,
        abstract: String,
        configuration: Configuration.Type = Configuration.self,
        stateContents: String? = nil,
        unit: SystemdUnit = SystemdUnit(),
        statusLines: @escaping @Sendable (RuntimeStatus) -> [(label: String, value: String)] = { _ in [] }
    ) {
        self.name = name
        self.version = version
        self.abstract = abstract
        self.stateContents = stateContents
        self.unit = unit
        self.statusLines = statusLines
    }

    /// Parses `CommandLine.arguments`, runs the command and exits with its status. For `run`,
    /// `makeDaemon` builds the daemon from the options (pass `options.logging` to it); the
    /// library adds the runtime status file and the reload signal, then runs it.
    ///
    /// - Important: Process-wide: `run` bootstraps swift-log, `reload` installs handlers for
    ///   SIGTERM and SIGINT while it waits, and the process exits when the command is done.
    public func main(_ makeDaemon: @escaping @Sendable (DaemonOptions) async throws -> Daemon) async -> Never {
        // `CommandLine.arguments` repairs bytes that are not UTF-8 (U+FFFD), so a path in another
        // encoding would name another file: refused instead, as a usage error.
        for index in 1..<max(1, Int(CommandLine.argc)) {
            guard let argument = CommandLine.unsafeArgv[index], String(validatingCString: argument) == nil else {
                continue
            }
            CommandOutput.process.error(
                "\(name): argument \(index) is not valid UTF-8 (a file name in another encoding?): "
                    + "rename the file, or reach it through a symbolic link whose name is UTF-8"
            )
            exit(64)
        }
        let status = await execute(Array(CommandLine.arguments.dropFirst()), makeDaemon: makeDaemon)
        exit(status)
    }

    /// Runs one command line; returns the exit status.
    package func execute(
        _ arguments: [String],
        environment: CommandEnvironment = .process,
        output: CommandOutput = .process,
        makeDaemon: @Sendable (DaemonOptions) async throws -> Daemon
    ) async -> Int32 {
        if let problem = Self.nameProblem(name) {
            output.error("\(DisplayText.quoted(name)) cannot name a daemon: \(problem); fix DaemonCommandLine(name:)")
            return 1
        }
        let directories = DaemonDirectories(name: name, environment: environment)
        let invocation: DaemonInvocation
        do {
            invocation = try DaemonInvocation.parse(arguments)
        } catch {
            output.error("\(name): \(error.message)")
            output.standardError(
                "Usage: \(usage(error.command, indent: 7))\n  See '\(name) \(error.command.map { "\($0.rawValue) " } ?? "")--help' for more information.\n"
            )
            return 64
        }
        if invocation.readsDirectories, let problem = directories.systemdDirectoryProblem {
            output.error("\(name): \(problem)")
            return invocation.failureStatus
        }
        if invocation.readsDirectories, let shortage = Daemon.stackShortage() {
            output.error("\(name): cannot \(invocation.verb): \(shortage)")
            return invocation.failureStatus
        }
        switch invocation {
        case .help(let command):
            output.standardOutput(help(command))
            return 0
        case .version:
            output.print(DisplayText.escapingControlCharacters(version))
            return 0
        case .checkConfig(let file):
            return checkConfig(file, directories: directories, output: output)
        case .reload(let pid, let runtimeDirectory, let timeout, let signal):
            return ReloadClient(name: name, directories: directories, output: output)
                .run(pid: pid, runtimeDirectory: runtimeDirectory, timeout: timeout, signal: signal)
        case .systemdUnit(let executable, let socket):
            if let problem = unit.problem {
                output.error(
                    "\(name): cannot print the unit: \(problem); fix the SystemdUnit declaration in the daemon"
                )
                return 1
            }
            output.standardOutput(
                socket.map { unit.socket(name: name, address: $0) }
                    ?? unit.service(name: name, abstract: abstract, executable: executable ?? "/usr/bin/\(name)")
            )
            return 0
        case .status(let runtimeDirectory, let json):
            return StatusClient(name: name, directories: directories, output: output, lines: statusLines)
                .run(runtimeDirectory: runtimeDirectory, json: json)
        case .run(let config, let stateDirectory, let runtimeDirectory, let reloadSignal):
            guard let state = directories.state(stateDirectory) else {
                output.error(
                    "\(name): cannot start: no state directory: STATE_DIRECTORY, XDG_STATE_HOME and HOME are unset "
                        + "or not absolute paths; pass --state-directory DIR, or set StateDirectory= in the unit"
                )
                return 1
            }
            EventLoopExecutor.openMissingStandardDescriptors()
            if let shortage = Self.descriptorShortage(environment: environment) {
                output.error("\(name): cannot start: \(shortage)")
                return 1
            }
            // The helper thread for file calls starts now, while logging is set up and the daemon
            // made: the first call (the directories' locks, below) finds it waiting.
            BlockingWorker.shared.startThread()
            let runtime = directories.runtime(runtimeDirectory)
            let options = DaemonOptions(
                name: name,
                version: version,
                configurationSource: directories.configurationSource(config),
                stateDirectory: state,
                runtimeDirectory: runtime.path,
                reloadSignal: reloadSignal,
                logging: Daemon.bootstrapLogging(identifier: name),
                status: RuntimeStatusWriter()
            )
            var daemon: Daemon
            do {
                daemon = try await makeDaemon(options)
            } catch {
                options.logging.logger.critical("\(name) cannot start: \(error)")
                BlockingWorker.retireAllIdleThreads()
                return 1
            }
            if let warning = unit.stopTimeoutWarning(for: daemon) { options.logging.logger.warning("\(warning)") }
            let status = options.status
            status.recordReloadSignal(reloadSignal)
            status.track(daemon.listeners)
            status.report(to: options.logging.logger)
            let locks = HeldLocks()
            // A daemon keeps state when it says so or keeps a shutdown history (PersistenceListener
            // does); a stateless one gets no state directory made (its unit may have none).
            let keepsState = stateContents != nil || daemon.listeners.contains { $0.shutdownHistory != nil }
            // Named after the daemon: its failure reads "Failed to start: NAME cannot use …".
            daemon.startupCommands.insert(
                StartupStep(name) { _ in
                    // On the helper thread with a deadline, as the configuration and state files
                    // are read: a directory on a hung file system fails the start, naming it.
                    let state = keepsState ? state : nil
                    let deadline = HeldLocks.deadline
                    switch await BlockingWorker.shared.run(
                        deadline: deadline,
                        {
                            Result { () throws(SystemError) in try locks.takeDirectories(runtime: runtime, state: state)
                            }
                        }
                    ) {
                    case .finished(let result): status.use(try result.get())
                    case .timedOut:
                        throw SystemError(
                            path: locks.directoryInProgress ?? runtime.path,
                            operation: "make and lock the directory",
                            errno: ETIMEDOUT,
                            detail: "the file system did not answer in \(deadline.formatted) (a hung mount?)"
                        )
                    case .cancelled:
                        throw SystemError(
                            path: runtime.path,
                            operation: "make and lock the directory",
                            errno: ECANCELED
                        )
                    case .unavailable(let why):
                        throw SystemError(
                            path: runtime.path,
                            operation: "make and lock the directory",
                            errno: EAGAIN,
                            detail: why
                        )
                    }
                },
                at: 0
            )
            daemon.observers.append(status.observer)
            daemon.signals.reloadSignal = reloadSignal
            let exitStatus = await daemon.run()
            withExtendedLifetime(locks) {}
            return exitStatus
        }
    }

    /// The fewest descriptors `run` works with: stdin, stdout and stderr, the event loop's
    /// (``EventLoopExecutor``), the runtime directory, the one file being read or written at a
    /// time, the instance locks of the runtime and state directories, and the notify and journal
    /// sockets when systemd gives them, and `BARRIER=1`'s socket pair at exit (14 under the unit),
    /// and the descriptors systemd passed (`LISTEN_FDS`).
    package static func descriptorsNeeded(environment: CommandEnvironment) -> Int {
        3 + EventLoopExecutor.loopDescriptors + 2 + instanceLocks
            // The notify socket, and at exit one more for BARRIER=1's socket pair (the other
            // end takes the slot of the file written last, closed by then).
            + (environment.variable("NOTIFY_SOCKET") == nil ? 0 : 2)
            + (environment.variable("JOURNAL_STREAM") == nil ? 0 : 1)
            + (watchesMemoryPressure(environment) ? 1 : 0)
            + passedDescriptors(environment)
    }

    /// Whether systemd hands the daemon a memory-pressure source to watch (one more descriptor).
    private static func watchesMemoryPressure(_ environment: CommandEnvironment) -> Bool {
        guard let path = environment.variable("MEMORY_PRESSURE_WATCH") else { return false }
        return !path.isEmpty && path != "/dev/null"
    }

    /// Why `run` cannot start with this process's `RLIMIT_NOFILE`, or `nil`: below
    /// ``descriptorsNeeded(environment:)`` it would fail later, halfway, with `EMFILE` (a
    /// status file or the final checkpoint that cannot be written), so it fails first. Above it,
    /// descriptors the process inherited (a shell's, a supervisor's) may still take the slots it
    /// counts on (helper 51: three inherited at a limit of 13): `open` lists the open ones
    /// (`/proc/self/fd`), and they count against the limit.
    package static func descriptorShortage(
        environment: CommandEnvironment,
        open: () throws(SystemError) -> [Int32] = openDescriptors
    ) -> String? {
        var rawLimit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &rawLimit) == 0 else { return nil }
        let passedCount = passedDescriptors(environment)
        let needed = descriptorsNeeded(environment: environment)
        guard rawLimit.rlim_cur >= rlim_t(needed) else {
            return "it may open only \(rawLimit.rlim_cur) descriptors (RLIMIT_NOFILE) and needs at least \(needed): "
                + "stdin, stdout, stderr, \(EventLoopExecutor.loopDescriptors) for its event loop, the runtime "
                + "directory, the file it writes, the instance locks of its runtime and state directories"
                + (environment.variable("NOTIFY_SOCKET") == nil
                    ? "" : ", the notify socket and the BARRIER=1 socket pair at exit")
                + (environment.variable("JOURNAL_STREAM") == nil ? "" : ", the journal socket")
                + (watchesMemoryPressure(environment) ? ", the memory-pressure watch" : "")
                + (passedCount == 0
                    ? "" : ", the \(passedCount) systemd passed (LISTEN_FDS: sockets, stored descriptors)")
                + "; with fewer, opening them fails with EMFILE (Too many open files). Raise LimitNOFILE= in the unit "
                + "(or ulimit -n) to \(needed) or more"
        }
        guard rawLimit.rlim_cur < rlim_t(Int32.max) else { return nil }
        let limit = Int(rawLimit.rlim_cur)
        let listed: [Int32]
        do {
            listed = try open()
        } catch  where error.errno == EMFILE || error.errno == ENFILE {
            // Listing them takes a descriptor too: none was free.
            return "it may open \(limit) descriptors (RLIMIT_NOFILE) and every one is open already: "
                + "opening what it needs would fail with EMFILE. Close the descriptors it inherits (whatever "
                + "started it left them open), or raise LimitNOFILE= (ulimit -n)"
        } catch {
            return nil
        }
        let below = listed.filter { $0 >= 0 && Int($0) < limit }
        // Passed on purpose (socket activation, the descriptor store): open, and needed.
        let passed = below.filter { $0 >= 3 && $0 < 3 + Int32(clamping: passedCount) }.count
        // Open already, and counted in what it needs: stdin, stdout, stderr, what systemd passed
        // and, when the daemon runs on it, the event loop's own.
        let own = 3 + passed + (EventLoopExecutor.isInstalled ? EventLoopExecutor.loopDescriptors : 0)
        let inherited = below.count - own
        guard inherited > 0, limit - below.count < needed - own else { return nil }
        let shown = below.filter { $0 > 2 }.prefix(8).map(String.init).joined(separator: ", ")
        return "it may open \(limit) descriptors (RLIMIT_NOFILE) and needs \(needed)"
            + (passed > 0 ? " (\(passed) passed by systemd among them)" : "") + ", but \(below.count) "
            + "are open already (\(shown)\(below.count - 3 > 8 ? ", …" : "")), \(inherited) more than its own: "
            + "with \(limit - below.count) free, opening what it needs would fail with EMFILE. Close "
            + "the descriptors it inherits (whatever started it left them open), or raise LimitNOFILE= (ulimit -n) to "
            + "\(needed + inherited) or more"
    }

    /// How many descriptors systemd passed this process (`LISTEN_FDS`, when `LISTEN_PID` names
    /// it): its sockets and stored descriptors, from 3 on; read by socket activation's own
    /// parser, which refuses what systemd would not set (then none are counted here, and the
    /// adoption fails later naming it).
    static func passedDescriptors(_ environment: CommandEnvironment) -> Int {
        let passed = try? ListenedFileDescriptor.parse(
            environment: { environment.variable($0) },
            pid: getpid(),
            descriptorLimit: Int32.max
        )
        return passed?.count ?? 0
    }

    /// The process's open descriptors, from `/proc/self/fd` (the one the listing uses left
    /// out).
    package static func openDescriptors() throws(SystemError) -> [Int32] {
        guard let directory = opendir("/proc/self/fd") else {
            throw SystemError(path: "/proc/self/fd", operation: "list", errno: errno)
        }
        defer { closedir(directory) }
        let own = dirfd(directory)
        var result: [Int32] = []
        while let entry = readdir(directory) {
            if let number = Int32(FileSystem.entryName(entry)), number != own { result.append(number) }
        }
        return result
    }

    /// Why `name` cannot name a daemon, or `nil`: it becomes a unit's name, an executable's path
    /// (`ExecStart=/usr/bin/NAME`) and default directories (`/var/lib/NAME`), where an empty
    /// name made `/var/lib/` itself the state directory and `../up` one outside it.
    package static func nameProblem(_ name: String) -> String? {
        guard (1...64).contains(name.utf8.count) else { return "a name has 1 to 64 characters" }
        let allowed = name.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: ".")
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
        guard allowed, let first = name.utf8.first, first != UInt8(ascii: "."), first != UInt8(ascii: "-"),
            first != UInt8(ascii: "_")
        else {
            return "a name is ASCII letters, digits, '.', '_' and '-', beginning with a letter or digit"
        }
        return nil
    }

    /// The `instance.lock` files `run` holds open for its life: the runtime directory's and the
    /// state directory's (counted for every daemon: whether one keeps state is known only once
    /// it is built, after this check).
    package static var instanceLocks: Int { 2 }

    private func checkConfig(_ file: String?, directories: DaemonDirectories, output: CommandOutput) -> Int32 {
        guard case .file(let path, let required) = directories.configurationSource(file) else {
            output.print(
                "No file given and $CONFIGURATION_DIRECTORY is not set: \(name) would run with its embedded default."
            )
            return 0
        }
        do {
            _ = try ConfigurationLoader<Configuration>().load(path: path)
            output.print("\(DisplayText.escapingControlCharacters(path)): configuration is valid")
            return 0
        } catch {
            // As `run` decides: the file $CONFIGURATION_DIRECTORY names may be absent (the
            // embedded default runs); one given on the command line must be there.
            if !required, error.cause?.errno == ENOENT, FileSystem.isAbsent(path) {
                output.print(
                    "\(DisplayText.escapingControlCharacters(path)) does not exist: \(name) would run with its embedded default."
                )
                return 0
            }
            output.error("\(name): \(error)")
            return 1
        }
    }

    // MARK: help

    /// One line of usage for a command (the root's without one).
    /// Lines after the first are indented by `indent` columns; none is longer than 80 unless
    /// a single part is.
    package func usage(_ command: DaemonInvocation.Command?, indent: Int = 0) -> String {
        guard let command else { return "\(name) [<command>] [<options>]" }
        let options = command.options.map { option in
            option.value.map { "[\(option.name) <\($0)>]" } ?? "[\(option.name)]"
        }
        let argument = command == .checkConfig ? ["[<file>]"] : []
        var lines: [String] = []
        var line = name + " " + command.rawValue
        for part in options + argument {
            if indent + line.count + 1 + part.count > 80 {
                lines.append(line)
                line = String(repeating: " ", count: indent + name.count + command.rawValue.count + 2) + part
                continue
            }
            line += " " + part
        }
        lines.append(line)
        return lines.joined(separator: "\n")
    }

    /// The help for a command, or the root's.
    package func help(_ command: DaemonInvocation.Command?) -> String {
        var text = Self.reflow("OVERVIEW: \(command.map { commandAbstract($0) } ?? abstract)") + "\n\n"
        let discussion = self.discussion(command)
        if !discussion.isEmpty { text += Self.reflow(discussion) + "\n\n" }
        text += "USAGE: \(usage(command, indent: 7))\n\n"
        if command == .checkConfig {
            text += "ARGUMENTS:\n"
            text += entry(
                "<file>",
                "The file to check (default: $CONFIGURATION_DIRECTORY/\(name).json, else the embedded default)."
            )
            text += "\n"
        }
        text += command == nil ? "OPTIONS (of run, the default command):\n" : "OPTIONS:\n"
        for option in (command ?? .run).options {
            text += entry(
                option.name + (option.value.map { " <\($0)>" } ?? ""),
                optionHelp(option.name, of: command ?? .run)
            )
        }
        text += entry("--version", "Show the version.")
        text += entry("-h, --help", "Show help information.")
        if command == nil {
            text += "\nCOMMANDS:\n"
            for command in DaemonInvocation.Command.allCases {
                text += entry(command.rawValue, commandAbstract(command))
            }
            text += entry("help <command>", "Show a command's help.")
            text += "\n  See '\(name) help <command>' for detailed help.\n"
        }
        return text
    }

    /// Text wrapped at 80 columns: the lines of a paragraph are joined and re-broken; lines
    /// that start with a space (examples) and blank lines are kept as they are.
    package static func reflow(_ text: String, width: Int = 80) -> String {
        var output: [String] = []
        var line = ""
        func flush() {
            if !line.isEmpty { output.append(line) }
            line = ""
        }
        for source in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if source.isEmpty || source.hasPrefix(" ") {
                flush()
                output.append(String(source))
                continue
            }
            for word in source.split(separator: " ") {
                if !line.isEmpty && line.count + 1 + word.count > width { flush() }
                line += (line.isEmpty ? "" : " ") + word
            }
        }
        flush()
        return output.joined(separator: "\n")
    }

    private func commandAbstract(_ command: DaemonInvocation.Command) -> String {
        switch command {
        case .run: "Run the daemon in the foreground (the default command)."
        case .checkConfig:
            "Validate a configuration file, like nginx -t: exit 0 when valid, 1 with the error on stderr."
        case .reload: "Reload the running daemon and wait for the outcome (what ExecReload= runs)."
        case .status: "Show the running daemon's status."
        case .systemdUnit: "Print the hardened systemd unit the daemon needs (with --socket, its .socket unit)."
        }
    }

    private func discussion(_ command: DaemonInvocation.Command?) -> String {
        switch command {
        case nil:
            """
            Runs in the foreground, under systemd or in a terminal; it never forks into the background.

            Examples:
              \(name)                  run with the embedded default configuration
              \(name) run --config /etc/\(name)/\(name).json
              \(name) check-config /etc/\(name)/\(name).json
              \(name) reload           reload the running daemon and wait for the outcome
              \(name) status --json
            """
        case .run:
            """
            Reads the configuration, restores the state (a daemon that keeps one), reports READY=1
            to systemd and handles signals until told to stop. Exit status: 0 after a clean stop, 1 when start-up failed
            or a part failed to stop cleanly.
            """
        case .checkConfig:
            """
            Examples:
              \(name) check-config /etc/\(name)/\(name).json
              \(name) check-config          checks $CONFIGURATION_DIRECTORY/\(name).json
            """
        case .reload:
            """
            Signals only the daemon that the runtime directory's status.json describes, and only
            after proving that the process with that pid started when the daemon did.

            Exit status: 0 when the new configuration was applied (or the daemon is stopping: a
            stop supersedes the reload), 1 when it was rejected (the reason on stderr), 2 when
            there is no daemon, the pid is not the daemon's, --signal is not the daemon's reload
            signal (or the status file names none that can reload and --signal is not given),
            or no answer came in time.

            Examples:
              \(name) reload
              \(name) reload --pid $MAINPID
            """
        case .systemdUnit:
            """
            Writes the .service unit to standard output: Type=notify, ExecReload= through \(name) reload, \
            DynamicUser=, the state, runtime and configuration directories and a sandbox that \
            systemd-analyze security rates 1.0 or less, plus what the daemon declares (its watchdog, \
            children, stored descriptors, a socket in its runtime directory).

            Examples:
              \(name) systemd-unit > /etc/systemd/system/\(name).service
              \(name) systemd-unit --socket /run/\(name)/\(name).sock > \(name).socket
            """
        case .status:
            """
            Exit status: 0, or 2 when there is no running daemon.

            Examples:
              \(name) status
              \(name) status --json
            """
        }
    }

    private func optionHelp(_ option: String, of command: DaemonInvocation.Command) -> String {
        let runtimeDefault = "$RUNTIME_DIRECTORY, else /run/\(name) for root, $XDG_RUNTIME_DIR/\(name) for others"
        switch option {
        case "--config":
            return "The configuration file (default: $CONFIGURATION_DIRECTORY/\(name).json, else the embedded default)."
        case "--state-directory":
            // Without stateContents the library cannot know, before the daemon is built, whether
            // a listener keeps state there.
            let what =
                stateContents.map { "Where \(name) keeps its state (\($0))" }
                ?? "The state directory, if \(name) keeps state"
            return what
                + "; created if missing and locked against a second \(name) (default: $STATE_DIRECTORY, "
                + "else /var/lib/\(name) for root, $XDG_STATE_HOME/\(name) or ~/.local/state/\(name) for others)."
        case "--runtime-directory" where command != .run:
            // The clients read it: they create and lock nothing.
            return "The running \(name)'s runtime directory, where its status.json is (default: \(runtimeDefault))."
        case "--runtime-directory":
            return
                "Where status.json lives, on tmpfs or a local disk (not FUSE, NFS or another file system that can hang); "
                + "created if missing and locked against a second \(name) (default: \(runtimeDefault))."
        case "--reload-signal":
            return
                "The signal that reloads, as systemd's ReloadSignal= names it (SIGHUP, SIGRTMIN+3, …; default: SIGHUP)."
        case "--pid":
            return "The daemon's pid; must match the runtime directory's status.json (default: from status.json)."
        case "--timeout": return "Seconds to wait for the outcome (0.01 to 86400; default: 90)."
        case "--signal":
            return
                "The signal to send (default: the daemon's --reload-signal, as its status.json names it; SIGHUP for a file that names none)."
        case "--json":
            return
                "Print JSON (the status file's keys, the daemon's own keys again at the top level, then uptimeSeconds)."
        case "--executable": return "The executable's path in ExecStart= and ExecReload= (default: /usr/bin/\(name))."
        case "--socket":
            return
                "Print the .socket unit instead, listening on this address (/path, @abstract, PORT, IPV4:PORT, [IPV6]:PORT)."
        default: return ""
        }
    }

    /// `  name    help`, the help wrapped at 80 columns under a 26-column indent.
    private func entry(_ name: String, _ help: String) -> String {
        let indent = String(repeating: " ", count: 26)
        var lines: [String] = []
        var line = "  " + name
        if line.count >= 25 {
            lines.append(line)
            line = indent
        } else {
            line += String(repeating: " ", count: 26 - line.count)
        }
        var lineHasWords = false
        for word in help.split(separator: " ") {
            if lineHasWords && line.count + 1 + word.count > 80 {
                lines.append(line)
                line = indent
                lineHasWords = false
            }
            line += (lineHasWords ? " " : "") + word
            lineHasWords = true
        }
        lines.append(line)
        return lines.joined(separator: "\n") + "\n"
    }
}

/// The instance locks of a running daemon's directories, held until the process ends.
package final class HeldLocks: Sendable {
    private let locks = Mutex<[InstanceLock]>([])
    /// The directory ``takeDirectories(runtime:state:)`` works on now (for the message when it
    /// misses its deadline).
    private let current = Mutex<String?>(nil)
    /// The file system of a path (``LocalFile/fileSystem(of:)``; a test gives another).
    private let fileSystem: @Sendable (String) throws(SystemError) -> LocalFile.FileSystemType

    package init(
        fileSystem: @escaping @Sendable (String) throws(SystemError) -> LocalFile.FileSystemType = {
            (path: String) throws(SystemError) in try LocalFile.fileSystem(of: path)
        }
    ) {
        self.fileSystem = fileSystem
    }

    /// The directory being checked, made or locked, if ``takeDirectories(runtime:state:)`` is
    /// under way (or was cut short there).
    package var directoryInProgress: String? { current.withLock { $0 } }

    /// Creates the runtime and (for a daemon that keeps state) the state directory (explicit
    /// modes, whatever the umask) and takes each one's `InstanceLock` before anything is written
    /// in either; returns the runtime directory, for the status file to start in. A second
    /// daemon on either directory fails here naming the first's pid.
    ///
    /// Everything that can be known before a directory is made is checked first, for both: the
    /// path rule (``DirectoryPathRule``: no link another user made, no parent another user may
    /// change) and the runtime directory's file system (``checkRuntimeFileSystem(_:)``). A refused
    /// run makes no directory, neither behind another user's link nor on a file system it refuses.
    package func takeDirectories(
        runtime: DaemonDirectories.Runtime,
        state: String?
    )
        throws(SystemError) -> TrustedDirectory
    {
        current.withLock { $0 = runtime.path }
        try DirectoryPathRule.check(runtime.path, role: .runtime)
        try checkRuntimeFileSystem(runtime.path)
        if let state {
            current.withLock { $0 = state }
            try DirectoryPathRule.check(state, role: .state)
        }
        current.withLock { $0 = runtime.path }
        let runtimeDirectory = try TrustedDirectory.create(runtime.path, privateToCaller: runtime.privateToCaller)
        var held = [try runtimeDirectory.lockInstance()]
        if let state {
            current.withLock { $0 = state }
            try DirectoryPathRule.create(state, role: .state)
            // A mode others may write with is refused before the lock file is made in it; the
            // owner after, so that a second daemon on a running one's directory hears the pid
            // that runs there.
            try StateStore.checkOwnership(of: state, checkingOwner: false)
            held.append(try InstanceLock.acquire(inDirectoryAt: state, held: held[0]))
            try StateStore.checkOwnership(of: state)
        }
        current.withLock { $0 = nil }
        locks.withLock { $0 = held }
        return runtimeDirectory
    }

    /// Refuses a runtime directory on a file system that can stop answering (FUSE, NFS, CIFS,
    /// overlayfs, …: any not on ``LocalFile``'s local list). `status.json` is written there
    /// in place, from the event loop, at every lifecycle event and after every heartbeat; on a
    /// FUSE mount whose server stopped answering, that write sat in `openat` and the daemon
    /// sent no heartbeat or watchdog ping and did not answer SIGTERM for minutes. Its
    /// `instance.lock` stays open for the daemon's life, and the close of a file there at exit
    /// waits for the server too. Asked of the deepest part of the path that exists, before
    /// anything is made: a missing directory is made on its parent's file system.
    func checkRuntimeFileSystem(_ path: String) throws(SystemError) {
        let type = try fileSystem(Self.deepestExisting(path))
        guard !type.isLocal else { return }
        let mounted = type.mountPoint.map { " (mounted at \($0))" } ?? ""
        throw SystemError(
            path: path,
            operation: "use as the runtime directory",
            errno: EREMOTE,
            detail: "its file system is \(type.name)\(mounted), which can stop answering, and the daemon writes "
                + "status.json there from its event loop: a write that hangs would stop its heartbeats and watchdog "
                + "pings and leave SIGTERM unanswered. Use a directory on tmpfs: one under /run (systemd's "
                + "RuntimeDirectory= makes one there) or, where /run is not a tmpfs (a container), under /dev/shm "
                + "(--runtime-directory); the runtime directory may be on tmpfs, ramfs, ext2/3/4, XFS, Btrfs or F2FS"
        )
    }

    /// `path`, else its deepest parent that exists (`.` for a relative path none of which does).
    /// Only a missing part is climbed past: a part that exists but cannot be looked at (`EACCES`
    /// on a FUSE mount root cannot enter, `ENOTCONN` from a dead FUSE server) is returned, so the
    /// file-system check fails on it with its own reason rather than judging its parent's.
    /// Split by bytes, as the kernel reads the path (`FileSystem.parent(of:)`).
    static func deepestExisting(_ path: String) -> String {
        var candidate = path
        while true {
            var info = stat()
            if stat(candidate, &info) == 0 || (errno != ENOENT && errno != ENOTDIR) { return candidate }
            guard candidate.utf8.contains(UInt8(ascii: "/")) else { return "." }
            if candidate == "/" { return "/" }
            candidate = FileSystem.parent(of: candidate)
        }
    }

    /// How long the file system may take to make and lock the directories at start (as long as
    /// a configuration read may take: `ConfigurationListener.readTimeout`'s default).
    package static let deadline = Duration.seconds(5)
}

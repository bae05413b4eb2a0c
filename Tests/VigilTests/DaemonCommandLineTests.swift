import Glibc
import Synchronization
import Testing
import VigilTesting

@testable import Vigil

/// The command line every daemon gets from ``DaemonCommandLine``: parsed by hand, with the
/// usage errors (exit 64), help and version that swift-argument-parser users expect, and the
/// same commands and defaults for any daemon's name.
@Suite struct DaemonCommandLineTests {
    /// What one command line printed and returned.
    struct Outcome {
        var status: Int32
        var standardOutput: String
        var standardError: String
    }

    final class Capture: Sendable {
        let out = Mutex("")
        let err = Mutex("")
        var output: CommandOutput {
            CommandOutput(
                standardOutput: { text in self.out.withLock { $0 += text } },
                standardError: { text in self.err.withLock { $0 += text } }
            )
        }
    }

    static func environment(_ variables: [String: String] = [:], uid: uid_t = 1000) -> CommandEnvironment {
        CommandEnvironment(variable: { variables[$0] }, effectiveUID: uid)
    }

    /// Runs `arguments` through a command line named `name` (never `run`: no daemon is built).
    static func execute(
        _ arguments: [String],
        name: String = "vigild",
        environment: CommandEnvironment = environment()
    ) async -> Outcome {
        let capture = Capture()
        let commandLine = DaemonCommandLine(
            name: name,
            version: "9.8.7",
            abstract: "A test daemon.",
            configuration: SampleConfiguration.self,
            statusLines: { status in
                let requests = (try? status.decode(HelloKeys.self).requests).map { "\($0)" } ?? "?"
                return [("requests", requests)]
            }
        )
        let status = await commandLine.execute(arguments, environment: environment, output: capture.output) { _ in
            Issue.record("no daemon may be built for \(arguments)")
            throw CancellationError()
        }
        return Outcome(
            status: status,
            standardOutput: capture.out.withLock { $0 },
            standardError: capture.err.withLock { $0 }
        )
    }

    struct HelloKeys: Codable, Sendable {
        var requests: Int
    }

    // MARK: parsing

    @Test(arguments: [
        (["--bogus"], "unknown option '--bogus'", "vigild [<command>]"),
        (["reload", "--bogus=1"], "unknown option '--bogus' for 'reload'", "vigild reload [--pid <pid>]"),
        (["status", "--pid", "3"], "unknown option '--pid' for 'status'", "vigild status [--runtime-directory"),
        (["check-config", "--json"], "unknown option '--json' for 'check-config'", "vigild check-config [<file>]"),
        (["run", "-x"], "unknown option '-x' for 'run'", "vigild run [--config <file>]"),
    ])
    func anUnknownOptionIsAUsageErrorNamingIt(arguments: [String], message: String, usage: String) async {
        let outcome = await Self.execute(arguments)
        #expect(outcome.status == 64)
        #expect(outcome.standardOutput.isEmpty)
        #expect(outcome.standardError.hasPrefix("vigild: \(message)\n"), "\(outcome.standardError)")
        #expect(outcome.standardError.contains("Usage: \(usage)"), "\(outcome.standardError)")
    }

    @Test(arguments: [
        ["run", "--config"], ["--state-directory"], ["reload", "--pid"], ["reload", "--timeout", "--json"],
        ["status", "--runtime-directory"], ["run", "--config="], ["--state-directory", ""],
    ])
    func aMissingValueIsAUsageErrorNamingTheOption(arguments: [String]) async {
        let outcome = await Self.execute(arguments)
        let option = arguments.first { $0.hasPrefix("--") }!.split(separator: "=")[0]
        #expect(outcome.status == 64)
        #expect(outcome.standardError.contains("missing value for '\(option) <"), "\(outcome.standardError)")
    }

    @Test func equalsAndSeparateValuesMeanTheSame() throws {
        let separate = try DaemonInvocation.parse([
            "reload", "--pid", "42", "--runtime-directory", "/x", "--timeout", "2.5", "--signal", "SIGRTMIN+3",
        ])
        let equals = try DaemonInvocation.parse([
            "reload", "--pid=42", "--runtime-directory=/x", "--timeout=2.5", "--signal=SIGRTMIN+3",
        ])
        #expect(separate == equals)
        #expect(
            equals
                == .reload(
                    pid: 42,
                    runtimeDirectory: "/x",
                    timeout: 2.5,
                    signal: try #require(ProcessSignal(name: "SIGRTMIN+3"))
                )
        )
        // A value may start with a single dash or hold '='; the last of a repeated option wins.
        #expect(
            try DaemonInvocation.parse(["--config=a=b", "--state-directory", "-dir", "--config", "c"])
                == .run(config: "c", stateDirectory: "-dir", runtimeDirectory: nil, reloadSignal: .sighup)
        )
        #expect(
            try DaemonInvocation.parse([])
                == .run(config: nil, stateDirectory: nil, runtimeDirectory: nil, reloadSignal: .sighup)
        )
        #expect(try DaemonInvocation.parse(["status", "--json"]) == .status(runtimeDirectory: nil, json: true))
        // SIGUSR1 as the reload signal takes over from the user signal (ReloadSignal=SIGUSR1).
        #expect(
            try DaemonInvocation.parse(["run", "--reload-signal", "SIGUSR1"])
                == .run(config: nil, stateDirectory: nil, runtimeDirectory: nil, reloadSignal: .sigusr1)
        )
        #expect(try DaemonInvocation.parse(["check-config", "--", "--odd"]) == .checkConfig(file: "--odd"))
        #expect(
            try DaemonInvocation.parse(["reload", "--pid=-1"])
                == .reload(pid: -1, runtimeDirectory: nil, timeout: 90, signal: nil)
        )
    }

    @Test(arguments: [
        (["reload", "--pid", "12x"], "--pid: '12x' is not a process id"),
        (["reload", "--pid", "99999999999"], "--pid: '99999999999' is not a process id"),
        (["reload", "--timeout", "nan"], "--timeout: 'nan' is not a number of seconds"),
        (["reload", "--timeout", "0x10"], "--timeout: '0x10' is not a number of seconds"),
        (["reload", "--timeout", "1e1"], "--timeout: '1e1' is not a number of seconds"),
        (["reload", "--timeout", "."], "--timeout: '.' is not a number of seconds"),
        (["reload", "--signal", "SIGNOPE"], "--signal: 'SIGNOPE' is not a signal name"),
        (["run", "--reload-signal=HUP\u{1b}[2J"], "--reload-signal: 'HUP\\u{1b}[2J' is not a signal name"),
        (["status", "--json=yes"], "'--json' takes no value"),
        (["reload", "--signal", "9"], "--signal: '9' is not a signal name"),
        (["reload", "--signal", "TERM"], "--signal: SIGTERM stops the daemon; it cannot be the reload signal"),
        (["reload", "--signal", "3"], "--signal: SIGQUIT makes a process dump core; it cannot be the reload signal"),
        (["reload", "--signal", "ALRM"], "--signal: SIGALRM ends a process; it cannot be the reload signal"),
        (["run", "--reload-signal", "19"], "--reload-signal: '19' is not a signal name"),
        (["run", "--reload-signal", "32"], "--reload-signal: '32' is not a signal name"),
        (["run", "--reload-signal", "SIGTERM"], "--reload-signal: SIGTERM stops the daemon; it cannot be the reload"),
        (["run", "--reload-signal", "SIGTSTP"], "--reload-signal: SIGTSTP stops a process; it cannot be the reload"),
        (
            ["run", "--reload-signal", "SIGPIPE"],
            "--reload-signal: SIGPIPE is raised by the kernel on a write to a closed"
        ),
        (
            ["run", "--reload-signal", "CHLD"],
            "--reload-signal: SIGCHLD is raised by the kernel whenever a child process"
        ),
        (["reload", "--signal", "SIGCONT"], "--signal: SIGCONT is raised by the kernel whenever a stopped process"),
        (["reload", "--signal", "WINCH"], "--signal: SIGWINCH is raised by a terminal whenever it is resized"),
    ])
    func aBadValueIsAUsageErrorNamingTheOptionAndTheValue(arguments: [String], message: String) async {
        let outcome = await Self.execute(arguments)
        #expect(outcome.status == 64)
        #expect(outcome.standardError.hasPrefix("vigild: \(message)"), "\(outcome.standardError)")
    }

    @Test(arguments: [
        (["status", "extra"], "unexpected argument 'extra'"),
        (["check-config", "a.json", "b.json"], "unexpected argument 'b.json'"),
        (["reload", "now"], "unexpected argument 'now'"),
        (
            ["frobnicate"],
            "unexpected argument 'frobnicate' (commands: run, check-config, reload, status, systemd-unit, help)"
        ),
        (["help", "frobnicate"], "unknown command 'frobnicate' for help"),
        (["help", "run", "more"], "unexpected argument 'more'"),
    ])
    func extraArgumentsAreUsageErrors(arguments: [String], message: String) async {
        let outcome = await Self.execute(arguments)
        #expect(outcome.status == 64)
        #expect(outcome.standardError.hasPrefix("vigild: \(message)\n"), "\(outcome.standardError)")
    }

    // MARK: help and version

    @Test(arguments: [nil, "run", "check-config", "reload", "status", "systemd-unit"] as [String?])
    func everyCommandHasHelpListingItsOptions(command: String?) async {
        let forms: [[String]] =
            if let command {
                [[command, "--help"], [command, "-h"], ["help", command], [command, "--pid=1", "--help"]]
            } else {
                [["--help"], ["-h"], ["help"], ["help", "--help"]]
            }
        let expected = await Self.execute(forms[0])
        #expect(expected.status == 0)
        #expect(expected.standardError.isEmpty)
        for form in forms.dropFirst() where !(command != "reload" && form.contains("--pid=1")) {
            let outcome = await Self.execute(form)
            #expect(outcome.status == 0, "\(form)")
            #expect(outcome.standardOutput == expected.standardOutput, "\(form)")
        }
        let options: [String] =
            switch command {
            case nil, "run": ["--config", "--state-directory", "--runtime-directory", "--reload-signal"]
            case "reload": ["--pid", "--runtime-directory", "--timeout", "--signal"]
            case "status": ["--runtime-directory", "--json"]
            case "systemd-unit": ["--executable", "--socket"]
            default: []
            }
        let help = expected.standardOutput
        #expect(help.contains("USAGE: vigild " + (command.map { $0 + " " } ?? "")), "\(help)")
        for option in options + ["--version", "--help"] {
            #expect(help.contains("\n  " + option + " ") || help.contains("\n  -h, " + option), "\(option) in \(help)")
        }
        if command == nil {
            for name in ["run", "check-config", "reload", "status", "systemd-unit", "help <command>"] {
                #expect(help.contains("\n  \(name) "), "\(name) in \(help)")
            }
        }
        #expect(help.split(separator: "\n").allSatisfy { $0.count <= 80 }, "\(help)")
    }

    @Test(arguments: [["--version"], ["status", "--version"], ["reload", "--timeout=1", "--version"]])
    func versionPrintsTheVersion(arguments: [String]) async {
        let outcome = await Self.execute(arguments)
        #expect(outcome.status == 0)
        #expect(outcome.standardOutput == "9.8.7\n")
        #expect(outcome.standardError.isEmpty)
    }

    // MARK: a second daemon

    @Test func anotherDaemonGetsTheSameCommandsWithItsOwnName() async {
        let help = await Self.execute(["--help"], name: "hello-http")
        #expect(help.standardOutput.contains("USAGE: hello-http [<command>]"))
        #expect(help.standardOutput.contains("$CONFIGURATION_DIRECTORY/hello-http.json"))
        let words = help.standardOutput.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ")
        #expect(words.contains("/run/hello-http for root, $XDG_RUNTIME_DIR/hello-http for others"))
        #expect(!help.standardOutput.contains("vigild"), "\(help.standardOutput)")
        let reloadHelp = await Self.execute(["help", "reload"], name: "hello-http")
        #expect(reloadHelp.standardOutput.contains("hello-http reload --pid $MAINPID"))
        let usage = await Self.execute(["reload", "--nope"], name: "hello-http")
        #expect(usage.status == 64)
        #expect(
            usage.standardError.hasPrefix("hello-http: unknown option '--nope' for 'reload'\nUsage: hello-http reload ")
        )
    }

    @Test func anotherDaemonsDefaultDirectoriesCarryItsName() {
        let systemd = DaemonDirectories(
            name: "hello-http",
            environment: Self.environment([
                "CONFIGURATION_DIRECTORY": "/etc/hello-http", "STATE_DIRECTORY": "/var/lib/hello-http:/other",
                "RUNTIME_DIRECTORY": "/run/hello-http",
            ])
        )
        #expect(systemd.configurationSource(nil) == .file("/etc/hello-http/hello-http.json", required: false))
        #expect(systemd.configurationSource("/x.json") == .file("/x.json", required: true))
        #expect(systemd.state(nil) == "/var/lib/hello-http")
        #expect(systemd.runtime(nil) == .init(path: "/run/hello-http"))

        let root = DaemonDirectories(name: "hello-http", environment: Self.environment(["HOME": "/root"], uid: 0))
        #expect(root.configurationSource(nil) == .embeddedDefault)
        // One rule for the service and a run by hand (issue 23): root keeps state where a system
        // service does, whatever HOME says; before, root with HOME used ~/.local/state/<name>.
        #expect(root.state(nil) == "/var/lib/hello-http")
        let rootWithXDG = Self.environment(["HOME": "/root", "XDG_STATE_HOME": "/root/.state"], uid: 0)
        #expect(DaemonDirectories(name: "hello-http", environment: rootWithXDG).state(nil) == "/var/lib/hello-http")
        #expect(root.runtime(nil) == .init(path: "/run/hello-http"))

        let user = DaemonDirectories(
            name: "hello-http",
            environment: Self.environment(["XDG_RUNTIME_DIR": "/run/user/1000", "XDG_STATE_HOME": "/s"])
        )
        #expect(user.runtime(nil) == .init(path: "/run/user/1000/hello-http"))
        #expect(user.state(nil) == "/s/hello-http")
        let bare = DaemonDirectories(name: "hello-http", environment: Self.environment(uid: 1000))
        #expect(bare.runtime(nil) == .init(path: "/tmp/hello-http-1000", privateToCaller: true))
        // Before: no HOME meant /tmp/.local/state/<name>, a directory any local user could have
        // made (or linked elsewhere) first.
        #expect(bare.state(nil) == nil)
        #expect(bare.state("/explicit") == "/explicit")
        let relative = Self.environment(["HOME": "home", "XDG_STATE_HOME": ":"], uid: 1000)
        #expect(DaemonDirectories(name: "hello-http", environment: relative).state(nil) == nil)
        #expect(
            DaemonDirectories(name: "hello-http", environment: Self.environment(uid: 0)).state(nil)
                == "/var/lib/hello-http"
        )
    }

    /// Before: CONFIGURATION_DIRECTORY=":" (or a relative path) named no file, and the daemon
    /// ran on its embedded default without a word.
    @Test(arguments: [
        ("CONFIGURATION_DIRECTORY", ":"), ("CONFIGURATION_DIRECTORY", "etc/vigild"),
        ("STATE_DIRECTORY", "/var/lib/vigild:relative"), ("RUNTIME_DIRECTORY", "/run/vi\u{FFFD}gild"),
    ])
    func aSystemdDirectoryThatIsNotAnAbsolutePathFailsTheCommand(variable: String, value: String) async {
        let environment = Self.environment([variable: value])
        for (arguments, status) in [(["check-config"], Int32(1)), (["status"], 2), (["reload"], 2), (["run"], 1)] {
            let outcome = await Self.execute(arguments, environment: environment)
            #expect(outcome.status == status, "\(arguments)")
            #expect(outcome.standardError.hasPrefix("vigild: \(variable)="), "\(outcome.standardError)")
            #expect(outcome.standardError.contains("not an absolute path in UTF-8"))
        }
        #expect(await Self.execute(["--version"], environment: environment).status == 0)
    }

    @Test func runWithoutAStateDirectoryFailsBeforeBuildingTheDaemon() async {
        let outcome = await Self.execute(["run"], environment: Self.environment(uid: 1000))
        #expect(outcome.status == 1)
        #expect(
            outcome.standardError
                == "vigild: cannot start: no state directory: STATE_DIRECTORY, XDG_STATE_HOME and HOME are unset or "
                + "not absolute paths; pass --state-directory DIR, or set StateDirectory= in the unit\n"
        )
    }

    @Test func anotherDaemonsStatusAndCheckConfigUseItsName() async throws {
        var template = Array("/tmp/vigil-cli-XXXXXX".utf8CString)
        let directory = String(cString: mkdtemp(&template)!)
        defer {
            for name in ["status.json", "hello-http.json", "bad.json"] { unlink(directory + "/" + name) }
            rmdir(directory)
        }
        // Written by the library's writer, with the daemon's own key.
        let writer = RuntimeStatusWriter()
        writer.addKeys { HelloKeys(requests: 12) }
        writer.observe(.started(generation: 4, timeToReady: .milliseconds(3)))
        writer.use(try TrustedDirectory.open(directory))

        let text = await Self.execute(["status", "--runtime-directory", directory], name: "hello-http")
        #expect(text.status == 0, "\(text.standardError)")
        #expect(
            text.standardOutput.hasPrefix(
                "hello-http pid \(getpid()): running, configuration generation 4\n  last reload:    none\n  requests:       12\n  uptime:         "
            ),
            "\(text.standardOutput)"
        )
        let json = await Self.execute(["status", "--json", "--runtime-directory=\(directory)"], name: "hello-http")
        let parsed = try JSONParser.parse(Array(json.standardOutput.utf8))
        guard case .object(let members) = parsed.kind else {
            Issue.record("not an object: \(json.standardOutput)")
            return
        }
        #expect(
            members.map(\.key) == [
                "formatVersion", "pid", "processStartTime", "state", "generation", "startedAt", "daemon",
                "requests", "uptimeSeconds",
            ]
        )

        // No daemon: exit 2, naming the daemon and where it looked.
        let missing = await Self.execute(
            ["status"],
            name: "hello-http",
            environment: Self.environment(["RUNTIME_DIRECTORY": directory + "/none"])
        )
        #expect(missing.status == 2)
        #expect(missing.standardError == "hello-http status: no running hello-http found (no \(directory)/none)\n")

        TextFile.write(directory + "/hello-http.json", #"{"server": {"port": 8443}}"#)
        TextFile.write(directory + "/bad.json", #"{"server": {"port": 0}}"#)
        let environment = Self.environment(["CONFIGURATION_DIRECTORY": directory])
        let good = await Self.execute(["check-config"], name: "hello-http", environment: environment)
        #expect(good.status == 0)
        #expect(good.standardOutput == "\(directory)/hello-http.json: configuration is valid\n")
        let bad = await Self.execute(["check-config", directory + "/bad.json"], name: "hello-http")
        #expect(bad.status == 1)
        #expect(bad.standardError.hasPrefix("hello-http: \(directory)/bad.json"), "\(bad.standardError)")
        #expect(bad.standardError.contains("server.port"), "\(bad.standardError)")
        let none = await Self.execute(["check-config"], name: "hello-http")
        #expect(none.standardOutput.contains("hello-http would run with its embedded default"))
        // $CONFIGURATION_DIRECTORY without the file: `run` starts on the embedded default, so
        // check-config says so (it said "cannot read the file" and exited 1). A file named on
        // the command line must be there.
        #expect(mkdir(directory + "/none", 0o755) == 0)
        let empty = Self.environment(["CONFIGURATION_DIRECTORY": directory + "/none"])
        let absent = await Self.execute(["check-config"], name: "hello-http", environment: empty)
        #expect(absent.status == 0, "\(absent.standardError)")
        #expect(
            absent.standardOutput
                == "\(directory)/none/hello-http.json does not exist: hello-http would run with its embedded default.\n"
        )
        let named = await Self.execute(["check-config", directory + "/none/hello-http.json"], name: "hello-http")
        #expect(named.status == 1)
        #expect(named.standardError.contains("No such file or directory"), "\(named.standardError)")
    }
}

/// The runtime status file's format (version 2; version 1 still read).
/// The daemon's name becomes a unit, an executable's path and default directories: a name that
/// cannot be one is refused by every command (helper 54: "" made `/var/lib/` the state
/// directory, "../up" one outside it, "a b" an `ExecStart=` that runs `/usr/bin/a`).
@Suite struct DaemonNameTests {
    @Test(arguments: ["", "../up", "a b", ".hidden", "-x", "_x", "a/b", "é", String(repeating: "x", count: 65), "a\nb"])
    func aNameThatCannotNameADaemonIsRefused(_ name: String) async {
        let outcome = await DaemonCommandLineTests.execute(["systemd-unit"], name: name)
        #expect(outcome.status == 1)
        #expect(outcome.standardError.contains("cannot name a daemon"), "\(outcome.standardError)")
        #expect(outcome.standardOutput.isEmpty)
    }

    @Test(arguments: ["vigild", "hello-http", "kv", "my_daemon.v2", "A1", String(repeating: "x", count: 64)])
    func aNameThatCanIsTaken(_ name: String) async {
        #expect(DaemonCommandLine<SampleConfiguration>.nameProblem(name) == nil)
        let outcome = await DaemonCommandLineTests.execute(["--version"], name: name)
        #expect(outcome.status == 0)
    }
}

/// What `run` counts against RLIMIT_NOFILE beyond its own (a reviewer's findings).
@Suite struct DescriptorCountTests {
    /// Descriptors systemd passed (a `.socket` unit's, the descriptor store's) are needed, not
    /// stray: counted only when `LISTEN_PID` names this process.
    @Test func passedDescriptorsAreNeeded() {
        let mine = "\(getpid())"
        let base = DaemonCommandLine<SampleConfiguration>.descriptorsNeeded(
            environment: DaemonCommandLineTests.environment()
        )
        let passing = DaemonCommandLineTests.environment(["LISTEN_PID": mine, "LISTEN_FDS": "2"])
        #expect(DaemonCommandLine<SampleConfiguration>.descriptorsNeeded(environment: passing) == base + 2)
        let another = DaemonCommandLineTests.environment(["LISTEN_PID": "1", "LISTEN_FDS": "2"])
        #expect(DaemonCommandLine<SampleConfiguration>.descriptorsNeeded(environment: another) == base)
        let garbled = DaemonCommandLineTests.environment(["LISTEN_PID": mine, "LISTEN_FDS": "2x"])
        #expect(DaemonCommandLine<SampleConfiguration>.descriptorsNeeded(environment: garbled) == base)
    }

    /// Listing the open descriptors takes one: when none is free, that is the shortage (it
    /// passed the check, and the start failed halfway with EMFILE).
    @Test func noDescriptorFreeToListThemIsAShortage() {
        let shortage = DaemonCommandLine<SampleConfiguration>.descriptorShortage(
            environment: DaemonCommandLineTests.environment(),
            open: { () throws(SystemError) -> [Int32] in
                throw SystemError(path: "/proc/self/fd", operation: "list", errno: EMFILE)
            }
        )
        #expect(shortage?.contains("every one is open already") == true, "\(shortage ?? "nil")")
        let unreadable = DaemonCommandLine<SampleConfiguration>.descriptorShortage(
            environment: DaemonCommandLineTests.environment(),
            open: { () throws(SystemError) -> [Int32] in
                throw SystemError(path: "/proc/self/fd", operation: "list", errno: ENOENT)
            }
        )
        #expect(unreadable == nil, "no /proc: nothing known, nothing said")
    }
}

@Suite struct RuntimeStatusFormatTests {
    /// The reload signal is written after `startedAt`, read back, and chooses what `reload`
    /// sends; a file without it (written before it existed) means SIGHUP.
    @Test func theReloadSignalIsRecordedAndChoosesWhatReloadSends() throws {
        var status = RuntimeStatus(
            pid: 42,
            processStartTime: 7,
            state: "running",
            generation: 1,
            lastReload: nil,
            startedAt: 100,
            previousShutdownClean: nil
        )
        #expect(try ReloadClient.signal(nil, for: status, target: 42, file: "f") == .sighup)
        #expect(try ReloadClient.signal(.sigusr2, for: status, target: 42, file: "f") == .sigusr2)
        status.reloadSignal = "SIGRTMIN+3"
        let text = JSONWriter.write(status.document())
        guard case .object(let members) = try JSONParser.parse(Array(text.utf8)).kind else {
            Issue.record("not an object: \(text)")
            return
        }
        #expect(
            members.map(\.key) == [
                "formatVersion", "pid", "processStartTime", "state", "generation", "startedAt", "reloadSignal",
                "daemon",
            ]
        )
        let parsed = try RuntimeStatus.parse(Array(text.utf8))
        #expect(parsed.reloadSignal == "SIGRTMIN+3")
        let rtmin3 = try #require(ProcessSignal(name: "SIGRTMIN+3"))
        #expect(try ReloadClient.signal(nil, for: parsed, target: 42, file: "f") == rtmin3)
        #expect(try ReloadClient.signal(rtmin3, for: parsed, target: 42, file: "f") == rtmin3)
        #expect {
            try ReloadClient.signal(.sighup, for: parsed, target: 42, file: "f")
        } throws: {
            "\($0)".contains("pid 42 reloads on SIGRTMIN+3 (f says so), not on SIGHUP")
                && "\($0)".contains("pass --signal SIGRTMIN+3")
        }
        // A forged file names what no reload may send: refused, not sent; `--signal` says what
        // to send instead.
        for forged in ["SIGTERM", "SIGKILL", "9", "bogus\u{1b}[2J", ""] {
            status.reloadSignal = forged
            #expect {
                try ReloadClient.signal(nil, for: status, target: 42, file: "f")
            } throws: { "\($0)".contains("as the reload signal, which cannot be one") && !"\($0)".contains("\u{1b}") }
            #expect(try ReloadClient.signal(.sigusr2, for: status, target: 42, file: "f") == .sigusr2)
        }
        // Not a string: `status` still reads the file; `reload` refuses the value.
        let numbered = try RuntimeStatus.parse(Array(text.replacing(#""SIGRTMIN+3""#, with: "5").utf8))
        #expect(numbered.reloadSignal == "5")
        // A version 1 file's `reloadSignal` is one of the daemon's keys, not the library's.
        let one =
            #"{"formatVersion": 1, "pid": 42, "state": "running", "generation": 1, "startedAt": 1, "reloadSignal": 5, "queue": 3}"#
        let parsedOne = try RuntimeStatus.parse(Array(one.utf8))
        #expect(parsedOne.reloadSignal == nil)
        #expect(parsedOne.daemonMembers.map(\.key) == ["reloadSignal", "queue"])
        #expect(try ReloadClient.signal(nil, for: parsedOne, target: 42, file: "f") == .sighup)
    }

    @Test func theFileCarriesFormatVersion1AndTheDaemonsKeysAfterTheLibrarys() throws {
        var status = RuntimeStatus(
            pid: 42,
            processStartTime: 7,
            state: "running",
            generation: 2,
            lastReload: .init(result: "rejected", reason: "bad", beganMonotonicUsec: 5),
            startedAt: 100,
            previousShutdownClean: false
        )
        let text =
            #"{"formatVersion": 1, "pid": 42, "processStartTime": 7, "state": "running", "generation": 2, "lastReload": {"result": "rejected", "reason": "bad", "beganMonotonicUsec": 5}, "startedAt": 100, "previousShutdownClean": false, "heartbeats": 3, "heartbeat": {"interval": 1, "message": "hi"}}"#
        let parsed = try RuntimeStatus.parse(Array(text.utf8))
        struct Own: Decodable, Equatable {
            var heartbeats: Int
        }
        #expect(try parsed.decode(Own.self) == Own(heartbeats: 3))
        status.daemonMembers = parsed.daemonMembers
        #expect(parsed == status)
        #expect(parsed.daemonMembers.map(\.key) == ["heartbeats", "heartbeat"])
        // A file from before formatVersion reads as version 1; a newer one is refused.
        let old = try RuntimeStatus.parse(Array(text.replacing(#""formatVersion": 1, "#, with: "").utf8))
        #expect(JSONWriter.write(old.document()) == JSONWriter.write(parsed.document()))
        #expect {
            try RuntimeStatus.parse(Array(text.replacing(#""formatVersion": 1"#, with: #""formatVersion": 3"#).utf8))
        } throws: { "\($0)".contains("format version 3, this client reads versions 1 to 2") }
        // Version 2: the daemon's keys under `daemon`, where a library key's name is theirs.
        let two =
            #"{"formatVersion": 2, "pid": 42, "processStartTime": 7, "state": "running", "generation": 2, "startedAt": 100, "daemon": {"pid": "theirs", "heartbeats": 3}}"#
        let parsedTwo = try RuntimeStatus.parse(Array(two.utf8))
        #expect(parsedTwo.pid == 42 && parsedTwo.previousShutdownClean == nil)
        #expect(parsedTwo.daemonMembers.map(\.key) == ["pid", "heartbeats"])
        #expect(try parsedTwo.decode(Own.self) == Own(heartbeats: 3))
        #expect(throws: RuntimeStatusFormatError.self) {
            try RuntimeStatus.parse(Array(two.replacing(#"{"pid": "theirs", "heartbeats": 3}"#, with: "[]").utf8))
        }
    }

    @Test func aForgedStartTimeCannotOverflowTheUptime() {
        for startedAt in [Int64.min, Int64.max, -1] {
            let status = RuntimeStatus(
                pid: 2,
                processStartTime: nil,
                state: "running",
                generation: 1,
                lastReload: nil,
                startedAt: startedAt,
                previousShutdownClean: true
            )
            _ = status.uptimeSeconds  // traps before the fix for Int64.min
        }
        #expect(
            RuntimeStatus(
                pid: 2,
                processStartTime: nil,
                state: "",
                generation: 1,
                lastReload: nil,
                startedAt: .min,
                previousShutdownClean: true
            ).uptimeSeconds == .max
        )
    }
}

/// The README's "Your daemon's command line" example, compiled (never run: `main` exits).
enum ReadmeCommandLineExample {
    struct Worker: Listener {
        let name = "worker"
        let dependencies = ["configuration"]
    }

    static func main() {
        let commandLine = DaemonCommandLine(
            name: "mydaemon",
            version: "1.0",
            abstract: "Does my work.",
            configuration: SampleConfiguration.self
        )
        EventLoopExecutor.run {
            await commandLine.main { options in
                let config = ConfigurationListener<SampleConfiguration>(source: options.configurationSource)
                let state = PersistenceListener<SampleConfiguration>(
                    path: options.stateFile,
                    checkpointInterval: { _ in .seconds(30) }
                )
                return Daemon(
                    identifier: options.name,
                    version: options.version,
                    listeners: [config, state, Worker()],
                    logging: options.logging
                )
            }
        }
    }
}

/// Issue 21 item 12: every value echoed from the environment or the command line is cut
/// short. Before, a 128 KiB CONFIGURATION_DIRECTORY gave a 393 KB error message.
@Suite struct EchoBoundTests {
    static let huge = "/" + String(repeating: "a", count: 128 << 10)

    @Test(arguments: ["CONFIGURATION_DIRECTORY", "STATE_DIRECTORY", "RUNTIME_DIRECTORY"])
    func aHugeSystemdDirectoryGivesAShortMessage(variable: String) async {
        let environment = DaemonCommandLineTests.environment([variable: Self.huge])
        for (arguments, status) in [(["check-config"], Int32(1)), (["status"], 2), (["reload"], 2), (["run"], 1)] {
            let outcome = await DaemonCommandLineTests.execute(arguments, environment: environment)
            #expect(outcome.status == status)
            #expect(outcome.standardError.utf8.count < 400, "\(arguments): \(outcome.standardError.utf8.count) bytes")
            #expect(outcome.standardError.contains("a path of 131073 bytes, longer than the 4095"))
        }
    }

    @Test(arguments: [
        ["run", "--config", huge], ["run", "--state-directory", huge], ["status", "--runtime-directory=" + huge],
        ["reload", "--runtime-directory", huge], ["check-config", huge], ["run", "--reload-signal", huge],
        ["reload", "--pid", huge], [huge],
    ])
    func aHugeArgumentGivesAShortUsageError(arguments: [String]) async {
        let outcome = await DaemonCommandLineTests.execute(arguments)
        #expect(outcome.status == 64)
        #expect(outcome.standardError.utf8.count < 600, "\(outcome.standardError.utf8.count) bytes")
        #expect(outcome.standardError.contains("… (131073 bytes)"), "\(outcome.standardError.prefix(300))")
    }

    @Test func aHugePathInASystemErrorIsCut() {
        let error = SystemError(path: Self.huge, operation: "create directory", errno: ENAMETOOLONG)
        #expect(error.description.utf8.count < 400)
        #expect(error.description.hasSuffix("… (131073 bytes): File name too long"))
    }

    /// Issue 23 item 5: the help names what the daemon keeps, and the one rule for both.
    @Test func theStateDirectorysHelpSaysWhatIsKeptAndWhere() {
        let keeps = DaemonCommandLine(
            name: "jobd",
            version: "1",
            abstract: "Jobs.",
            configuration: SampleConfiguration.self,
            stateContents: "jobs.sqlite, the queue"
        )
        let help = keeps.help(.run).replacing("\n", with: " ").split(separator: " ").joined(separator: " ")
        #expect(help.contains("Where jobd keeps its state (jobs.sqlite, the queue)"), "\(help)")
        #expect(help.contains("else /var/lib/jobd for root, $XDG_STATE_HOME/jobd or ~/.local/state/jobd for others"))
        #expect(!help.contains("state.json"))
        let none = DaemonCommandLine(
            name: "jobd",
            version: "1",
            abstract: "Jobs.",
            configuration: SampleConfiguration.self
        )
        #expect(none.help(.run).contains("The state directory, if jobd keeps state;"))
    }

    /// `status` and `reload` read the runtime directory: their help does not say it is created
    /// and locked, as `run`'s does.
    @Test func theClientsHelpSaysTheyReadTheRuntimeDirectory() {
        let commandLine = DaemonCommandLine(
            name: "jobd",
            version: "1",
            abstract: "Jobs.",
            configuration: SampleConfiguration.self
        )
        func flat(_ text: String) -> String {
            text.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ")
        }
        for command in [DaemonInvocation.Command.status, .reload] {
            let help = flat(commandLine.help(command))
            #expect(
                help.contains(
                    "--runtime-directory <dir> The running jobd's runtime directory, where its status.json is"
                ),
                "\(help)"
            )
            #expect(!help.contains("locked against"), "\(help)")
        }
        #expect(
            flat(commandLine.help(.run)).contains(
                "Where status.json lives, on tmpfs or a local disk (not FUSE, NFS or another file system that can hang); created if missing and locked against a second jobd"
            )
        )
    }
}

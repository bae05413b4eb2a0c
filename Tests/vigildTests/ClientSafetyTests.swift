import Glibc
import Testing
import Vigil
import VigilPersistence
import VigilTesting

/// `vigild reload` and `vigild status` against hostile runtime directories, forged status
/// files and bad arguments: real client processes, real signals, a real `sleep` as the process
/// an attacker wants signalled (issue 10, items 14–16).
@Suite(.serialized) struct ClientSafetyTests {
    /// An unprivileged uid with no account here: the client runs as it through `setpriv`. One
    /// per test process (60000–64999), so that runs side by side on one machine (other
    /// checkouts, CI jobs) never share its `/tmp/vigild-<uid>`: a fixed 64999 let one run plant
    /// and remove the directory under another's checks.
    static let otherUID: uid_t = 60_000 + uid_t(getpid() % 5_000)

    struct Outcome {
        var status: Int32
        var output: String
    }

    /// Runs the client to completion; `user` runs it as that uid (and gid) via `setpriv`.
    static func client(
        _ arguments: [String],
        environment: [String: String] = [:],
        unset: [String] = ["RUNTIME_DIRECTORY", "XDG_RUNTIME_DIR"],
        user: uid_t? = nil
    ) async throws -> Outcome {
        let output = VigildBinary.temporaryDirectory() + "/client.log"
        var command = ["/usr/bin/env"] + unset.flatMap { ["-u", $0] }
        command += environment.map { "\($0.key)=\($0.value)" }
        if let user {
            command += ["setpriv", "--reuid=\(user)", "--regid=\(user)", "--clear-groups"]
        }
        command += [VigildBinary.path] + arguments
        let process = try DaemonProcess(
            executable: command[0],
            arguments: Array(command.dropFirst()),
            outputPath: output
        )
        let status = try await process.waitForExit()
        return Outcome(status: status, output: TextFile.read(output) ?? "")
    }

    /// A process an attacker would like signalled: `sleep`, as `user` when given; with
    /// `ignoringHangup` it survives SIGHUP (a stand-in daemon that never answers by itself).
    static func victim(user: uid_t? = nil, ignoringHangup: Bool = false) throws -> DaemonProcess {
        var command: [String] = []
        if let user { command += ["/usr/bin/setpriv", "--reuid=\(user)", "--regid=\(user)", "--clear-groups"] }
        command += ["/bin/sh", "-c", (ignoringHangup ? "trap '' HUP; " : "") + "exec sleep 300"]
        return try DaemonProcess(executable: command[0], arguments: Array(command.dropFirst()))
    }

    /// Field 22 of /proc/<pid>/stat, read independently of the code under test.
    static func startTime(_ pid: Int32) throws -> UInt64 {
        let text = try #require(TextFile.read("/proc/\(pid)/stat"))
        let afterName = text[text.index(after: try #require(text.lastIndex(of: ")")))...]
        return try #require(UInt64(afterName.split(separator: " ")[19]))
    }

    static func statusJSON(
        pid: Int32,
        startTime: UInt64?,
        state: String = "running",
        lastReload: String = "null",
        message: String = "alive",
        startedAt: Int64 = Int64(time(nil))
    ) -> String {
        """
        {"pid": \(pid), \(startTime.map { "\"processStartTime\": \($0), " } ?? "")"state": "\(state)", \
        "generation": 3, "lastReload": \(lastReload), "heartbeats": 7, \
        "heartbeat": {"interval": 1, "message": "\(message)"}, "startedAt": \(startedAt), \
        "previousShutdownClean": true}
        """
    }

    /// Creates `path` with `mode`, owned by `owner`, holding a status file (owned by `owner`
    /// too) that names `pid`.
    static func plant(_ path: String, owner: uid_t, mode: mode_t = 0o755, status: String) {
        mkdir(path, mode)
        chmod(path, mode)
        TextFile.write(path + "/status.json", status)
        chown(path + "/status.json", owner, owner)
        chown(path, owner, owner)
    }

    static func stop(_ process: DaemonProcess) async throws {
        process.send(SIGKILL)
        _ = try await process.waitForExit()
    }

    /// A daemon killed while its parent does not reap it (a script, a test harness; systemd
    /// reaps at once) stays a zombie: its pid and start time still match the status file and
    /// `kill(pid, 0)` succeeds, but it is not running. `status` and `reload` say so (exit 2),
    /// instead of "running" and a reload that waits for its whole timeout.
    @Test func aKilledDaemonItsParentHasNotReapedIsNotRunning() async throws {
        let sleeper = try Self.victim()
        let started = try Self.startTime(sleeper.pid)
        #expect(ProcessStartTime.hasExited(sleeper.pid) == false)
        try await Self.stop(sleeper)
        // Observed with WNOWAIT: the child stays a zombie while `sleeper` lives.
        #expect(kill(sleeper.pid, 0) == 0 && ProcessStartTime.hasExited(sleeper.pid))
        let runtime = VigildBinary.temporaryDirectory() + "/run"
        Self.plant(runtime, owner: 0, mode: 0o700, status: Self.statusJSON(pid: sleeper.pid, startTime: started))
        let status = try await Self.client(["status", "--runtime-directory", runtime])
        #expect(status.status == 2, "\(status.output)")
        #expect(
            status.output.contains(
                "describes pid \(sleeper.pid), which is no longer running (it was killed or crashed while \"running\"; its parent has not reaped it yet)"
            ),
            "\(status.output)"
        )
        let began = ContinuousClock.now
        let reload = try await Self.client(["reload", "--timeout", "20", "--runtime-directory", runtime])
        #expect(reload.status == 2, "\(reload.output)")
        #expect(
            reload.output.contains(
                "pid \(sleeper.pid) named in \(runtime)/status.json is not running (it exited; its parent has not reaped it yet)"
            ),
            "\(reload.output)"
        )
        #expect(ContinuousClock.now - began < .seconds(20), "the reload did not wait for its timeout")
        withExtendedLifetime(sleeper) {}
    }

    /// The state letter is field 3, counted from the last `)`: a name may hold `) Z (` itself.
    /// Before: `reload` sent SIGHUP whatever the daemon reloaded on, so with `--reload-signal`
    /// the daemon discarded it and `reload` (`systemctl reload` through the unit's ExecReload=)
    /// waited out its timeout and exited 2. Now the status file names the signal, `reload`
    /// sends it, and a `--signal` the daemon would not answer is refused at once.
    @Test func reloadSendsTheSignalTheDaemonReloadsOn() async throws {
        let socket = try FakeNotifySocket()
        let (daemon, directory) = try await VigildBinary.start(
            socket: socket,
            arguments: ["--reload-signal", "SIGRTMIN+3"]
        )
        let runtime = directory + "/run"
        #expect(TextFile.read(runtime + "/status.json")?.contains(#""reloadSignal": "SIGRTMIN+3""#) == true)
        let reload = try await Self.client(["reload", "--timeout", "20", "--runtime-directory", runtime])
        #expect(reload.status == 0, "\(reload.output)")
        #expect(reload.output.contains("reload applied; configuration generation 2"), "\(reload.output)")
        let began = ContinuousClock.now
        let wrong = try await Self.client([
            "reload", "--timeout", "20", "--runtime-directory", runtime, "--signal", "SIGHUP",
        ])
        #expect(wrong.status == 2, "\(wrong.output)")
        #expect(wrong.output.contains("reloads on SIGRTMIN+3"), "\(wrong.output)")
        #expect(ContinuousClock.now - began < .seconds(20), "the refused reload waited for its timeout")
        let explicit = try await Self.client([
            "reload", "--timeout", "20", "--runtime-directory", runtime, "--signal", "SIGRTMIN+3",
        ])
        #expect(explicit.status == 0, "\(explicit.output)")
        #expect(explicit.output.contains("configuration generation 3"), "\(explicit.output)")
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
    }

    @Test func theStateLetterIsReadAfterTheLastParenthesis() {
        #expect(ProcessStartTime.state(statLine: Array("42 (a) Z (b) S 1 42 42 0".utf8)) == UInt8(ascii: "S"))
        #expect(ProcessStartTime.state(statLine: Array("42 (sh) Z 1 42".utf8)) == UInt8(ascii: "Z"))
        #expect(ProcessStartTime.state(statLine: Array("42 (sh".utf8)) == nil)
    }

    // MARK: item 14: untrusted runtime directories

    @Test(.enabled(if: getuid() == 0, "planting another uid's directory needs root"))
    func aDirectoryOwnedByAnotherUserInTmpIsRefusedAndItsPidNotSignalled() async throws {
        let sleeper = try Self.victim()
        let planted = VigildBinary.temporaryDirectory() + "/run"
        // Everything valid except who owns the directory: even the start time matches.
        Self.plant(
            planted,
            owner: 65_534,
            status: Self.statusJSON(pid: sleeper.pid, startTime: try Self.startTime(sleeper.pid))
        )
        for command in [["reload"], ["status"], ["status", "--json"]] {
            let outcome = try await Self.client(command + ["--runtime-directory", planted])
            #expect(outcome.status == 2, "\(command): \(outcome.output)")
            #expect(
                outcome.output.contains(
                    "cannot use \(planted): it is owned by uid 65534, not by you or root, and its parent /tmp is writable by group or others (mode 1777)"
                ),
                "\(outcome.output)"
            )
        }
        #expect(sleeper.exitStatus == nil && kill(sleeper.pid, 0) == 0, "the planted pid was not signalled")
        try await Self.stop(sleeper)
    }

    @Test(.enabled(if: getuid() == 0, "running the client as another uid needs root"))
    func theDefaultTmpDirectoryIsUsedOnlyWhenTheCallersOwnWithMode0700() async throws {
        let uid = Self.otherUID
        let sleeper = try Self.victim(user: uid)
        let status = Self.statusJSON(pid: sleeper.pid, startTime: try Self.startTime(sleeper.pid))
        let path = "/tmp/vigild-\(uid)"
        rmdirTree(path)
        defer { rmdirTree(path) }
        // Without $XDG_RUNTIME_DIR the last resort is /tmp/vigild-<uid>: planted by someone else…
        Self.plant(path, owner: 65_534, mode: 0o700, status: status)
        var outcome = try await Self.client(["reload"], user: uid)
        #expect(outcome.status == 2)
        #expect(outcome.output.contains("cannot use \(path): it is owned by uid 65534, not by you (uid \(uid))"))
        // …or the caller's but open to others…
        Self.plant(path, owner: uid, mode: 0o755, status: status)
        outcome = try await Self.client(["reload"], user: uid)
        #expect(outcome.status == 2)
        #expect(outcome.output.contains("cannot use \(path): it has mode 0755, not 0700"), "\(outcome.output)")
        #expect(sleeper.exitStatus == nil && kill(sleeper.pid, 0) == 0, "the planted pid was not signalled")
        // …and only the caller's own 0700 directory is read.
        chmod(path, 0o700)
        outcome = try await Self.client(["status"], user: uid)
        #expect(outcome.status == 0, "\(outcome.output)")
        #expect(outcome.output.contains("vigild pid \(sleeper.pid): running, configuration generation 3"))
        try await Self.stop(sleeper)
    }

    @Test(.enabled(if: getuid() == 0, "the root default needs root"))
    func rootNeverReadsTmpOrXDGRuntimeDirByDefault() async throws {
        let sleeper = try Self.victim()
        let xdg = VigildBinary.temporaryDirectory()
        let status = Self.statusJSON(pid: sleeper.pid, startTime: try Self.startTime(sleeper.pid))
        Self.plant(xdg + "/vigild", owner: 0, mode: 0o700, status: status)
        // `sudo vigild reload` keeps no $RUNTIME_DIRECTORY; root's default is /run/vigild only.
        let outcome = try await Self.client(
            ["reload"],
            environment: ["XDG_RUNTIME_DIR": xdg],
            unset: ["RUNTIME_DIRECTORY"]
        )
        #expect(outcome.status == 2)
        // /run/vigild may hold the status of an earlier, stopped vigild (`sudo swift run vigild`
        // on this machine), whose pid may since name another process: either way the client
        // looked there and nowhere else.
        #expect(
            outcome.output.contains("no running vigild found")
                || outcome.output.contains("named in /run/vigild/status.json is not running")
                || outcome.output.contains("but the vigild that /run/vigild/status.json describes started at"),
            "\(outcome.output)"
        )
        #expect(!outcome.output.contains(xdg), "\(outcome.output)")
        #expect(sleeper.exitStatus == nil && kill(sleeper.pid, 0) == 0)
        try await Self.stop(sleeper)
    }

    @Test func aSymlinkPlantedAtTheTemporaryStatusFileIsNotWrittenThrough() async throws {
        let directory = VigildBinary.temporaryDirectory()
        let runtime = directory + "/run"
        mkdir(runtime, 0o700)
        let victim = directory + "/victim"
        TextFile.write(victim, "precious\n")
        chmod(victim, 0o600)
        symlink(victim, runtime + "/status.json.tmp")
        let socket = try FakeNotifySocket()
        let daemon = try DaemonProcess(
            executable: VigildBinary.path,
            arguments: ["run", "--state-directory", directory + "/state", "--runtime-directory", runtime],
            environment: ["NOTIFY_SOCKET": socket.path],
            outputPath: directory + "/output.log"
        )
        try await socket.datagrams.wait("READY=1") { $0.contains { $0.lines.contains("READY=1") } }
        let reload = try await Self.client(["reload", "--runtime-directory", runtime])
        #expect(reload.status == 0, "\(reload.output)")
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
        #expect(TextFile.read(victim) == "precious\n", "the symlink's target was not written")
        var info = stat()
        #expect(lstat(runtime + "/status.json", &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG)
        #expect(TextFile.read(runtime + "/status.json")?.contains("\"generation\": 2") == true)
    }

    @Test(.enabled(if: getuid() == 0, "planting another uid's directory needs root"))
    func theDaemonRefusesToStartInAnUntrustedRuntimeDirectory() async throws {
        let directory = VigildBinary.temporaryDirectory()
        chmod(directory, 0o1777)
        let runtime = directory + "/run"
        mkdir(runtime, 0o755)
        chown(runtime, 65_534, 65_534)
        let daemon = try DaemonProcess(
            executable: VigildBinary.path,
            arguments: ["run", "--state-directory", directory + "/state", "--runtime-directory", runtime],
            outputPath: directory + "/output.log"
        )
        #expect(try await daemon.waitForExit() != 0)
        let output = TextFile.read(directory + "/output.log") ?? ""
        #expect(output.contains("cannot use \(runtime): it is owned by uid 65534, not by you or root"), "\(output)")
        #expect(!FileSystem.exists(runtime + "/status.json"))
    }

    /// With `heartbeat.interval` 0 there is no heartbeat: `status` says "off", not "every 0.0 s"
    /// (an attacker's note: it reported a schedule that does not exist).
    @Test func statusSaysTheHeartbeatIsOffWhenItIs() async throws {
        let socket = try FakeNotifySocket()
        let directory = VigildBinary.temporaryDirectory()
        TextFile.write(directory + "/off.json", #"{ "heartbeat": { "interval": 0 } }"#)
        let (daemon, _) = try await VigildBinary.start(
            socket: socket,
            arguments: ["--config", directory + "/off.json"],
            directory: directory
        )
        let status = try await Self.client(["status", "--runtime-directory", directory + "/run"])
        #expect(status.status == 0)
        #expect(status.output.contains("  heartbeats:     0 (off)\n"), "\(status.output)")
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
    }

    // MARK: item 15: prove the pid is the daemon's

    @Test func reloadSignalsOnlyTheDaemonTheStatusFileDescribes() async throws {
        let socket = try FakeNotifySocket()
        let (daemon, directory) = try await VigildBinary.start(socket: socket)
        let runtime = directory + "/run"
        let sleeper = try Self.victim()
        // --pid of a process that is not the daemon, and pids that signal groups or everything.
        for pid in ["\(sleeper.pid)", "1", "0", "-1"] {
            let outcome = try await Self.client(["reload", "--runtime-directory", runtime, "--pid=\(pid)"])
            #expect(outcome.status == 2, "--pid=\(pid): \(outcome.output)")
            #expect(outcome.output.contains("refusing to signal pid \(pid)"), "\(outcome.output)")
        }
        #expect(sleeper.exitStatus == nil && kill(sleeper.pid, 0) == 0, "the sleep was not signalled")
        let datagrams = socket.datagrams.values
        #expect(!datagrams.contains { $0.lines.contains("RELOADING=1") }, "the daemon was not reloaded either")

        // The daemon records its own start time; a correct --pid works.
        let status = try #require(TextFile.read(runtime + "/status.json"))
        #expect(status.contains("\"processStartTime\": \(try Self.startTime(daemon.pid))"), "\(status)")
        let good = try await Self.client(["reload", "--runtime-directory", runtime, "--pid", "\(daemon.pid)"])
        #expect(good.status == 0, "\(good.output)")
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
        try await Self.stop(sleeper)
    }

    @Test func aForgedStatusFileNamingAnotherProcessIsRefused() async throws {
        let runtime = VigildBinary.temporaryDirectory()
        let sleeper = try Self.victim()
        let actual = try Self.startTime(sleeper.pid)
        for (forged, reason) in [
            (Self.statusJSON(pid: sleeper.pid, startTime: actual + 1), "it started at tick \(actual)"),
            (Self.statusJSON(pid: sleeper.pid, startTime: nil), "does not record the daemon's start time"),
            (Self.statusJSON(pid: -1, startTime: actual), "refusing to signal pid -1"),
            (Self.statusJSON(pid: 0, startTime: actual), "refusing to signal pid 0"),
        ] {
            TextFile.write(runtime + "/status.json", forged)
            let outcome = try await Self.client(["reload", "--runtime-directory", runtime])
            #expect(outcome.status == 2, "\(outcome.output)")
            #expect(outcome.output.contains(reason), "\(outcome.output)")
        }
        #expect(sleeper.exitStatus == nil && kill(sleeper.pid, 0) == 0, "the sleep was not signalled")
        try await Self.stop(sleeper)
    }

    /// Before: a directory of another user's under a root-owned parent (a `DynamicUser=`
    /// unit's `/run/<name>`) is trusted, and its owner could name any process there, with the
    /// start time copied from /proc: root's `reload` signalled it.
    @Test(.enabled(if: getuid() == 0, "planting another uid's directory needs root"))
    func aStatusFileNamingAProcessOfAnotherUserIsRefused() async throws {
        let parent = "/run/vigil-test-\(getpid())"
        mkdir(parent, 0o755)
        let planted = parent + "/vigild"
        defer {
            rmdirTree(planted)
            rmdir(parent)
        }
        let sleeper = try Self.victim()
        Self.plant(
            planted,
            owner: 65_534,
            status: Self.statusJSON(pid: sleeper.pid, startTime: try Self.startTime(sleeper.pid))
        )
        let outcome = try await Self.client(["reload", "--runtime-directory", planted, "--timeout", "1"])
        #expect(outcome.status == 2, "\(outcome.output)")
        #expect(
            outcome.output.contains(
                "refusing to signal pid \(sleeper.pid): it runs as uid 0, but \(planted)/status.json is in a directory of uid 65534"
            ),
            "\(outcome.output)"
        )
        #expect(sleeper.exitStatus == nil && kill(sleeper.pid, 0) == 0, "the root process was not signalled")
        try await Self.stop(sleeper)
    }

    @Test func badTimeoutsAreUsageErrors() async throws {
        let runtime = VigildBinary.temporaryDirectory()
        let sleeper = try Self.victim()
        TextFile.write(
            runtime + "/status.json",
            Self.statusJSON(pid: sleeper.pid, startTime: try Self.startTime(sleeper.pid))
        )
        for timeout in ["-1", "nan", "inf", "-inf", "1e300", "0", "1e-7", "0.009", "86401", "soon"] {
            let outcome = try await Self.client(["reload", "--runtime-directory", runtime, "--timeout=\(timeout)"])
            // 64 (EX_USAGE): the library's status for a usage error, as swift-argument-parser's.
            #expect(outcome.status == 64, "--timeout=\(timeout): \(outcome.output)")
            #expect(outcome.output.contains("--timeout"), "\(outcome.output)")
        }
        #expect(sleeper.exitStatus == nil && kill(sleeper.pid, 0) == 0, "no signal was sent")
        try await Self.stop(sleeper)
    }

    // MARK: item 16: control characters from files are escaped

    @Test func controlCharactersFromTheStatusFileAreEscapedInReloadAndStatus() async throws {
        let runtime = VigildBinary.temporaryDirectory()
        // A stand-in daemon that survives the SIGHUP; its "answer" is already in the file, dated
        // far in the future so it counts as the answer to this reload.
        let standIn = try Self.victim(ignoringHangup: true)
        let forged = #"x\n<0>sshd[1]: FORGED\u001b[31m\u009b\t\u007f"#
        let reload = #"{"result": "rejected", "reason": "\#(forged)", "beganMonotonicUsec": 9223372036854775807}"#
        TextFile.write(
            runtime + "/status.json",
            Self.statusJSON(
                pid: standIn.pid,
                startTime: try Self.startTime(standIn.pid),
                lastReload: reload,
                message: forged
            )
        )
        let escaped = #"x\n<0>sshd[1]: FORGED\u{1b}[31m\u{9b}\t\u{7f}"#
        let rejected = try await Self.client(["reload", "--runtime-directory", runtime])
        #expect(rejected.status == 1)
        #expect(rejected.output == "vigild: reload rejected: \(escaped); still running generation 3\n")

        let text = try await Self.client(["status", "--runtime-directory", runtime])
        #expect(text.status == 0)
        #expect(text.output.split(separator: "\n").count == 5, "\(text.output)")
        #expect(text.output.contains("  last reload:    rejected: \(escaped)\n"))
        #expect(text.output.contains("(every 1.0 s: \"\(escaped)\")"))
        #expect(
            !text.output.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" || (0x7f...0x9f).contains($0.value) }
        )

        // --json stays valid JSON and carries the exact text.
        let json = try await Self.client(["status", "--runtime-directory", runtime, "--json"])
        #expect(json.status == 0)
        let parsed = try JSONParser.parse(Array(json.output.utf8))
        guard case .object(let members) = parsed.kind,
            case .object(let heartbeat)? = members.first(where: { $0.key == "heartbeat" })?.value.kind,
            case .string(let message)? = heartbeat.first(where: { $0.key == "message" })?.value.kind
        else {
            Issue.record("unexpected JSON: \(json.output)")
            return
        }
        #expect(message == "x\n<0>sshd[1]: FORGED\u{1b}[31m\u{9b}\t\u{7f}")
        try await Self.stop(standIn)
    }

    @Test func aForgedStartTimeDoesNotCrashStatus() async throws {
        let runtime = VigildBinary.temporaryDirectory()
        let standIn = try Self.victim()
        // The uptime was now minus startedAt: with Int64.min that overflowed and trapped. It
        // counts from the process's start time now (issue 21 item 5): startedAt plays no part.
        TextFile.write(
            runtime + "/status.json",
            Self.statusJSON(pid: standIn.pid, startTime: try Self.startTime(standIn.pid), startedAt: .min)
        )
        for command in [["status"], ["status", "--json"]] {
            let outcome = try await Self.client(command + ["--runtime-directory", runtime])
            #expect(outcome.status == 0, "\(command): \(outcome.output)")
            // The stand-in started moments ago: a few seconds at most, whatever startedAt says.
            let label = command.count == 1 ? "uptime:         " : "\"uptimeSeconds\": "
            let seconds = outcome.output.firstRange(of: label).flatMap {
                Int(outcome.output[$0.upperBound...].prefix { $0.isNumber || $0 == "-" })
            }
            #expect((0..<120).contains(seconds ?? -1), "\(outcome.output)")
        }
        try await Self.stop(standIn)
    }

    /// Before: after `kill -9` the file still said "running", with an uptime that kept growing,
    /// and `status` exited 0. Now a file whose process is gone or is another process means no
    /// daemon: exit 2 with the reason, and the file still printed as what was last written (a
    /// script keeps `previousShutdownClean` and the last reload).
    @Test func aStatusFileWhoseProcessIsGoneMeansNoDaemon() async throws {
        let runtime = VigildBinary.temporaryDirectory()
        let gone = try DaemonProcess(executable: "/bin/true")
        _ = try await gone.reap()
        let standIn = try Self.victim()
        let actual = try Self.startTime(standIn.pid)
        for (file, reason) in [
            (
                Self.statusJSON(pid: gone.pid, startTime: 1),
                "describes pid \(gone.pid), which is no longer running (it was killed or crashed while \"running\")"
            ),
            (
                Self.statusJSON(pid: gone.pid, startTime: 1, state: "stopped"),
                "describes pid \(gone.pid), which is no longer running (it stopped)"
            ),
            // A start that failed exits by itself (1, the reason logged): not a crash.
            (
                Self.statusJSON(pid: gone.pid, startTime: 1, state: "failed"),
                "describes pid \(gone.pid), which is no longer running (its start failed; the reason is in its log)"
            ),
            (
                Self.statusJSON(pid: standIn.pid, startTime: actual + 1),
                "describes pid \(standIn.pid), which is no longer running (another process has that pid now)"
            ),
        ] {
            TextFile.write(runtime + "/status.json", file)
            let error = "vigild status: no running vigild: \(runtime)/status.json \(reason)\n"
            let text = try await Self.client(["status", "--runtime-directory", runtime])
            #expect(text.status == 2, "\(text.output)")
            #expect(text.output.hasSuffix(error), "\(text.output)")
            #expect(text.output.contains(": not running; last written: "), "\(text.output)")
            #expect(!text.output.contains("uptime"), "no uptime for a daemon that is gone")
            // The record is of the stop before that run, whose own end the first line says: as
            // "previous stop: clean" after a kill -9 it read as the killed run's (a helper's daemon).
            #expect(text.output.contains("\n  stop before it: clean"), "\(text.output)")
            #expect(!text.output.contains("previous stop"), "\(text.output)")
            let json = try await Self.client(["status", "--runtime-directory", runtime, "--json"])
            #expect(json.status == 2, "\(json.output)")
            #expect(json.output.hasSuffix(error), "\(json.output)")
            #expect(
                json.output.contains("\"previousShutdownClean\": true"),
                "the JSON is still printed: \(json.output)"
            )
        }
        try await Self.stop(standIn)
    }

    /// Before: `check-config $'ok\xff.json'` said "ok\u{FFFD}.json: No such file" of a file that
    /// exists: the argument had been repaired into another name.
    @Test func anArgumentThatIsNotUTF8IsAUsageError() async throws {
        let directory = VigildBinary.temporaryDirectory()
        let output = directory + "/out.log"
        let process = try DaemonProcess(
            executable: "/bin/sh",
            arguments: [
                "-c", #"exec "$0" check-config "$(printf '%s/ok\377.json' "$1")""#, VigildBinary.path, directory,
            ],
            outputPath: output
        )
        #expect(try await process.waitForExit() == 64)
        #expect(
            TextFile.read(output)
                == "vigild: argument 2 is not valid UTF-8 (a file name in another encoding?): rename the file, or reach it through a symbolic link whose name is UTF-8\n"
        )
    }

    @Test func escapingCoversBidirectionalOverridesEmbeddingsAndIsolates() {
        #expect(
            DisplayText.escapingControlCharacters("a\u{202E}b\u{2066}c\u{200F}") == #"a\u{202e}b\u{2066}c"# + "\u{200F}"
        )
        #expect(DisplayText.quoted("x\u{202E}y") == #""x\u{202e}y""#)
        #expect(
            DisplayText.escapingControlCharacters("مرحبا\u{61C} עברית\u{200F}") == "مرحبا\u{61C} עברית\u{200F}",
            "right-to-left text and its marks stay"
        )
    }

    @Test func escapingCoversC0DelAndC1() {
        #expect(DisplayText.escapingControlCharacters("plain é ✓") == "plain é ✓")
        #expect(
            DisplayText.escapingControlCharacters("a\nb\r\t\u{0}\u{1b}\u{7f}\u{80}\u{9f}\u{a0}")
                == #"a\nb\r\t\u{0}\u{1b}\u{7f}\u{80}\u{9f}"# + "\u{a0}"
        )
    }

    @Test func startTimeIsField22CountedFromTheLastParenthesis() {
        let fields = (3...52).map { $0 == 22 ? "4242" : "\($0)" }.joined(separator: " ")
        #expect(ProcessStartTime.parse(statLine: Array("77 (a) (b c) d) \(fields)\n".utf8)) == 4242)
        #expect(ProcessStartTime.parse(statLine: Array("77 (x) 1 2".utf8)) == nil)
        #expect(ProcessStartTime.parse(statLine: Array("77 (x \(fields)".utf8)) == nil)
        let huge = (3...52).map { $0 == 22 ? "99999999999999999999999" : "1" }.joined(separator: " ")
        #expect(ProcessStartTime.parse(statLine: Array("7 (x) \(huge)".utf8)) == nil)
        #expect(ProcessStartTime.current == (try? Self.startTime(getpid())))
    }
}

/// Removes a directory and the files in it (one level deep, as the tests plant them).
private func rmdirTree(_ path: String) {
    guard let directory = opendir(path) else { return }
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name != "." && name != ".." { unlink(path + "/" + name) }
    }
    closedir(directory)
    rmdir(path)
}

/// The pid proof without processes: `/proc` visible, hidden (the shipped unit), or gone.
struct DaemonProofTests {
    let status = RuntimeStatus(
        pid: 4242,
        processStartTime: 77,
        state: "running",
        generation: 1,
        lastReload: nil,
        startedAt: 0,
        previousShutdownClean: true
    )

    func verify(
        startTime: UInt64?,
        mainPID: String?,
        requested: Int32? = nil,
        pid: Int32? = nil,
        owner: uid_t? = 0,
        directoryOwner: uid_t = 0
    ) -> String {
        var status = status
        if let pid { status.pid = pid }
        do {
            let pid = try ReloadClient.verifiedDaemon(
                status,
                requested: requested,
                file: "status.json",
                name: "vigild",
                directoryOwner: directoryOwner,
                startTime: { _ in startTime },
                processOwner: { _ in owner },
                hasExited: { _ in false },
                mainPID: mainPID
            )
            return "signal \(pid)"
        } catch {
            return error.description
        }
    }

    /// `status` applies the owner check too, and takes pid 1 (a daemon in a PID namespace of
    /// its own) as it is: it signals nothing.
    @Test func statusChecksTheOwnerAndTakesPidOne() {
        let me = getpid()
        var mine = status
        mine.pid = me
        let runningAs = { (user: uid_t) in
            StatusClient.notRunning(
                mine,
                file: "s",
                directoryOwner: 7,
                startTime: { _ in 77 },
                processOwner: { _ in user }
            )
        }
        #expect(runningAs(7) == nil)
        #expect(runningAs(0) == "s names pid \(me), which runs as uid 0, not as the directory's owner (uid 7)")
        var first = status
        first.pid = 1
        #expect(
            StatusClient.notRunning(
                first,
                file: "s",
                directoryOwner: 0,
                startTime: { _ in nil },
                processOwner: { _ in 0 }
            ) == nil
        )
        first.pid = 0
        #expect(StatusClient.notRunning(first, file: "s", directoryOwner: 0) == "s names pid 0, not a daemon's")
    }

    /// A file that records no start time (an older vigild's, or a forged one) proves nothing
    /// about its pid: `status` said "running" (exit 0) for any live process of the directory's
    /// owner it named, pid 1 say (helper 51). Now only the holder of the directory's
    /// instance.lock counts as the daemon.
    @Test func statusWithoutAStartTimeTakesOnlyTheLockHolder() {
        var old = status
        old.pid = getpid()
        old.processStartTime = nil
        let holding = { (holds: Bool) in
            StatusClient.notRunning(
                old,
                file: "s",
                directoryOwner: getuid(),
                startTime: { _ in 77 },
                processOwner: { _ in getuid() },
                holdsInstanceLock: { _ in holds }
            )
        }
        #expect(holding(true) == nil)
        #expect(
            holding(false)
                == "s names pid \(getpid()) but not when it started (written by an older daemon, or not by one), "
                + "and pid \(getpid()) does not hold the directory's instance.lock: it is not known to be the daemon"
        )
    }

    /// A daemon in a PID namespace of its own records pid 1; here it is the lock's one holder,
    /// taken only when that process started at the recorded time.
    @Test func aNamespacedDaemonIsTheLockHolderThatStartedAtTheRecordedTime() throws {
        var inside = status
        inside.pid = 1
        let startTimes: [Int32: UInt64] = [1: 5, 5150: 77, 6160: 78]
        func signal(holder: Int32?, requested: Int32? = nil) -> String {
            do {
                return "signal "
                    + String(
                        try ReloadClient.verifiedDaemon(
                            inside,
                            requested: requested,
                            file: "status.json",
                            name: "vigild",
                            directoryOwner: 0,
                            startTime: { startTimes[$0] },
                            processOwner: { _ in 0 },
                            lockHolder: { holder },
                            hasExited: { _ in false },
                            mainPID: nil
                        )
                    )
            } catch {
                return error.description
            }
        }
        #expect(signal(holder: 5150) == "signal 5150")
        #expect(signal(holder: 5150, requested: 5150) == "signal 5150", "ExecReload='s $MAINPID is the pid here")
        #expect(
            signal(holder: 5150, requested: 6160)
                == "refusing to signal pid 6160: it is not the vigild that status.json describes (pid 5150 here, 1 in its PID namespace)"
        )
        #expect(signal(holder: 6160).hasPrefix("refusing to signal pid 1"), "a holder that started at another time")
        #expect(signal(holder: nil).hasPrefix("refusing to signal pid 1"), "no holder")
        #expect(StatusClient.namespacedDaemon(inside, holder: 5150, startTime: { startTimes[$0] }) == 5150)
        #expect(StatusClient.namespacedDaemon(inside, holder: 6160, startTime: { startTimes[$0] }) == nil)
        #expect(StatusClient.namespacedDaemon(inside, holder: 1, startTime: { _ in 77 }) == nil, "never pid 1")
        // /proc/locks as the kernel prints it: a waiter ("->") and other files do not count.
        let locks = """
            1: FLOCK  ADVISORY  WRITE 5150 fd:01:4242 0 EOF
            1: -> FLOCK  ADVISORY  WRITE 6160 fd:01:4242 0 EOF
            2: FLOCK  ADVISORY  WRITE 7170 fd:01:4243 0 EOF
            3: POSIX  ADVISORY  WRITE 8180 fd:01:4242 0 EOF
            """
        let device = UInt64(0xfd) << 8 | 1
        #expect(InstanceLockHolder.holders(in: locks, device: device, inode: 4242) == [5150])
    }

    @Test func aVisibleProcessMustRunAsTheDirectorysOwner() {
        #expect(verify(startTime: 77, mainPID: nil, owner: 61, directoryOwner: 61) == "signal 4242")
        #expect(
            verify(startTime: 77, mainPID: nil, owner: 0, directoryOwner: 65_534)
                == "refusing to signal pid 4242: it runs as uid 0, but status.json is in a directory of uid 65534, and a vigild writes its own status file"
        )
        #expect(verify(startTime: 77, mainPID: nil, owner: nil).hasPrefix("refusing to signal pid 4242: who runs it"))
        #expect(verify(startTime: 77, mainPID: "4242", owner: nil) == "signal 4242")
    }

    @Test func aVisibleProcessMustHaveTheRecordedStartTime() {
        #expect(verify(startTime: 77, mainPID: nil) == "signal 4242")
        #expect(verify(startTime: 78, mainPID: "4242").hasPrefix("refusing to signal pid 4242: it started at tick 78"))
        #expect(verify(startTime: 77, mainPID: nil, requested: 4243).hasPrefix("refusing to signal pid 4243"))
    }
}

extension DaemonProofTests {
    @Test func aHiddenProcessIsAcceptedOnlyAsSystemdsMainPID() async throws {
        let me = getpid()
        #expect(verify(startTime: nil, mainPID: "\(me)", pid: me) == "signal \(me)")
        #expect(
            verify(startTime: nil, mainPID: nil, pid: me).hasPrefix(
                "refusing to signal pid \(me): /proc/\(me) is hidden"
            )
        )
        #expect(
            verify(startTime: nil, mainPID: "1", pid: me).hasPrefix(
                "refusing to signal pid \(me): /proc/\(me) is hidden"
            )
        )
        let exited = try DaemonProcess(executable: "/bin/true")
        _ = try await exited.reap()
        #expect(
            verify(startTime: nil, mainPID: "\(exited.pid)", pid: exited.pid)
                == "pid \(exited.pid) named in status.json is not running"
        )
    }
}

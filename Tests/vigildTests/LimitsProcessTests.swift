import Glibc
import Testing
import VigilTesting

/// vigild at the edges of what the system gives a process (issue 21, items 1, 9 and 10): few
/// descriptors, a flood of real-time signals nobody owns, and closed standard descriptors.
/// Each test runs the built vigild as a real child.
@Suite(.serialized) struct LimitsProcessTests {
    /// The smallest `RLIMIT_NOFILE` vigild runs with here (debug build, no journal socket): stdin,
    /// stdout, stderr, the loop's four, the notify socket, the runtime directory, one for the
    /// file being written, the two instance locks and the BARRIER=1 socket pair at exit (when the
    /// exit needs one). Under systemd the journal's socket makes it one more (the README's
    /// failure-mode table, measured with the static release build under systemd 252).
    static let minimumDescriptors = 13

    /// bash that closes every descriptor above 2 (the test runner's, inherited).
    static let closingInherited =
        #"for fd in /proc/$$/fd/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done; "#

    /// vigild under `prlimit --nofile=limit`, with a fake notify socket.
    private func spawn(
        descriptors limit: Int,
        socket: FakeNotifySocket,
        directory: String
    ) throws -> DaemonProcess {
        // Through bash, which closes what the test runner leaves open (descriptors without
        // close-on-exec would count against the limit) and execs prlimit, which execs vigild.
        try DaemonProcess(
            executable: "/bin/bash",
            arguments: [
                "-c", Self.closingInherited + #"exec /usr/bin/prlimit --nofile="$1" -- "$0" "${@:2}""#,
                VigildBinary.path, "\(limit)", "run", "--state-directory", directory + "/state",
                "--runtime-directory", directory + "/run",
            ],
            // A process systemd did not start (SYSTEMD_EXEC_PID names another): its exit sends
            // BARRIER=1, so the minimum is measured with the barrier's socket pair in use.
            environment: ["NOTIFY_SOCKET": socket.path, "SYSTEMD_EXEC_PID": "1"],
            outputPath: directory + "/output.log"
        )
    }

    /// Before: below 9 descriptors vigild died of SIGILL (status 132): a `precondition` on
    /// `signalfd` → `EMFILE`, or Dispatch trapping without a word when its main-queue eventfd
    /// could not be made. Now every limit below the minimum ends in exit status 1 and a line
    /// that names EMFILE and LimitNOFILE=.
    @Test(arguments: 4..<minimumDescriptors)
    func tooFewDescriptorsFailWithALineThatNamesThem(_ limit: Int) async throws {
        let socket = try FakeNotifySocket()
        let directory = VigildBinary.temporaryDirectory()
        let daemon = try spawn(descriptors: limit, socket: socket, directory: directory)
        let status = try await daemon.waitForExit()
        let output = TextFile.read(directory + "/output.log") ?? ""
        #expect(status == 1, "limit \(limit): exit status \(status) (132 is SIGILL); said: \(output)")
        #expect(output.contains("EMFILE"), "limit \(limit): \(output)")
        #expect(output.contains("LimitNOFILE="), "limit \(limit): \(output)")
        #expect(!socket.datagrams.values.contains { $0.lines.contains("READY=1") })
    }

    /// Descriptors the process inherited take slots below the limit: at the minimum limit with
    /// three of them open, the start passed the limit's check and failed later, halfway, with
    /// EMFILE (helper 51). Now it fails first, counting them.
    @Test func inheritedDescriptorsAreCountedAgainstTheLimit() async throws {
        let socket = try FakeNotifySocket()
        let directory = VigildBinary.temporaryDirectory()
        let daemon = try DaemonProcess(
            executable: "/bin/bash",
            arguments: [
                "-c",
                Self.closingInherited + #"exec 5</dev/null 6</dev/null 7</dev/null; "#
                    + #"exec /usr/bin/prlimit --nofile="$1" -- "$0" "${@:2}""#,
                VigildBinary.path, "\(Self.minimumDescriptors)", "run", "--state-directory", directory + "/state",
                "--runtime-directory", directory + "/run",
            ],
            environment: ["NOTIFY_SOCKET": socket.path, "SYSTEMD_EXEC_PID": "1"],
            outputPath: directory + "/output.log"
        )
        let status = try await daemon.waitForExit()
        let output = TextFile.read(directory + "/output.log") ?? ""
        #expect(status == 1, "said: \(output)")
        #expect(output.contains("cannot start: it may open \(Self.minimumDescriptors) descriptors"), "\(output)")
        #expect(output.contains("3 more than its own"), "\(output)")
        #expect(!output.contains("Too many open files"), "refused before anything failed: \(output)")
    }

    /// Sends SIGHUP and awaits the reload's READY=1, then SIGTERM and the exit; the exit status
    /// and what the daemon wrote.
    private func reloadThenStop(
        _ daemon: DaemonProcess,
        _ socket: FakeNotifySocket,
        directory: String
    ) async throws -> (status: Int32, output: String) {
        daemon.send(SIGHUP)
        try await socket.datagrams.wait("READY=1 after the reload") { datagrams in
            datagrams.drop { !$0.lines.contains("RELOADING=1") }.contains { $0.lines.contains("READY=1") }
        }
        daemon.send(SIGTERM)
        let status = try await daemon.waitForExit()
        return (status, TextFile.read(directory + "/output.log") ?? "")
    }

    /// At the minimum, vigild starts, reloads and stops as usual.
    @Test func theMinimumIsEnoughToStartReloadAndStop() async throws {
        let socket = try FakeNotifySocket()
        let directory = VigildBinary.temporaryDirectory()
        let daemon = try spawn(descriptors: Self.minimumDescriptors, socket: socket, directory: directory)
        try await socket.datagrams.wait("READY=1") { $0.contains { $0.lines.contains("READY=1") } }
        let (status, output) = try await reloadThenStop(daemon, socket, directory: directory)
        #expect(status == 0, "said: \(output)")
        #expect(!output.contains("Too many open files"), "said: \(output)")
        #expect(socket.datagrams.values.last?.text == "BARRIER=1", "the exit's barrier was sent and confirmed")
    }

    /// A field of /proc/PID/status ("ShdPnd", "SigQ"), without its name.
    private func statusField(_ name: String, of pid: Int32) -> String? {
        let text = TextFile.read("/proc/\(pid)/status") ?? ""
        return text.split(separator: "\n").first { $0.hasPrefix(name + ":") }
            .map { $0.dropFirst(name.count + 1).trimmingPrefix(while: { $0 == " " || $0 == "\t" }) }
            .map(String.init)
    }

    /// Whether signal `number` is in a /proc/PID/status mask (hexadecimal, bit n-1 for signal n).
    private func mask(_ hex: String, has number: Int32) -> Bool {
        guard let value = UInt64(hex, radix: 16) else { return false }
        return value & (1 << UInt64(number - 1)) != 0
    }

    /// Before: every real-time signal vigild does not own stayed queued (blocked from the first
    /// instruction, never taken), each charged to a user's RLIMIT_SIGPENDING: 100,000 of
    /// them used up root's queue (`timer_create` failed elsewhere) until vigild stopped. Now the
    /// loop takes them from its signalfd and discards them: nothing stays pending, one line
    /// says so, and the daemon answers as before.
    @Test func unownedRealTimeSignalsAreTakenAndDiscarded() async throws {
        let socket = try FakeNotifySocket()
        let (daemon, directory) = try await VigildBinary.start(socket: socket)
        let signal = __libc_current_sigrtmin() + 5
        var sent = 0
        for _ in 0..<100_000 where kill(daemon.pid, signal) == 0 { sent += 1 }
        #expect(sent > 50_000, "the queue took \(sent)")
        let lines = try await takenThenReloadsAndStops(daemon, socket, directory, taken: signal, reloadWith: SIGHUP)
        #expect(lines.count == 1, "one line for the flood, not one per signal: \(lines.count)")
        #expect(lines.first?.contains("SIGRTMIN+5") == true, "\(lines)")
    }

    /// Waits until `signal` is no longer pending in `daemon` (no event says "the last one was
    /// taken": the process's pending set is watched), reloads it with `reload` and awaits the
    /// answer, stops it cleanly; returns its log lines that say a signal was discarded.
    private func takenThenReloadsAndStops(
        _ daemon: DaemonProcess,
        _ socket: FakeNotifySocket,
        _ directory: String,
        taken signal: Int32,
        reloadWith reload: Int32
    ) async throws -> [Substring] {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(20)
        var pending = statusField("ShdPnd", of: daemon.pid) ?? ""
        while mask(pending, has: signal) && clock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            pending = statusField("ShdPnd", of: daemon.pid) ?? ""
        }
        #expect(!mask(pending, has: signal), "signal \(signal) still pending: ShdPnd \(pending)")
        daemon.send(reload)
        try await socket.datagrams.wait("READY=1 after a reload") { datagrams in
            datagrams.drop { !$0.lines.contains("RELOADING=1") }.contains { $0.lines.contains("READY=1") }
        }
        #expect(socket.datagrams.values.filter { $0.lines.contains("RELOADING=1") }.count == 1, "one reload")
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
        return (TextFile.read(directory + "/output.log") ?? "").split(separator: "\n").filter {
            $0.contains("Discarded")
        }
    }

    /// Before: started from a shell whose terminal has `stty tostop`, vigild was stopped by its
    /// first log line (SIGTTOU) and then answered nothing, SIGTERM included, until a SIGCONT.
    /// Now SIGTTOU is ignored from the first instruction, as SIGPIPE and SIGXFSZ are.
    @Test func terminalOutputCannotStopTheDaemon() async throws {
        let socket = try FakeNotifySocket()
        let (daemon, _) = try await VigildBinary.start(socket: socket)
        let ignored = statusField("SigIgn", of: daemon.pid) ?? ""
        for signal in [SIGTTOU, SIGPIPE, SIGXFSZ] {
            #expect(mask(ignored, has: signal), "signal \(signal) not ignored: SigIgn \(ignored)")
        }
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
    }

    /// Before: with another reload signal, SIGHUP (blocked from the first instruction, like every
    /// signal vigild answers) had no owner: it stayed pending for good, nothing was logged, and
    /// `vigild reload` (SIGHUP unless told otherwise) waited out its timeout. Now it is taken and
    /// the discard logged, once for a burst; the reload signal reloads.
    @Test func sighupIsTakenAndNamedWhenAnotherSignalReloads() async throws {
        let socket = try FakeNotifySocket()
        let (daemon, directory) = try await VigildBinary.start(
            socket: socket,
            arguments: ["--reload-signal", "SIGUSR2"]
        )
        for _ in 0..<50 { daemon.send(SIGHUP) }
        // One reload in all: SIGUSR2's; SIGHUP reloaded nothing.
        let lines = try await takenThenReloadsAndStops(daemon, socket, directory, taken: SIGHUP, reloadWith: SIGUSR2)
        #expect(lines.count == 1, "one line for the burst: \(lines)")
        #expect(lines.first?.contains("Discarded SIGHUP: it is not this daemon's reload signal") == true, "\(lines)")
    }

    /// Before: started with stdin, stdout and stderr closed, vigild's epoll, eventfd and timerfd
    /// became fds 0-2 and its log lines went into them. Now each closed one is /dev/null
    /// before anything else opens a descriptor.
    @Test func closedStandardDescriptorsBecomeDevNull() async throws {
        let socket = try FakeNotifySocket()
        let directory = VigildBinary.temporaryDirectory()
        let daemon = try DaemonProcess(
            executable: "/bin/sh",
            arguments: [
                "-c", #"exec "$0" "$@" <&- >&- 2>&-"#, VigildBinary.path, "run", "--state-directory",
                directory + "/state", "--runtime-directory", directory + "/run",
            ],
            environment: ["NOTIFY_SOCKET": socket.path]
        )
        try await socket.datagrams.wait("READY=1") { $0.contains { $0.lines.contains("READY=1") } }
        for descriptor in 0...2 {
            var buffer = [CChar](repeating: 0, count: 256)
            let length = readlink("/proc/\(daemon.pid)/fd/\(descriptor)", &buffer, buffer.count - 1)
            let target =
                length > 0
                ? String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "closed"
            #expect(target == "/dev/null", "fd \(descriptor) is \(target)")
        }
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
    }

    /// Arrays nested 255 deep under a key: within the parser's 256 levels, so a file may hold it.
    static let deeplyNested = "[" + String(repeating: "[", count: 254) + String(repeating: "]", count: 255)

    /// vigild `arguments` under `prlimit --stack=bytes` (its output in `directory`/output.log).
    private func spawn(
        stack bytes: Int,
        _ arguments: [String],
        directory: String,
        socket: FakeNotifySocket? = nil
    )
        throws -> DaemonProcess
    {
        try DaemonProcess(
            executable: "/usr/bin/prlimit",
            arguments: ["--stack=\(bytes)", "--", VigildBinary.path] + arguments,
            environment: socket.map { ["NOTIFY_SOCKET": $0.path] } ?? [:],
            outputPath: directory + "/output.log"
        )
    }

    /// Before: with a small stack (`ulimit -s`, `LimitSTACK=`) a file nested as deep as the parser
    /// allows crashed vigild (SIGSEGV in the parser's recursion: `check-config`, `status`, and a
    /// running daemon on reload), 512 KiB here (a debug build). Now every command that reads JSON
    /// refuses to begin below the stack it needs, naming RLIMIT_STACK and LimitSTACK=.
    @Test func tooSmallAStackIsRefusedBeforeAnyJSONIsRead() async throws {
        let directory = VigildBinary.temporaryDirectory()
        TextFile.write(directory + "/deep.json", #"{ "heartbeat": "# + Self.deeplyNested + " }")
        for (arguments, expected) in [
            (["check-config", directory + "/deep.json"], 1),
            (["status", "--runtime-directory", directory + "/run"], 2),
            (
                [
                    "run", "--config", directory + "/deep.json", "--state-directory", directory + "/state",
                    "--runtime-directory", directory + "/run",
                ], 1
            ),
        ] as [([String], Int32)] {
            let command = try spawn(stack: 512 * 1024, arguments, directory: directory)
            let status = try await command.waitForExit()
            let output = TextFile.read(directory + "/output.log") ?? ""
            #expect(status == expected, "\(arguments[0]): exit status \(status) (139 is SIGSEGV); said: \(output)")
            #expect(output.contains("only 512 KiB (RLIMIT_STACK)"), "\(arguments[0]): \(output)")
            #expect(output.contains("LimitSTACK="), "\(arguments[0]): \(output)")
        }
    }

    /// At the stack it asks for, a debug build refuses the deepest configuration with a reason
    /// (it is no valid configuration), and restores, checkpoints and reloads a state value and a
    /// configuration nested as deep as the parser allows.
    @Test func theStackItAsksForParsesTheDeepestFiles() async throws {
        let directory = VigildBinary.temporaryDirectory()
        TextFile.write(directory + "/deep.json", #"{ "heartbeat": "# + Self.deeplyNested + " }")
        let check = try spawn(stack: 1024 * 1024, ["check-config", directory + "/deep.json"], directory: directory)
        let checked = try await check.waitForExit()
        let said = TextFile.read(directory + "/output.log") ?? ""
        #expect(checked == 1, "exit status \(checked) (139 is SIGSEGV); said: \(said)")
        #expect(said.contains("deep.json:1:"), "\(said)")

        mkdir(directory + "/state", 0o700)
        TextFile.write(directory + "/state/state.json", #"{ "formatVersion": 1, "deep": "# + Self.deeplyNested + " }")
        TextFile.write(directory + "/config.json", "{}")
        let socket = try FakeNotifySocket()
        let daemon = try spawn(
            stack: 1024 * 1024,
            [
                "run", "--config", directory + "/config.json", "--state-directory", directory + "/state",
                "--runtime-directory", directory + "/run",
            ],
            directory: directory,
            socket: socket
        )
        try await socket.datagrams.wait("READY=1") { $0.contains { $0.lines.contains("READY=1") } }
        TextFile.write(directory + "/config.json", #"{ "heartbeat": "# + Self.deeplyNested + " }")
        let (status, output) = try await reloadThenStop(daemon, socket, directory: directory)
        #expect(status == 0, "exit status \(status) (139 is SIGSEGV); said: \(output)")
        #expect(output.contains("Reload rejected"), "\(output)")
        #expect(TextFile.read(directory + "/state/state.json")?.contains("deep") == true, "the state kept its value")
    }
}

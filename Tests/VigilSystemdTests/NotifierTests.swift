import Glibc
import Testing
import VigilSystemd
import VigilTesting

/// `vigil-notify-probe` run with `actions` in exactly `environment` (nothing inherited from the
/// test runner): `SystemdNotifier` and `Watchdog.fromEnvironment` read the real environment, so
/// the variables are set for a child, never with setenv in this process (where other suites
/// spawn children from `environ` at the same time).
struct NotifyProbe {
    static var path: String { Probe.path(of: "vigil-notify-probe") }

    /// The probe's reports, one datagram per action.
    let reports: FakeNotifySocket
    let process: DaemonProcess

    init(
        _ actions: [String],
        environment: [String: String] = [:],
        listenFileDescriptors: [(fileDescriptor: Int32, name: String)] = [],
        executable: String? = nil,
        arguments: [String] = [],
        outputPath: String? = nil,
        beforeSpawn: (FakeNotifySocket) -> Void = { _ in }
    ) throws {
        reports = try FakeNotifySocket()
        beforeSpawn(reports)
        process = try DaemonProcess(
            executable: executable ?? Self.path,
            arguments: arguments + actions,
            environment: environment.merging(["VIGIL_PROBE_REPORT": reports.path]) { $1 },
            inheritEnvironment: false,
            outputPath: outputPath,
            listenFileDescriptors: listenFileDescriptors
        )
    }

    /// The first `count` reports, once they arrived.
    func reports(_ count: Int) async throws -> [String] {
        try await reports.datagrams.wait("\(count) report(s) from the probe") { $0.count >= count }
            .prefix(count).map(\.text)
    }

    /// Runs the probe to its end: every action's report, after it exited 0.
    static func run(_ actions: [String], environment: [String: String] = [:]) async throws -> [String] {
        let probe = try NotifyProbe(actions, environment: environment)
        let reports = try await probe.reports(actions.count)
        #expect(try await probe.process.waitForExit() == 0)
        return reports
    }

    /// `watchdog` in a probe whose `WATCHDOG_PID` is set by a shell to its own pid (`$$`, kept
    /// across `exec`), or to another pid.
    static func watchdog(usec: String, pid ownPid: Bool) async throws -> String {
        let pid = ownPid ? "$$" : "$(($$ + 1))"
        let probe = try NotifyProbe(
            ["watchdog"],
            environment: ["WATCHDOG_USEC": usec],
            executable: "/bin/sh",
            arguments: ["-c", "export WATCHDOG_PID=\(pid); exec \"$0\" \"$@\"", Self.path]
        )
        let reports = try await probe.reports(1)
        #expect(try await probe.process.waitForExit() == 0)
        return reports[0]
    }
}

/// `sd_notify` through a real datagram socket standing in for systemd's, from a child process
/// (``NotifyProbe``) that has `NOTIFY_SOCKET` in its environment.
@Suite struct NotifierTests {
    @Test func sendsTheExactBytesFromTheSendingProcess() async throws {
        let socket = try FakeNotifySocket()
        let texts = [
            "READY=1\nSTATUS=Running", "RELOADING=1\nMONOTONIC_USEC=123", "EXTEND_TIMEOUT_USEC=5000000",
            "WATCHDOG=trigger",
        ]
        let probe = try NotifyProbe(
            ["enabled"] + texts.map { "send=" + $0 } + ["env=NOTIFY_SOCKET"],
            environment: ["NOTIFY_SOCKET": socket.path]
        )
        // sd_notify(0, …) leaves NOTIFY_SOCKET in place for later notifications.
        #expect(
            try await probe.reports(6)
                == ["enabled=true", "sent", "sent", "sent", "sent", "NOTIFY_SOCKET=\(socket.path)"]
        )
        #expect(try await probe.process.waitForExit() == 0)
        let datagrams = try await socket.datagrams.wait { $0.count == 4 }
        #expect(datagrams.map(\.text) == texts)
        #expect(datagrams.allSatisfy { $0.senderPID == probe.process.pid })
    }

    @Test func withoutNotifySocketItIsANoOp() async throws {
        #expect(try await NotifyProbe.run(["enabled", "send=READY=1"]) == ["enabled=false", "sent"])
    }

    @Test func aFailedSendIsReported() async throws {
        let reports = try await NotifyProbe.run(
            ["send=READY=1"],
            environment: ["NOTIFY_SOCKET": "/nonexistent/vigil/notify.sock"]
        )
        #expect(
            reports == [
                "error errno=\(ENOENT): cannot send 'READY=1' to the service manager's NOTIFY_SOCKET "
                    + "/nonexistent/vigil/notify.sock: No such file or directory"
            ]
        )
    }

    /// `fromEnvironment` reads this process's variables and pid; the parsing itself is
    /// ``WatchdogEnvironmentTests``'.
    @Test func watchdogFromTheEnvironmentHonoursWatchdogPID() async throws {
        let thirty = "watchdog interval=\(Duration.seconds(30)) ping=\(Duration.seconds(15))"
        #expect(try await NotifyProbe.run(["watchdog"], environment: ["WATCHDOG_USEC": "30000000"]) == [thirty])
        #expect(try await NotifyProbe.watchdog(usec: "30000000", pid: true) == thirty)
        #expect(
            try await NotifyProbe.watchdog(usec: "30000000", pid: false) == "watchdog=none",
            "meant for another process"
        )
        #expect(try await NotifyProbe.run(["watchdog"]) == ["watchdog=none"])
    }

    /// `FDSTORE=1` goes as one datagram that carries the socket itself (`SCM_RIGHTS`), as
    /// `sd_pid_notify_with_fds` sends it: the fake receives a descriptor for the same socket.
    @Test func storingASocketPassesTheDescriptor() async throws {
        let fake = try FakeNotifySocket()
        let socket = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { socket.close() }
        let sent = try #require(FakeNotifySocket.Datagram.PassedDescriptor(of: socket.fileDescriptor))
        // The probe adopts this socket (socket activation) and stores it.
        let probe = try NotifyProbe(
            ["store=web", "send=READY=1"],
            environment: ["NOTIFY_SOCKET": fake.path],
            listenFileDescriptors: [(fileDescriptor: socket.fileDescriptor, name: "web")]
        )
        // The socket stays open and usable in the probe after the store.
        #expect(try await probe.reports(2) == ["stored=true open=true", "sent"])
        #expect(try await probe.process.waitForExit() == 0)
        let datagrams = try await fake.datagrams.wait { $0.count == 2 }
        #expect(datagrams[0].text == "FDSTORE=1\nFDNAME=web")
        #expect(datagrams[0].passedDescriptors == [sent])
        #expect(datagrams[0].senderPID == probe.process.pid)
        #expect(datagrams[1].text == "READY=1" && datagrams[1].passedDescriptors.isEmpty)
    }

    @Test func storingWithoutNotifySocketStoresNothing() async throws {
        let socket = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { socket.close() }
        let probe = try NotifyProbe(
            ["store=web"],
            listenFileDescriptors: [(fileDescriptor: socket.fileDescriptor, name: "web")]
        )
        #expect(try await probe.reports(1) == ["stored=false open=true"])
        #expect(try await probe.process.waitForExit() == 0)
    }

    @Test func aFailedStoreSaysWhy() async throws {
        let socket = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { socket.close() }
        let probe = try NotifyProbe(
            ["store=web"],
            environment: ["NOTIFY_SOCKET": "/nonexistent/vigil/notify.sock"],
            listenFileDescriptors: [(fileDescriptor: socket.fileDescriptor, name: "web")]
        )
        let reports = try await probe.reports(1)
        #expect(try await probe.process.waitForExit() == 0)
        #expect(
            reports[0].hasPrefix("error code=\(SystemdError.Code.storeFailed.name) errno=\(ENOENT): "),
            "\(reports)"
        )
    }

    /// `BARRIER=1` goes alone with one descriptor, after everything sent before it, and the
    /// wait ends when the receiver closes that descriptor.
    @Test func aBarrierIsConfirmedWhenTheManagerClosesItsDescriptor() async throws {
        let fake = try FakeNotifySocket()
        let probe = try NotifyProbe(
            ["send=STOPPING=1", "send=STATUS=Stopped", "barrier=10000"],
            environment: ["NOTIFY_SOCKET": fake.path]
        )
        let reports = try await probe.reports(3)
        #expect(try await probe.process.waitForExit() == 0)
        #expect(reports[2].hasPrefix("barrier=confirmed "), "\(reports)")
        let datagrams = try await fake.datagrams.wait { $0.count == 3 }
        #expect(datagrams.map(\.text) == ["STOPPING=1", "STATUS=Stopped", "BARRIER=1"])
        #expect(datagrams[2].passedDescriptors.count == 1)
    }

    /// A barrier sent ahead (right after `STOPPING=1`) is the one the exit waits on when
    /// nothing was sent since: one `BARRIER=1`, not two.
    @Test func aBarrierSentAheadIsTheOneTheExitWaitsOn() async throws {
        let fake = try FakeNotifySocket()
        let reports = try await NotifyProbe.run(
            ["send=STOPPING=1", "barrier-ahead", "barrier=10000"],
            environment: ["NOTIFY_SOCKET": fake.path]
        )
        #expect(reports[2].hasPrefix("barrier=confirmed "), "\(reports)")
        let datagrams = try await fake.datagrams.wait { $0.count == 2 }
        #expect(datagrams.map(\.text) == ["STOPPING=1", "BARRIER=1"])
        #expect(datagrams[1].passedDescriptors.count == 1)
    }

    /// A notification after the barrier sent ahead is not covered by it: the exit sends and
    /// waits on a new one.
    @Test func aNotificationAfterTheBarrierSentAheadGetsABarrierOfItsOwn() async throws {
        let fake = try FakeNotifySocket()
        let reports = try await NotifyProbe.run(
            ["barrier-ahead", "send=STATUS=Stopped with errors", "barrier=10000"],
            environment: ["NOTIFY_SOCKET": fake.path]
        )
        #expect(reports[2].hasPrefix("barrier=confirmed "), "\(reports)")
        let datagrams = try await fake.datagrams.wait { $0.count == 3 }
        #expect(datagrams.map(\.text) == ["BARRIER=1", "STATUS=Stopped with errors", "BARRIER=1"])
    }

    /// A barrier sent ahead that the manager never answers still bounds the exit's wait.
    @Test func aBarrierSentAheadNobodyAnswersEndsAtItsBound() async throws {
        let fake = try FakeNotifySocket(answersBarriers: false)
        let reports = try await NotifyProbe.run(
            ["barrier-ahead", "barrier=300"],
            environment: ["NOTIFY_SOCKET": fake.path]
        )
        #expect(reports[1].hasPrefix("barrier=timed-out "), "\(reports)")
        let milliseconds = try #require(Int(reports[1].split(separator: "=").last ?? ""), "\(reports)")
        #expect(milliseconds >= 300, "\(reports)")
        #expect(try await fake.datagrams.wait { $0.count == 1 }.map(\.text) == ["BARRIER=1"])
    }

    /// A manager that never closes the barrier's descriptor costs the bound, then `false`.
    @Test func aBarrierNobodyAnswersEndsAtItsBound() async throws {
        let fake = try FakeNotifySocket(answersBarriers: false)
        let reports = try await NotifyProbe.run(["barrier=300"], environment: ["NOTIFY_SOCKET": fake.path])
        let milliseconds = try #require(Int(reports[0].split(separator: "=").last ?? ""), "\(reports)")
        #expect(reports[0].hasPrefix("barrier=timed-out "), "\(reports)")
        #expect(milliseconds >= 300, "\(reports)")
        #expect(try await fake.datagrams.wait { $0.count == 1 }.map(\.text) == ["BARRIER=1"])
    }

    /// Datagrams that wait on the notifier's helper thread (the manager took none for a while)
    /// arrive before the process exits when it waits on a barrier; without one they would die
    /// with it. So the exit of even the process systemd started (`exit-sync`, `SYSTEMD_EXEC_PID`
    /// unset) sends `BARRIER=1` behind them while they wait, and waits until it is confirmed.
    @Test(arguments: [
        ("barrier=30000", "barrier=confirmed "),
        ("exit-sync=30000", "exit-sync=confirmed needed=true "),
    ])
    func aBarrierWaitsForTheQueuedDatagrams(action: String, confirmed: String) async throws {
        let fake = try FakeNotifySocket()
        fake.pause()
        let probe = try NotifyProbe(
            ["burst=60", action],
            environment: ["NOTIFY_SOCKET": fake.path, "SYSTEMD_EXEC_PID": "", "VIGIL_PROBE_REPORT_DECISION": "1"]
        )
        let burst = try await probe.reports(1)[0]
        let backlog = try #require(Int(burst.split(separator: " ")[1].dropFirst("backlog=".count)), "\(burst)")
        #expect(backlog > 0, "the manager's queue filled, so datagrams waited on the helper thread: \(burst)")
        // The exit decides while the manager is still frozen: resumed after the burst, the fake
        // could drain the queue before a probe slow to go on (two busy CPUs) decided, and the
        // exit then rightly needed no barrier.
        let exit = action.hasPrefix("exit-sync")
        if exit { #expect(try await probe.reports(2)[1] == "exit-sync deciding needed=true") }
        fake.resume()
        let reports = try await probe.reports(exit ? 3 : 2)
        #expect(try await probe.process.waitForExit() == 0)
        #expect(reports.last?.hasPrefix(confirmed) == true, "\(reports)")
        let datagrams = try await fake.datagrams.wait { $0.count == 61 }
        #expect(datagrams.map(\.text) == (0..<60).map { "STATUS=\($0)" } + ["BARRIER=1"])
    }

    /// The exit of the process systemd started waits for nothing when every datagram is in the
    /// manager's queue (systemd reads it before it handles the exit): no `BARRIER=1`, even from
    /// a manager that would never confirm one. `SYSTEMD_EXEC_PID` naming this process, or unset
    /// (before systemd 248), both count as the process systemd started.
    @Test(arguments: [nil, "self"])
    func theExitOfTheStartedProcessWaitsForNothing(execPID: String?) async throws {
        let fake = try FakeNotifySocket(answersBarriers: false)
        // "self": the probe reads its own pid into the variable (`env-self`), see below.
        var environment = ["NOTIFY_SOCKET": fake.path, "SYSTEMD_EXEC_PID": ""]
        if execPID != nil { environment["VIGIL_PROBE_EXEC_PID_SELF"] = "1" }
        let reports = try await NotifyProbe.run(
            ["send=STOPPING=1", "exit-sync=30000", "send=END"],
            environment: environment
        )
        #expect(reports[1].hasPrefix("exit-sync=confirmed needed=false "), "\(reports)")
        let datagrams = try await fake.datagrams.wait { $0.contains { $0.text == "END" } }
        #expect(datagrams.map(\.text) == ["STOPPING=1", "END"])
    }

    /// A process systemd did not start (a child of the main process: `SYSTEMD_EXEC_PID` names
    /// another) is found by its control group, gone once it exits: its exit waits for the barrier.
    /// So does one whose `SYSTEMD_EXEC_PID` is not a pid at all.
    @Test(arguments: ["1", "12x", "99999999999999999999999"])
    func theExitOfAnotherProcessWaitsForTheManager(execPID: String) async throws {
        let fake = try FakeNotifySocket()
        let reports = try await NotifyProbe.run(
            ["send=STOPPING=1", "exit-sync=30000"],
            environment: ["NOTIFY_SOCKET": fake.path, "SYSTEMD_EXEC_PID": execPID]
        )
        #expect(reports[1].hasPrefix("exit-sync=confirmed needed=true "), "\(reports)")
        let datagrams = try await fake.datagrams.wait { $0.count == 2 }
        #expect(datagrams.map(\.text) == ["STOPPING=1", "BARRIER=1"])
    }

    /// A barrier sent ahead at the stop's beginning because datagrams waited then is not waited
    /// for once they have all gone: the exit then needs none, even from a manager that never
    /// answers one.
    @Test func aBarrierSentAheadIsDroppedWhenTheQueueHasDrainedByTheExit() async throws {
        let fake = try FakeNotifySocket(answersBarriers: false)
        fake.pause()
        let probe = try NotifyProbe(
            ["burst=60", "prepare", "drain", "exit-sync=3000"],
            environment: ["NOTIFY_SOCKET": fake.path, "SYSTEMD_EXEC_PID": ""]
        )
        let burst = try await probe.reports(1)[0]
        let backlog = try #require(Int(burst.split(separator: " ")[1].dropFirst("backlog=".count)), "\(burst)")
        #expect(backlog > 0, "datagrams waited on the helper thread, so the barrier went ahead: \(burst)")
        // Resumed only once the probe prepared: resumed after the burst, the fake could drain
        // the queue before a probe slow to go on (two busy CPUs) prepared, and no barrier went
        // ahead (3 of 60 runs so).
        #expect(try await probe.reports(2)[1] == "prepared")
        fake.resume()
        let reports = try await probe.reports(4)
        #expect(try await probe.process.waitForExit() == 0)
        #expect(reports[1] == "prepared" && reports[2] == "drained", "\(reports)")
        #expect(reports[3].hasPrefix("exit-sync=confirmed needed=false "), "\(reports)")
        let datagrams = try await fake.datagrams.wait { $0.count == 61 }
        #expect(datagrams.map(\.text) == (0..<60).map { "STATUS=\($0)" } + ["BARRIER=1"])
    }

    @Test func aBarrierWithoutNotifySocketWaitsForNothing() async throws {
        let reports = try await NotifyProbe.run(["barrier=10000"])
        #expect(reports[0].hasPrefix("barrier=confirmed "), "\(reports)")
    }

    /// `vsock:` (systemd 254 and later, for a virtual machine reporting to its host) is refused
    /// with a reason instead of going through libsystemd.
    @Test func aVsockNotifySocketIsRefusedWithAReason() async throws {
        let reports = try await NotifyProbe.run(["send=READY=1"], environment: ["NOTIFY_SOCKET": "vsock:2:1234"])
        #expect(reports[0].hasPrefix("error errno=\(EAFNOSUPPORT): "), "\(reports)")
        #expect(reports[0].contains("vsock:2:1234"), "\(reports)")
        #expect(reports[0].contains("not supported"), "\(reports)")
    }

    /// libsystemd accepts up to 2^64 − 2 µs; beyond `Int64` the interval saturates, no trap.
    @Test func aHugeWatchdogIntervalSaturates() async throws {
        let huge = Watchdog(environment: { $0 == "WATCHDOG_USEC" ? "18446744073709551614" : nil }, pid: getpid())
        #expect(huge?.interval == .microseconds(Int64.max))
        #expect(Watchdog(microseconds: 0) == nil)
        #expect(
            try await NotifyProbe.run(["watchdog"], environment: ["WATCHDOG_USEC": "18446744073709551614"])
                == [
                    "watchdog interval=\(Duration.microseconds(Int64.max)) ping=\(Duration.microseconds(Int64.max) / 2)"
                ]
        )
    }
}

/// `WATCHDOG_USEC` and `WATCHDOG_PID` as `sd_watchdog_enabled(3)` reads them, from explicit
/// values: nothing here may trap, whatever the environment says.
struct WatchdogEnvironmentTests {
    static let pid: Int32 = 4242

    static func watchdog(_ usec: String?, pid: String? = nil) -> Watchdog? {
        Watchdog(environment: { ["WATCHDOG_USEC": usec, "WATCHDOG_PID": pid][$0] ?? nil }, pid: Self.pid)
    }

    @Test(arguments: [
        ("1", Duration.microseconds(1)),
        ("4000000", .seconds(4)),
        ("9223372036854775807", .microseconds(Int64.max)),
        ("9223372036854775808", .microseconds(Int64.max)),
        ("18446744073709551614", .microseconds(Int64.max)),
    ])
    func validIntervals(usec: String, interval: Duration) {
        #expect(Self.watchdog(usec)?.interval == interval)
        #expect(Self.watchdog(usec, pid: "4242")?.interval == interval)
    }

    /// Off: unset, empty, 0, infinity (2^64 − 1), beyond 2^64 − 1, signs, spaces, units, hex.
    @Test(arguments: [
        nil, "", "0", "18446744073709551615", "18446744073709551616", "99999999999999999999999999",
        "-1", "+5", " 5", "5 ", "5s", "0x10", "1e6", "٣", "５",
    ])
    func noWatchdog(usec: String?) {
        #expect(Self.watchdog(usec) == nil)
    }

    /// `WATCHDOG_PID` set: only this pid gets the watchdog; an invalid pid means none.
    @Test(arguments: [
        "4243", "0", "-4242", "", "4242x", "2147483648", "4294971538", "18446744073709551616", " 4242",
    ])
    func anotherOrInvalidPid(pid: String) {
        #expect(Self.watchdog("4000000", pid: pid) == nil)
    }

    /// Off because a value is not what systemd writes: said, where it was silent (helper 51:
    /// `+10000`, `' 10000'`, `abc` ran without the watchdog and without a word). Off on purpose
    /// (unset, 0, infinity, another pid's) says nothing.
    @Test func aGarbledValueIsNamed() {
        func problem(_ usec: String?, pid: String? = nil) -> String? {
            Watchdog.environmentProblem(environment: { ["WATCHDOG_USEC": usec, "WATCHDOG_PID": pid][$0] ?? nil })
        }
        #expect(
            problem("+10000")
                == "WATCHDOG_USEC=\"+10000\" is not a decimal number (systemd writes digits only): the watchdog is off. "
                + "Fix or unset WATCHDOG_USEC in the environment that started the daemon"
        )
        #expect(problem(" 10000")?.hasPrefix("WATCHDOG_USEC=\" 10000\" is not") == true)
        #expect(problem("99999999999999999999999999") != nil, "beyond 2^64 - 1")
        #expect(problem("4000000", pid: "4242x")?.hasPrefix("WATCHDOG_PID=\"4242x\" is not") == true)
        for quiet in [nil, "0", "18446744073709551615", "4000000"] { #expect(problem(quiet) == nil) }
        #expect(problem("4000000", pid: "4243") == nil, "another process's watchdog")
        #expect(problem(nil, pid: "garbled") == nil, "no watchdog asked for: WATCHDOG_PID is not read")
        #expect(problem("0", pid: "garbled") == nil, "off on purpose")
    }
}

import Glibc
import Testing
import VigilSystemd
import VigilTesting

/// `sd_notify` through a real datagram socket standing in for systemd's. Serialized: it sets
/// `NOTIFY_SOCKET` in this process's environment.
@Suite(.serialized) struct NotifierTests {
    @Test func sendsTheExactBytesFromThisProcess() async throws {
        let socket = try FakeNotifySocket()
        setenv("NOTIFY_SOCKET", socket.path, 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        let notifier = SystemdNotifier()
        #expect(notifier.isEnabled)
        try notifier.send("READY=1\nSTATUS=Running")
        try notifier.send("RELOADING=1\nMONOTONIC_USEC=123")
        try notifier.send("EXTEND_TIMEOUT_USEC=5000000")
        try notifier.send("WATCHDOG=trigger")
        let datagrams = try await socket.datagrams.wait { $0.count == 4 }
        #expect(
            datagrams.map(\.text) == [
                "READY=1\nSTATUS=Running", "RELOADING=1\nMONOTONIC_USEC=123", "EXTEND_TIMEOUT_USEC=5000000",
                "WATCHDOG=trigger",
            ]
        )
        #expect(datagrams.allSatisfy { $0.senderPID == getpid() })
        // sd_notify(0, …) leaves NOTIFY_SOCKET in place for later notifications.
        #expect(getenv("NOTIFY_SOCKET").map { String(cString: $0) } == socket.path)
    }

    @Test func withoutNotifySocketItIsANoOp() throws {
        unsetenv("NOTIFY_SOCKET")
        let notifier = SystemdNotifier()
        #expect(!notifier.isEnabled)
        try notifier.send("READY=1")
    }

    @Test func aFailedSendIsReported() throws {
        setenv("NOTIFY_SOCKET", "/nonexistent/vigil/notify.sock", 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        let error = #expect(throws: SystemdError.self) { try SystemdNotifier().send("READY=1") }
        #expect(error?.errno == ENOENT)
        #expect(error?.description.contains("NOTIFY_SOCKET") == true)
    }

    @Test func watchdogFromTheEnvironmentHonoursWatchdogPID() {
        setenv("WATCHDOG_USEC", "30000000", 1)
        defer {
            unsetenv("WATCHDOG_USEC")
            unsetenv("WATCHDOG_PID")
        }
        #expect(Watchdog.fromEnvironment()?.interval == .seconds(30))
        #expect(Watchdog.fromEnvironment()?.pingInterval == .seconds(15))
        setenv("WATCHDOG_PID", "\(getpid() + 1)", 1)
        #expect(Watchdog.fromEnvironment() == nil, "meant for another process")
        setenv("WATCHDOG_PID", "\(getpid())", 1)
        #expect(Watchdog.fromEnvironment() != nil)
        unsetenv("WATCHDOG_USEC")
        #expect(Watchdog.fromEnvironment() == nil)
    }

    /// `FDSTORE=1` goes as one datagram that carries the socket itself (`SCM_RIGHTS`), as
    /// `sd_pid_notify_with_fds` sends it: the fake receives a descriptor for the same socket.
    @Test func storingASocketPassesTheDescriptor() async throws {
        let fake = try FakeNotifySocket()
        setenv("NOTIFY_SOCKET", fake.path, 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        let socket = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { socket.close() }
        #expect(try socket.storeInServiceManager(name: "web"))
        try SystemdNotifier().send("READY=1")
        let datagrams = try await fake.datagrams.wait { $0.count == 2 }
        let sent = try #require(FakeNotifySocket.Datagram.PassedDescriptor(of: socket.fileDescriptor))
        #expect(datagrams[0].text == "FDSTORE=1\nFDNAME=web")
        #expect(datagrams[0].passedDescriptors == [sent])
        #expect(datagrams[0].senderPID == getpid())
        #expect(datagrams[1].text == "READY=1" && datagrams[1].passedDescriptors.isEmpty)
        // The socket stays open and usable in this process.
        #expect(fcntl(socket.fileDescriptor, F_GETFD) >= 0)
    }

    @Test func storingWithoutNotifySocketStoresNothing() throws {
        unsetenv("NOTIFY_SOCKET")
        let socket = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { socket.close() }
        #expect(try socket.storeInServiceManager(name: "web") == false)
    }

    @Test func aFailedStoreSaysWhy() throws {
        setenv("NOTIFY_SOCKET", "/nonexistent/vigil/notify.sock", 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        let socket = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { socket.close() }
        let error = #expect(throws: ListeningSocketError.self) { try socket.storeInServiceManager(name: "web") }
        #expect(error?.code == .storeFailed)
        #expect(error?.errno == ENOENT)
    }

    /// `vsock:` (systemd 254 and later, for a virtual machine reporting to its host) is refused
    /// with a reason instead of going through libsystemd.
    @Test func aVsockNotifySocketIsRefusedWithAReason() throws {
        setenv("NOTIFY_SOCKET", "vsock:2:1234", 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        let error = #expect(throws: SystemdError.self) { try SystemdNotifier().send("READY=1") }
        #expect(error?.errno == EAFNOSUPPORT)
        #expect(error?.description.contains("vsock:2:1234") == true)
        #expect(error?.description.contains("not supported") == true)
    }

    /// libsystemd accepts up to 2^64 − 2 µs; beyond `Int64` the interval saturates, no trap.
    @Test func aHugeWatchdogIntervalSaturates() {
        setenv("WATCHDOG_USEC", "18446744073709551614", 1)
        defer { unsetenv("WATCHDOG_USEC") }
        #expect(Watchdog.fromEnvironment()?.interval == .microseconds(Int64.max))
        #expect(Watchdog(microseconds: 0) == nil)
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
}

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

    /// libsystemd accepts up to 2^64 − 2 µs; beyond `Int64` the interval saturates, no trap.
    @Test func aHugeWatchdogIntervalSaturates() {
        setenv("WATCHDOG_USEC", "18446744073709551614", 1)
        defer { unsetenv("WATCHDOG_USEC") }
        #expect(Watchdog.fromEnvironment()?.interval == .microseconds(Int64.max))
        #expect(Watchdog(microseconds: 0) == nil)
    }
}

import Glibc
import Testing
import Vigil
import VigilTesting

/// Reloads that never stop coming (`VIGIL_FAILPOINTS=reload-loop`: each reload asks for the
/// next) must not make vigild deaf: on its one-thread event loop the mediator takes one event,
/// then lets the loop look at signals, timers and the other tasks before it takes the next.
/// Before, it took reload after reload in one run of its task: the loop never read the
/// signalfd again, and a `SIGTERM` went unanswered until `systemctl stop` killed the daemon.
@Suite struct ReloadLoopProcessTests {
    @Test func endlessReloadsStillLetTheStopAndTheWatchdogThrough() async throws {
        let socket = try FakeNotifySocket()
        let (daemon, _) = try await VigildBinary.start(
            socket: socket,
            environment: ["WATCHDOG_USEC": "400000", "VIGIL_FAILPOINTS": "reload-loop"]
        )
        daemon.send(SIGHUP)
        // Reloads follow one another (two datagrams each, up to 2,000 a second: every condition
        // here looks at a bounded part of what came, not all of it).
        let beforeReloads = socket.datagrams.values.count
        _ = try await socket.datagrams.wait("20 reloads") { $0.count >= beforeReloads + 40 }
        // The watchdog's pings go on between them: two more from here (each datagram is looked
        // at once, as the last one, when it comes).
        for _ in 1...2 {
            let from = socket.datagrams.values.count
            _ = try await socket.datagrams.wait("a watchdog ping") {
                $0.count > from && $0.last?.lines.contains("WATCHDOG=1") == true
            }
        }
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit(timeout: .seconds(10)) == 0)
        // The exit does not wait for the reader: STOPPING=1 may still be on its way.
        _ = try await socket.datagrams.wait("STOPPING=1") { $0.suffix(8).contains { $0.lines.contains("STOPPING=1") } }
    }
}

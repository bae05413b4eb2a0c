import Synchronization
import Testing
import VigilSystemd
import VigilTesting

@Suite struct WatchdogTests {
    /// Runs the watchdog against scripted probe answers with an instant clock; returns what it did.
    private func run(_ answers: [Watchdog.Health]) async -> [String] {
        let script = Mutex(answers)
        let events = Mutex<[String]>([])
        let record: @Sendable (String) -> Void = { event in events.withLock { $0.append(event) } }
        let task = Task {
            await Watchdog(interval: .seconds(4)).run(
                probe: { timeout in
                    record("probe \(timeout)")
                    return script.withLock { $0.isEmpty ? .stopping : $0.removeFirst() }
                },
                ping: { record("ping") },
                missed: { record("missed") },
                clock: TestClock(advancesWhenSlept: true).loopClock
            )
        }
        await task.value
        return events.withLock { $0 }
    }

    @Test func pingsWhenHealthyAndSaysSoWhenNot() async {
        #expect(
            await run([.healthy, .unhealthy, .healthy])
                == [
                    "probe 1.0 seconds", "ping", "probe 1.0 seconds", "missed", "probe 1.0 seconds", "ping",
                    "probe 1.0 seconds",
                ]
        )
    }

    /// A round that ran late (a slow probe) is followed by one ping at once, then the schedule
    /// goes on from there: no burst of zero waits to catch up (with WATCHDOG_USEC=1 that burst
    /// never ended).
    @Test func aLateRoundDoesNotMakeABurstToCatchUp() async {
        let clock = TestClock(advancesWhenSlept: true)
        let rounds = Mutex(0)
        await Watchdog(interval: .milliseconds(40)).run(
            probe: { _ in
                let round = rounds.withLock {
                    $0 += 1; return $0
                }
                if round == 1 { clock.advance(by: .milliseconds(200)) }  // ten ping intervals late
                return round < 4 ? .healthy : .stopping
            },
            ping: {},
            missed: {},
            clock: clock.loopClock
        )
        // Each round's wake-up: a ping interval (20 ms) in; the late round ends at 220 ms, the
        // next ping goes out then (a wait of zero), and the schedule goes on from there. With a
        // burst, the next ones would all be due at 220 ms.
        #expect(clock.sleeps == [.milliseconds(20), .milliseconds(220), .milliseconds(240), .milliseconds(260)])
    }

    /// Before: a probe during the stop counted as a failure and each was logged as a withheld
    /// ping. systemd has stopped its watchdog by then, and a ping would arm it again.
    @Test func stopsQuietlyOnceTheDaemonIsStopping() async {
        #expect(await run([.healthy, .stopping, .unhealthy]) == ["probe 1.0 seconds", "ping", "probe 1.0 seconds"])
    }
}

import Synchronization
import Testing
import VigilSystemd

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
                sleep: { _ in }
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

    /// Before: a probe during the stop counted as a failure and each was logged as a withheld
    /// ping. systemd has stopped its watchdog by then, and a ping would arm it again.
    @Test func stopsQuietlyOnceTheDaemonIsStopping() async {
        #expect(await run([.healthy, .stopping, .unhealthy]) == ["probe 1.0 seconds", "ping", "probe 1.0 seconds"])
    }
}

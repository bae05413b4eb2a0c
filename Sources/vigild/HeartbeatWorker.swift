import Logging
import Synchronization
import Vigil

/// The reference daemon's worker: every `interval` it logs `message` with the field
/// `VIGIL_HEARTBEAT=<count>` and counts.
final class HeartbeatWorker: Listener {
    struct Settings: Sendable, Hashable {
        var interval: Duration
        var message: String
    }

    let name = "heartbeat"
    private let state: Mutex<(settings: Settings, count: Int, task: Task<Void, Never>?)>

    init(settings: Settings) {
        state = Mutex((settings, 0, nil))
    }

    var count: Int { state.withLock { $0.count } }

    func start(context: ListenerContext) async throws {
        let logger = context.logger
        // The worker's loop outlives `start`; it is cancelled in `terminate`.
        let task = Task { [self] in
            while !Task.isCancelled {
                let settings = state.withLock { $0.settings }
                do {
                    try await Task.sleep(for: settings.interval)
                } catch {
                    return
                }
                let count = state.withLock { state -> Int in
                    state.count += 1
                    return state.count
                }
                logger.info("\(settings.message)", metadata: ["VIGIL_HEARTBEAT": "\(count)"])
            }
        }
        state.withLock { $0.task = task }
    }

    func userSignal(_ signal: ProcessSignal, context: ListenerContext) async throws {
        let count = self.count
        context.logger.info("Status report: \(count) heartbeats", metadata: ["VIGIL_HEARTBEAT": "\(count)"])
        context.reportStatus("Running (generation \(context.generation)); \(count) heartbeats")
    }

    func terminate(reason: TerminationReason, context: ListenerContext) async throws {
        let task = state.withLock { $0.task.take() }
        task?.cancel()
        await task?.value
    }
}

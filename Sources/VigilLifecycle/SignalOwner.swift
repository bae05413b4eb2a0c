import CVigilEventLoop
@preconcurrency import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Owns a set of signals for the process: installs their handlers and calls one function for
/// each delivery.
///
/// There is one owner per signal: creating a second owner for a signal that is already owned
/// is a programming error and stops the process with a message that says so.
///
/// - Important: Signal dispositions are process-wide. While an owner exists, nothing else in
///   the process may trap its signals (do not also give them to a `ServiceGroup`).
final class SignalOwner: Sendable {
    private static let owned = Mutex<Set<Int32>>([])
    private static let queue = DispatchQueue(label: "vigil.signals")

    private let signals: [ProcessSignal]
    private let sources: [any DispatchSourceSignal]
    private let loopHandler: LoopHandler?

    /// Under ``EventLoopExecutor`` the handler is called on the loop's thread from its signalfd.
    private final class LoopHandler: Sendable {
        let handler: @Sendable (ProcessSignal) -> Void
        init(_ handler: @escaping @Sendable (ProcessSignal) -> Void) { self.handler = handler }
    }

    /// Installs handlers for `signals`; `handler` runs on a private queue for each delivery
    /// (on the loop's thread under ``EventLoopExecutor``). Returns once every handler is
    /// installed, so a signal sent afterwards is never lost.
    init(signals: [ProcessSignal], handler: @escaping @Sendable (ProcessSignal) -> Void) {
        Self.owned.withLock { owned in
            for signal in signals {
                precondition(
                    owned.insert(signal.rawValue).inserted,
                    "\(signal) already has an owner in this process. Vigil owns each signal once: "
                        + "do not run two ListenerGroups, and do not give this signal to a ServiceGroup too."
                )
            }
        }
        self.signals = signals
        if EventLoopExecutor.isInstalled {
            let loopHandler = LoopHandler(handler)
            self.loopHandler = loopHandler
            self.sources = []
            let context = Unmanaged.passUnretained(loopHandler).toOpaque()
            for signal in signals {
                let failed = cvigil_loop_watch_signal(
                    signal.rawValue,
                    { number, context in
                        Unmanaged<LoopHandler>.fromOpaque(context!).takeUnretainedValue().handler(
                            ProcessSignal(rawValue: number)
                        )
                    },
                    context
                )
                precondition(failed == 0, "Cannot watch \(signal) with signalfd (errno \(failed))")
            }
            return
        }
        self.loopHandler = nil
        // Dispatch registers a source asynchronously; wait for every registration so that a
        // signal sent after `init` returns (say, right after READY=1) is never lost.
        let registered = DispatchGroup()
        self.sources = signals.map { signal in
            let source = DispatchSource.makeSignalSource(signal: signal.rawValue, queue: Self.queue)
            source.setEventHandler { handler(signal) }
            registered.enter()
            source.setRegistrationHandler { registered.leave() }
            source.activate()
            return source
        }
        registered.wait()
    }

    /// Stops delivering the signals and gives up their ownership.
    func release() {
        if loopHandler != nil {
            for signal in signals { cvigil_loop_unwatch_signal(signal.rawValue) }
        } else {
            for source in sources { source.cancel() }
            Self.queue.sync {}
        }
        Self.owned.withLock { owned in
            for signal in signals { owned.remove(signal.rawValue) }
        }
    }
}

import CVigilEventLoop
@preconcurrency import Dispatch

/// Delivers signals to one handler for as long as it is not cancelled: from the event loop's
/// signalfd, on the loop's thread, when ``EventLoopExecutor`` runs the process; else from
/// Dispatch signal sources on a private queue.
///
/// The choice is made here, where the loop lives, so that callers (`SignalOwner`) have one path.
/// Ownership (one watcher per signal, dispositions) is the caller's business.
package final class SignalWatch: Sendable {
    private static let queue = DispatchQueue(label: "vigil.signals")

    private let signals: [Int32]
    private let sources: [any DispatchSourceSignal]
    private let loopHandler: LoopHandler?

    /// Keeps the handler alive while the loop's C side holds a pointer to it.
    private final class LoopHandler: Sendable {
        let handler: @Sendable (Int32) -> Void
        init(_ handler: @escaping @Sendable (Int32) -> Void) { self.handler = handler }
    }

    /// Starts delivering `signals` to `handler`; returns once every delivery path is in place,
    /// so a signal sent afterwards is never lost (nor one already pending and blocked).
    package init(signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) {
        self.signals = signals
        guard EventLoopExecutor.isInstalled else {
            loopHandler = nil
            // Dispatch registers a source asynchronously; wait for every registration so that
            // a signal sent after `init` returns (say, right after READY=1) is never lost.
            let registered = DispatchGroup()
            sources = signals.map { signal in
                let source = DispatchSource.makeSignalSource(signal: signal, queue: Self.queue)
                source.setEventHandler { handler(signal) }
                registered.enter()
                source.setRegistrationHandler { registered.leave() }
                source.activate()
                return source
            }
            registered.wait()
            return
        }
        let loopHandler = LoopHandler(handler)
        self.loopHandler = loopHandler
        sources = []
        let context = Unmanaged.passUnretained(loopHandler).toOpaque()
        for signal in signals {
            let failed = cvigil_loop_watch_signal(
                signal,
                { number, context in
                    guard let context else { return }
                    Unmanaged<LoopHandler>.fromOpaque(context).takeUnretainedValue().handler(number)
                },
                context
            )
            precondition(
                failed == 0,
                "Cannot watch signal \(signal) with signalfd (errno \(failed)): the process is out of descriptors?"
            )
        }
    }

    /// Stops delivering. Under the loop the signals stay blocked (a pending stop signal must not
    /// kill a process that is already stopping); Dispatch's sources are cancelled and drained.
    package func cancel() {
        if loopHandler != nil {
            for signal in signals { cvigil_loop_unwatch_signal(signal) }
        } else {
            for source in sources { source.cancel() }
            Self.queue.sync {}
        }
    }
}

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
    private let unownedHandler: LoopHandler?

    /// Keeps the handler alive while the loop's C side holds a pointer to it.
    private final class LoopHandler: Sendable {
        let handler: @Sendable (Int32) -> Void
        init(_ handler: @escaping @Sendable (Int32) -> Void) { self.handler = handler }
    }

    /// Starts delivering `signals` to `handler`; returns once every delivery path is in place,
    /// so a signal sent afterwards is never lost (nor one already pending and blocked).
    ///
    /// - Parameter unowned: under the event loop, hears each signal the loop took and discarded
    ///   because nobody watches it (a real-time signal blocked at the loop's start: see
    ///   ``EventLoopExecutor/discardedSignals``), until ``cancel()``.
    /// - Throws: ``SignalWatchError`` when the loop's signalfd cannot take a signal (a loop
    ///   that could not get its descriptors never runs, so this is not `EMFILE`).
    package init(
        signals: [Int32],
        unowned: (@Sendable (Int32) -> Void)? = nil,
        handler: @escaping @Sendable (Int32) -> Void
    ) throws(SignalWatchError) {
        self.signals = signals
        guard EventLoopExecutor.isInstalled else {
            loopHandler = nil
            unownedHandler = nil
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
        let call: cvigil_signal_callback = { number, context in
            guard let context else { return }
            Unmanaged<LoopHandler>.fromOpaque(context).takeUnretainedValue().handler(number)
        }
        let context = Unmanaged.passUnretained(loopHandler).toOpaque()
        for (index, signal) in signals.enumerated() {
            let failed = cvigil_loop_watch_signal(signal, call, context)
            if failed != 0 {
                for watched in signals[..<index] { cvigil_loop_unwatch_signal(watched) }
                throw SignalWatchError(signal: signal, errno: failed)
            }
        }
        if let unowned {
            let unownedHandler = LoopHandler(unowned)
            self.unownedHandler = unownedHandler
            cvigil_loop_set_unowned_signal_callback(call, Unmanaged.passUnretained(unownedHandler).toOpaque())
        } else {
            unownedHandler = nil
        }
    }

    /// Stops delivering. Under the loop the signals stay blocked (a pending stop signal must not
    /// kill a process that is already stopping); Dispatch's sources are cancelled and drained.
    package func cancel() {
        if loopHandler != nil {
            if unownedHandler != nil { cvigil_loop_set_unowned_signal_callback(nil, nil) }
            signals.withUnsafeBufferPointer { cvigil_loop_unwatch_signals($0.baseAddress, $0.count) }
        } else {
            for source in sources { source.cancel() }
            Self.queue.sync {}
        }
    }
}

/// The event loop's signalfd could not take a signal (``SignalWatch``).
package struct SignalWatchError: Error, Sendable, CustomStringConvertible {
    /// The signal number.
    package let signal: Int32
    /// What `signalfd(2)` or `pthread_sigmask(3)` failed with.
    package let errno: Int32

    package var description: String {
        "cannot receive signal \(signal) through the event loop's signalfd: \(EventLoopExecutor.describe(errno))"
    }
}

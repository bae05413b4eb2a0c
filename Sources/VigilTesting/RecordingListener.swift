import Synchronization
import VigilLifecycle

/// A scripted listener that records each hook call in a shared ``AsyncRecorder``, so a test can
/// check ordering across listeners and await "listener X entered hook Y" instead of sleeping.
///
/// Each hook does what its ``Behavior`` says: return, throw, wait at a ``Gate``, or hang
/// (ignoring cancellation) to exercise budgets.
public final class RecordingListener: Listener {
    /// What a hook does when called.
    public enum Behavior: Sendable {
        /// Returns at once.
        case succeed
        /// Throws an error with this message.
        case fail(String)
        /// Waits until the gate opens, then returns.
        case wait(Gate)
        /// Never returns and ignores cancellation (for budget tests).
        case hang
    }

    /// One recorded call: `"<listener>.<hook>"`, e.g. `"config.prepare"`.
    public typealias Call = String

    public let name: String
    public let dependencies: [String]
    public let budgets: ListenerBudgets?
    private let log: AsyncRecorder<Call>
    private let behaviors: Mutex<[String: Behavior]>
    private let decision: Mutex<ReloadDecision>

    /// Creates a listener that records into `log`.
    ///
    /// - Parameters:
    ///   - name: the listener's name, as its calls are recorded.
    ///   - dependencies: the names of the listeners it starts after.
    ///   - budgets: its budgets; the group's when `nil`.
    ///   - log: where its calls are recorded.
    ///   - behaviors: per hook (`start`, `prepare`, `commit`, `abort`, `userSignal`,
    ///     `memoryPressure`, `terminate`, `health`); hooks not named succeed.
    ///   - decision: what `prepareReload` answers.
    public init(
        _ name: String,
        dependencies: [String] = [],
        budgets: ListenerBudgets? = nil,
        log: AsyncRecorder<Call>,
        behaviors: [String: Behavior] = [:],
        decision: ReloadDecision = .accept
    ) {
        self.name = name
        self.dependencies = dependencies
        self.budgets = budgets
        self.log = log
        self.behaviors = Mutex(behaviors)
        self.decision = Mutex(decision)
    }

    /// Changes what a hook does from now on.
    public func setBehavior(_ behavior: Behavior, for hook: String) {
        behaviors.withLock { $0[hook] = behavior }
    }

    /// Changes what `prepareReload` answers from now on.
    public func setDecision(_ decision: ReloadDecision) {
        self.decision.withLock { $0 = decision }
    }

    private static let neverOpened = Gate()

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private func perform(_ hook: String) async throws {
        log.append("\(name).\(hook)")
        switch behaviors.withLock({ $0[hook] }) ?? .succeed {
        case .succeed: break
        case .fail(let message): throw Failure(description: message)
        case .wait(let gate): await gate.wait()
        case .hang:
            // Deliberately ignores cancellation: a wedged listener.
            await Self.neverOpened.wait()
        }
        log.append("\(name).\(hook).done")
    }

    public func start(context: ListenerContext) async throws { try await perform("start") }

    public func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        try await perform("prepare")
        return decision.withLock { $0 }
    }

    public func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws {
        try await perform("commit")
    }

    public func abortReload(_ reload: ReloadTransaction, context: ListenerContext) async {
        try? await perform("abort")
    }

    public func userSignal(_ signal: ProcessSignal, context: ListenerContext) async throws {
        try await perform("userSignal")
    }

    public func memoryPressure(context: ListenerContext) async throws { try await perform("memoryPressure") }

    public func terminate(reason: TerminationReason, context: ListenerContext) async throws {
        try await perform("terminate")
    }

    public func checkHealth(context: ListenerContext) async throws { try await perform("health") }
}

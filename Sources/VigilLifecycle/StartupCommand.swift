/// One ordered start-up step that runs before any listener starts: the daemon's own (its
/// directories and locks, before the configuration is read). A daemon author's work at start is
/// a listener's `start`, which its dependencies order.
///
/// A step that throws or overruns its budget aborts start-up: the daemon exits non-zero with
/// the step's name and the reason.
package protocol StartupCommand: Sendable {
    /// A name for logs and errors.
    var name: String { get }

    /// Runs the step. Put what it produces in `context.values` for the listeners.
    func run(context: ListenerContext) async throws
}

/// A ``StartupCommand`` made from a closure: `StartupStep("load configuration") { context in … }`.
package struct StartupStep: StartupCommand {
    package let name: String
    private let body: @Sendable (ListenerContext) async throws -> Void

    /// Creates a step named `name` that runs `body`.
    package init(_ name: String, _ body: @escaping @Sendable (ListenerContext) async throws -> Void) {
        self.name = name
        self.body = body
    }

    package func run(context: ListenerContext) async throws { try await body(context) }
}

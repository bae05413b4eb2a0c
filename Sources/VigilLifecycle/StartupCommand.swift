/// One ordered start-up step that runs before any listener starts (the command pattern; a
/// ``StartupStep`` is one made from a closure, the usual way to write one):
/// load the configuration, open the state store, …
///
/// A step that throws or overruns its budget aborts start-up: the daemon exits non-zero with
/// the step's name and the reason.
public protocol StartupCommand: Sendable {
    /// A name for logs and errors.
    var name: String { get }

    /// Runs the step. Put what it produces in `context.values` for the listeners.
    func run(context: ListenerContext) async throws
}

/// A ``StartupCommand`` made from a closure: `StartupStep("load configuration") { context in … }`.
public struct StartupStep: StartupCommand {
    public let name: String
    private let body: @Sendable (ListenerContext) async throws -> Void

    /// Creates a step named `name` that runs `body`.
    public init(_ name: String, _ body: @escaping @Sendable (ListenerContext) async throws -> Void) {
        self.name = name
        self.body = body
    }

    public func run(context: ListenerContext) async throws { try await body(context) }
}

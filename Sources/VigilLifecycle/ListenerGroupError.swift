/// An error from building or running a ``ListenerGroup``.
package struct ListenerGroupError: Error, Hashable, CustomStringConvertible {
    /// What went wrong, as an opaque code to compare against.
    package struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Wrapped: Hashable, Sendable {
            case duplicateListener, missingDependency, dependencyCycle, startFailed, missingValue
            case alreadyRunning, stopFailed
        }
        private let wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// Two listeners share a name.
        package static let duplicateListener = Self(.duplicateListener)
        /// A listener depends on a name that is not in the group.
        package static let missingDependency = Self(.missingDependency)
        /// Dependencies form a cycle.
        package static let dependencyCycle = Self(.dependencyCycle)
        /// A start-up command or a listener failed to start.
        package static let startFailed = Self(.startFailed)
        /// A value a listener needs was not in the store.
        package static let missingValue = Self(.missingValue)
        /// A listener failed to stop cleanly (its final work was not done, e.g. a checkpoint
        /// that could not be written); the daemon stopped, but should exit non-zero.
        package static let stopFailed = Self(.stopFailed)
        /// `run()` was called twice.
        package static let alreadyRunning = Self(.alreadyRunning)

        package var description: String { String(describing: wrapped) }
    }

    /// The kind of error.
    package let code: Code
    /// What happened and what to do, in full sentences; from a listener's hook (a
    /// ``ServiceListener``'s part), what completes "'<listener>' …" in the group's report.
    package let message: String
    /// The listener or step at fault, when there is one.
    package let listener: String?
    /// Where the error was raised.
    package let file: String
    /// Where the error was raised.
    package let line: Int

    init(_ code: Code, _ message: String, listener: String? = nil, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.listener = listener
        self.file = file
        self.line = line
    }

    package var description: String { message }

    static func missingValue(_ key: String, file: String, line: Int) -> Self {
        Self(
            .missingValue,
            "No value for '\(key)' in the store. Declare a dependency on the listener or start-up command that provides it.",
            file: file,
            line: line
        )
    }
}

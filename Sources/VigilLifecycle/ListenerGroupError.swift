/// An error from building or running a ``ListenerGroup``.
package struct ListenerGroupError: Error, Hashable, CustomStringConvertible {
    /// What went wrong (package-internal, so a plain enum: no opaque wrapper to evolve).
    package enum Code: Hashable, Sendable {
        /// Two listeners share a name.
        case duplicateListener
        /// A listener depends on a name that is not in the group.
        case missingDependency
        /// Dependencies form a cycle.
        case dependencyCycle
        /// A start-up command or a listener failed to start.
        case startFailed
        /// A value a listener needs was not in the store.
        case missingValue
        /// A listener failed to stop cleanly (its final work was not done, e.g. a checkpoint
        /// that could not be written); the daemon stopped, but should exit non-zero.
        case stopFailed
        /// `run()` was called twice.
        case alreadyRunning
        /// A listener's name is empty.
        case unnamedListener
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

/// `text` ended as a sentence, for a message that goes on after a reason it did not write: a full
/// stop after it, unless it ends with one already, or with a question or an exclamation mark (a
/// reason that asks `did you mean "interval"?`).
package func sentence(_ text: String) -> String {
    switch text.last {
    case ".", "?", "!": text
    default: text + "."
    }
}

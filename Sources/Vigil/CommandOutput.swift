import VigilLifecycle
import VigilPOSIX
import VigilPlatform

/// Where the commands write: stdout and stderr unless a test captures them.
package struct CommandOutput: Sendable {
    package var standardOutput: @Sendable (String) -> Void
    package var standardError: @Sendable (String) -> Void

    package init(
        standardOutput: @escaping @Sendable (String) -> Void,
        standardError: @escaping @Sendable (String) -> Void
    ) {
        self.standardOutput = standardOutput
        self.standardError = standardError
    }

    package static let process = CommandOutput(
        standardOutput: { writeAll(1, $0) },
        standardError: { writeAll(2, $0) }
    )

    /// A diagnostic on stderr: one line, control characters escaped (under systemd each stderr
    /// line is a journal entry and a `<N>` prefix sets its priority, so a newline from a file
    /// must never reach it raw).
    package func error(_ message: String) {
        standardError(DisplayText.escapingControlCharacters(message) + "\n")
    }

    package func print(_ text: String) { standardOutput(text + "\n") }

    private static func writeAll(_ descriptor: Int32, _ text: String) {
        SystemCall.writeAll(text, to: descriptor)
    }
}

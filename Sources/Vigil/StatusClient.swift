import VigilLifecycle
import VigilPlatform

/// `<name> status`: the runtime status file, as text or JSON.
package struct StatusClient: Sendable {
    package var name: String
    package var directories: DaemonDirectories
    package var output: CommandOutput
    package var lines: @Sendable (RuntimeStatus) -> [(label: String, value: String)]

    /// Prints the status; returns 0, or 2 when there is no daemon.
    package func run(runtimeDirectory: String?, json: Bool) -> Int32 {
        let status: RuntimeStatus
        do {
            (_, status) = try directories.runtimeForClient(runtimeDirectory)
        } catch {
            output.error("\(name) status: \(error)")
            return 2
        }
        if json {
            do {
                output.standardOutput(try status.json())
            } catch {
                output.error("\(name) status: cannot encode the status: \(error)")
                return 2
            }
            return 0
        }
        output.print(text(status))
        return 0
    }

    /// The human-readable status: the library's lines with the daemon's after `last reload`.
    /// Everything that came from the file has its control characters escaped.
    package func text(_ status: RuntimeStatus) -> String {
        func line(_ label: String, _ value: String) -> String {
            let label = DisplayText.escapingControlCharacters(label) + ":"
            let padding = String(repeating: " ", count: max(1, 16 - label.count))
            return "  " + label + padding + DisplayText.escapingControlCharacters(value)
        }
        let reload = status.lastReload.map { "\($0.result)" + ($0.reason.map { ": \($0)" } ?? "") } ?? "none"
        var text = [
            "\(name) pid \(status.pid): \(DisplayText.escapingControlCharacters(status.state)), configuration generation \(status.generation)",
            line("last reload", reload),
        ]
        text += lines(status).map { line($0.label, $0.value) }
        text += [
            line("uptime", "\(status.uptimeSeconds) s"),
            line("previous stop", status.previousShutdownClean ? "clean" : "UNCLEAN (crash, kill -9 or power loss)"),
        ]
        return text.joined(separator: "\n")
    }
}

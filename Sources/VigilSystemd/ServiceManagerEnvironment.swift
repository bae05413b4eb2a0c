import VigilPlatform

/// What the process can tell about the service manager that started it, from the variables
/// systemd sets — never from the parent's process name.
package struct ServiceManagerEnvironment: Sendable, Hashable {
    /// `NOTIFY_SOCKET`: where readiness goes (`Type=notify`).
    package var notifySocket: String?
    /// `true` when `JOURNAL_STREAM` names the very file stderr is (`st_dev:st_ino`), so the
    /// native journal protocol can replace stderr lines.
    package var stderrIsJournal: Bool
    /// `INVOCATION_ID`: set for every unit run.
    package var invocationID: String?
    /// `true` when `SYSTEMD_EXEC_PID` is this process.
    package var isExecutedProcess: Bool
    /// `true` when stderr is a terminal.
    package var stderrIsTerminal: Bool
    /// `true` when `NO_COLOR` is set (https://no-color.org).
    package var noColor: Bool

    /// Under a service manager: any of `NOTIFY_SOCKET`, a matching `JOURNAL_STREAM`,
    /// `SYSTEMD_EXEC_PID` naming this process, or `INVOCATION_ID`.
    package var isUnderServiceManager: Bool {
        notifySocket != nil || stderrIsJournal || isExecutedProcess || invocationID != nil
    }

    /// Reads this process's environment and stderr.
    package static func current() -> Self {
        var info = stat()
        let stderrID: (UInt64, UInt64)? =
            fstat(2, &info) == 0 ? (UInt64(info.st_dev), UInt64(info.st_ino)) : nil
        return Self(
            environment: { name in getenv(name).map { String(cString: $0) } },
            stderr: stderrID,
            stderrIsTerminal: isatty(2) == 1,
            pid: getpid()
        )
    }

    /// Decides from explicit inputs (tests use this).
    ///
    /// - Parameters:
    ///   - environment: looks a variable up.
    ///   - stderr: `st_dev` and `st_ino` of fd 2, or `nil` when it is closed.
    ///   - stderrIsTerminal: whether fd 2 is a TTY.
    ///   - pid: this process's pid.
    package init(
        environment: (String) -> String?,
        stderr: (device: UInt64, inode: UInt64)?,
        stderrIsTerminal: Bool,
        pid: Int32
    ) {
        self.notifySocket = environment("NOTIFY_SOCKET").flatMap { $0.isEmpty ? nil : $0 }
        self.invocationID = environment("INVOCATION_ID").flatMap { $0.isEmpty ? nil : $0 }
        self.isExecutedProcess = environment("SYSTEMD_EXEC_PID").flatMap { Int32($0) } == pid
        self.stderrIsTerminal = stderrIsTerminal
        self.noColor = environment("NO_COLOR").map { !$0.isEmpty } ?? false
        if let stream = environment("JOURNAL_STREAM"), let stderr {
            let parts = stream.split(separator: ":")
            self.stderrIsJournal =
                parts.count == 2 && UInt64(parts[0]) == stderr.device && UInt64(parts[1]) == stderr.inode
        } else {
            self.stderrIsJournal = false
        }
    }
}

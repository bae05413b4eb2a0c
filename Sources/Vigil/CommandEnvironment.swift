import VigilLifecycle
import VigilPlatform

/// What the commands read from the process: environment variables and the effective uid.
/// Tests pass their own.
package struct CommandEnvironment: Sendable {
    package var variable: @Sendable (String) -> String?
    package var effectiveUID: uid_t

    package init(variable: @escaping @Sendable (String) -> String?, effectiveUID: uid_t) {
        self.variable = variable
        self.effectiveUID = effectiveUID
    }

    /// The process's environment and euid.
    package static var process: CommandEnvironment {
        CommandEnvironment(
            variable: { name in getenv(name).map { String(cString: $0) } },
            effectiveUID: geteuid()
        )
    }

    /// A variable that is set and not empty; when systemd lists several directories separated
    /// by colons, the first.
    package func directory(_ name: String) -> String? {
        guard let value = variable(name), !value.isEmpty else { return nil }
        return String(value.split(separator: ":").first ?? Substring(value))
    }
}

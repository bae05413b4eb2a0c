import VigilLifecycle
import VigilPlatform

/// The directories a daemon named `name` uses when the command line does not say.
package struct DaemonDirectories: Sendable {
    package var name: String
    package var environment: CommandEnvironment

    /// What is wrong with the directories systemd passes (`CONFIGURATION_DIRECTORY`,
    /// `STATE_DIRECTORY`, `RUNTIME_DIRECTORY`), or `nil`: systemd sets absolute paths, and a
    /// relative or mangled one (bytes that are not UTF-8 come through as U+FFFD) would name
    /// another directory, or no file at all, which for the configuration means the embedded
    /// default, silently.
    package var systemdDirectoryProblem: String? {
        for variable in ["CONFIGURATION_DIRECTORY", "STATE_DIRECTORY", "RUNTIME_DIRECTORY"] {
            guard let value = environment.variable(variable), !value.isEmpty else { continue }
            let entries = value.split(separator: ":", omittingEmptySubsequences: false)
            if let bad = entries.first(where: { !$0.hasPrefix("/") || $0.unicodeScalars.contains("\u{FFFD}") }) {
                return "\(variable)=\(DisplayText.quoted(value)) holds \(DisplayText.quoted(String(bad))), "
                    + "not an absolute path in UTF-8 (systemd sets absolute paths: unset it, or fix the unit)"
            }
            if let long = entries.first(where: { $0.utf8.count > Self.pathLimit }) {
                return "\(variable)=\(DisplayText.quoted(value)) holds a path of \(long.utf8.count) bytes, "
                    + "longer than the \(Self.pathLimit) a path may have (PATH_MAX): unset it, or fix the unit"
            }
        }
        return nil
    }

    /// The longest path the system opens (`PATH_MAX` less its NUL): a longer one from the
    /// environment or the command line is refused before it is used, so that no message
    /// echoes it in full (a 128 KiB value made a 393 KB error).
    package static let pathLimit = Int(PATH_MAX) - 1

    /// The explicit file, else `$CONFIGURATION_DIRECTORY/<name>.json` (optional), else the
    /// embedded default.
    package func configurationSource(_ explicit: String?) -> ConfigurationSource {
        if let explicit { return .file(explicit, required: true) }
        if let directory = environment.directory("CONFIGURATION_DIRECTORY") {
            return .file(directory + "/\(name).json", required: false)
        }
        return .embeddedDefault
    }

    /// The explicit directory, else `$STATE_DIRECTORY`, else the directory systemd would give
    /// the daemon's unit: `/var/lib/<name>` for root (a system service's `StateDirectory=`,
    /// whatever `HOME` says, so a daemon run by hand as root keeps its state where the service
    /// does), and for others `$XDG_STATE_HOME/<name>`, else `$HOME/.local/state/<name>` (a user
    /// service's; each only when it is an absolute path, as the XDG specification says); `nil`
    /// when none applies. Never a shared directory such as `/tmp`, where another user could have
    /// planted it. The same rule as ``runtime(_:)``'s.
    package func state(_ explicit: String?) -> String? {
        if let explicit { return explicit }
        if let directory = environment.directory("STATE_DIRECTORY") { return directory }
        if environment.effectiveUID == 0 { return "/var/lib/" + name }
        let absolute = { (name: String) in environment.directory(name).flatMap { $0.hasPrefix("/") ? $0 : nil } }
        if let directory = absolute("XDG_STATE_HOME") { return directory + "/" + name }
        if let home = absolute("HOME") { return home + "/.local/state/" + name }
        return nil
    }

    /// A runtime directory and whether it is the last resort in `/tmp`, which must be the
    /// caller's own with mode 0700 (see ``TrustedDirectory``).
    package struct Runtime: Equatable, Sendable {
        package var path: String
        package var privateToCaller = false

        package init(path: String, privateToCaller: Bool = false) {
            self.path = path
            self.privateToCaller = privateToCaller
        }
    }

    /// The system-wide runtime directory: `/run/<name>`.
    package var systemRuntime: String { "/run/" + name }

    /// The explicit directory, else `$RUNTIME_DIRECTORY` (systemd's `RuntimeDirectory=`), else
    /// `/run/<name>` for root, `$XDG_RUNTIME_DIR/<name>` for others, and only as a last resort
    /// `/tmp/<name>-<uid>` — a directory the caller owns with mode 0700.
    package func runtime(_ explicit: String?) -> Runtime {
        if let explicit { return Runtime(path: explicit) }
        if let directory = environment.directory("RUNTIME_DIRECTORY") { return Runtime(path: directory) }
        if environment.effectiveUID == 0 { return Runtime(path: systemRuntime) }
        if let directory = environment.directory("XDG_RUNTIME_DIR") { return Runtime(path: directory + "/" + name) }
        return Runtime(path: "/tmp/\(name)-\(environment.effectiveUID)", privateToCaller: true)
    }

    /// For `reload` and `status`: the explicit or systemd-given directory; else the caller's
    /// default (``runtime(_:)``), then the unit's `/run/<name>`: the first that is trusted and
    /// holds a status file that reads. Never a directory that fails ``TrustedDirectory``'s rule.
    ///
    /// - Throws: ``ControlClientError`` naming each directory tried and why it was not used.
    package func runtimeForClient(_ explicit: String?) throws(ControlClientError) -> (TrustedDirectory, RuntimeStatus) {
        let first = runtime(explicit)
        var candidates = [first]
        if explicit == nil && environment.directory("RUNTIME_DIRECTORY") == nil && first.path != systemRuntime {
            candidates.append(Runtime(path: systemRuntime))
        }
        var reasons: [String] = []
        for candidate in candidates {
            do {
                let directory = try TrustedDirectory.open(candidate.path, privateToCaller: candidate.privateToCaller)
                return (directory, try RuntimeStatus.read(from: directory))
            } catch let error as SystemError where error.errno == ENOENT {
                reasons.append("no \(error.path)")
            } catch {
                reasons.append("\(error)")
            }
        }
        throw ControlClientError("no running \(name) found (\(reasons.joined(separator: "; ")))")
    }
}

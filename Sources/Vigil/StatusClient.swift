import VigilLifecycle
import VigilPlatform

/// `<name> status`: the runtime status file, as text or JSON.
package struct StatusClient: Sendable {
    package var name: String
    package var directories: DaemonDirectories
    package var output: CommandOutput
    package var lines: @Sendable (RuntimeStatus) -> [(label: String, value: String)]

    /// Prints the status; returns 0, or 2 when there is no daemon: no status file, or one whose
    /// process is gone (stopped, killed, crashed) or is not the daemon that wrote it. A file
    /// whose process is gone is still printed, as what its daemon last wrote (text: "not
    /// running"), and the reason goes to stderr: nothing it holds (`previousShutdownClean`,
    /// the last reload) is lost to a script.
    package func run(runtimeDirectory: String?, json: Bool) -> Int32 {
        let status: RuntimeStatus
        var stale: String?
        var here: Int32?
        do {
            let directory: TrustedDirectory
            (directory, status) = try directories.runtimeForClient(runtimeDirectory)
            stale = Self.notRunning(
                status,
                file: directory.path(of: RuntimeStatus.fileName),
                directoryOwner: directory.owner,
                holdsInstanceLock: { directory.instanceLockIsHeld(by: $0, strict: false) }
            )
            // A daemon in a PID namespace of its own records its pid there.
            if stale != nil {
                let holder = directory.instanceLockHolder(strict: false)
                here = Self.namespacedDaemon(status, holder: holder)
                if here != nil { stale = nil }
            }
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
        } else {
            output.print(text(status, running: stale == nil, pidHere: here))
        }
        guard let stale else { return 0 }
        output.error("\(name) status: no running \(name): \(stale)")
        return 2
    }

    /// Why the process `file` describes is not the daemon that wrote it, or `nil` when it is
    /// (or, where `/proc` hides it, may be). The checks of ``ReloadClient/verifiedDaemon``,
    /// without `$MAINPID`: nothing is signalled here.
    package static func notRunning(
        _ status: RuntimeStatus,
        file: String,
        directoryOwner: uid_t,
        startTime: (Int32) -> UInt64? = ProcessStartTime.of,
        processOwner: (Int32) -> uid_t? = ReloadClient.processOwner,
        holdsInstanceLock: (Int32) -> Bool = { _ in false },
        hasExited: (Int32) -> Bool = ProcessStartTime.hasExited
    ) -> String? {
        let pid = status.pid
        // Pid 1 is a daemon's own in a PID namespace of its own (PrivatePIDs=); nothing is
        // signalled here, so it is not refused as `reload` refuses it.
        guard pid > 0 else { return "\(file) names pid \(pid), not a daemon's" }
        // "stopped" and "failed" are the last words of a daemon that ended on its own (a stop, a
        // start that failed: exit 1 with the reason in its log); any other state was cut short.
        let how =
            switch status.state {
            case "stopped": "it stopped"
            case "failed": "its start failed; the reason is in its log"
            default: "it was killed or crashed while \(DisplayText.quoted(status.state, limit: 16))"
            }
        guard kill(pid, 0) == 0 || errno != ESRCH else {
            return "\(file) describes pid \(pid), which is no longer running (\(how))"
        }
        if let actual = startTime(pid), let recorded = status.processStartTime, actual != recorded {
            return "\(file) describes pid \(pid), which is no longer running (another process has that pid now)"
        }
        // With no start time to prove it (a file of an older vigild, or a forged one), the pid
        // could be any process of the directory's owner: only the holder of the directory's
        // instance lock is the daemon.
        if status.processStartTime == nil, !holdsInstanceLock(pid) {
            return "\(file) names pid \(pid) but not when it started (written by an older daemon, or not by one), "
                + "and pid \(pid) does not hold the directory's instance.lock: it is not known to be the daemon"
        }
        // A zombie keeps its pid and its start time until its parent reaps it (a parent that
        // never waits: a script, a test harness; systemd reaps at once).
        if hasExited(pid) {
            return "\(file) describes pid \(pid), which is no longer running (\(how); its parent has not reaped it yet)"
        }
        if let user = processOwner(pid), user != directoryOwner, !holdsInstanceLock(pid) {
            return
                "\(file) names pid \(pid), which runs as uid \(user), not as the directory's owner (uid \(directoryOwner))"
        }
        return nil
    }

    /// The daemon's pid here when it runs in a PID namespace of its own: it records its pid
    /// there (1, say), which names another process here or none; the one process that holds
    /// the directory's `instance.lock` (`holder`, as `/proc/locks` shows it here) is the daemon
    /// when it started at the time the file records. `nil` otherwise.
    package static func namespacedDaemon(
        _ status: RuntimeStatus,
        holder: Int32?,
        startTime: (Int32) -> UInt64? = ProcessStartTime.of
    ) -> Int32? {
        guard let holder, holder > 1, holder != status.pid, let recorded = status.processStartTime,
            startTime(holder) == recorded
        else { return nil }
        return holder
    }

    /// The human-readable status: the library's lines with the daemon's after `last reload`.
    /// Everything that came from the file has its control characters escaped. `pidHere`: the
    /// daemon's pid in this PID namespace when it is not the one it records.
    package func text(_ status: RuntimeStatus, running: Bool = true, pidHere: Int32? = nil) -> String {
        func line(_ label: String, _ value: String) -> String {
            let label = DisplayText.escapingControlCharacters(label) + ":"
            let padding = String(repeating: " ", count: max(1, 16 - label.count))
            return "  " + label + padding + DisplayText.escapingControlCharacters(value)
        }
        let reload = status.lastReload.map { "\($0.result)" + ($0.reason.map { ": \($0)" } ?? "") } ?? "none"
        var text = [
            "\(name) pid \(pidHere.map { "\($0) (\(status.pid) in its own PID namespace)" } ?? "\(status.pid)"): "
                + (running ? "" : "not running; last written: ")
                + "\(DisplayText.escapingControlCharacters(status.state)), configuration generation \(status.generation)",
            line("last reload", reload),
        ]
        text += lines(status).map { line($0.label, $0.value) }
        // Not running: no uptime (counted from the start to now, it would grow for a dead daemon).
        if running { text.append(line("uptime", "\(status.uptimeSeconds) s")) }
        let previous =
            switch status.previousShutdownClean {
            case true?: "clean"
            case false?: "UNCLEAN (crash, kill -9 or power loss)"
            case nil: "unknown (not read yet, a first run, or the daemon keeps no record of it)"
            }
        // For a daemon that is gone, its own stop is the first line's state ("running" when it
        // was killed); the record is of the stop before that run.
        text.append(line(running ? "previous stop" : "stop before it", previous))
        return text.joined(separator: "\n")
    }
}

extension TrustedDirectory {
    /// Whether `pid` holds this directory's `instance.lock` (`InstanceLockHolder.holds`); with
    /// `strict: false`, for `status`, a holder whose fdinfo this process may not read counts.
    func instanceLockIsHeld(by pid: Int32, strict: Bool = true) -> Bool {
        InstanceLockHolder.holds(pid, lock: path(of: InstanceLock.fileName), owner: owner, strict: strict)
    }

    /// The one process, by its pid here, that holds this directory's `instance.lock`.
    func instanceLockHolder(strict: Bool = true) -> Int32? {
        InstanceLockHolder.holder(lock: path(of: InstanceLock.fileName), owner: owner, strict: strict)
    }
}

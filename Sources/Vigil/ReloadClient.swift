import VigilLifecycle
import VigilPlatform

/// `<name> reload`: signal the daemon that the status file describes, then wait for the outcome.
package struct ReloadClient: Sendable {
    package var name: String
    package var directories: DaemonDirectories
    package var output: CommandOutput

    /// The smallest `--timeout`, in seconds: two polls of the status file (a shorter one gave
    /// up before the daemon could answer, and said so of a reload that was applied).
    package static let minimumTimeout = 0.01
    /// The largest `--timeout`, in seconds.
    package static let maximumTimeout = 86_400.0

    /// Runs the client; returns its exit status: 0 applied (or superseded by a stop), 1
    /// rejected, 2 no daemon, not the daemon, or no answer in time.
    package func run(pid: Int32?, runtimeDirectory: String?, timeout: Double, signal: ProcessSignal?) -> Int32 {
        do {
            return try reload(pid: pid, runtimeDirectory: runtimeDirectory, timeout: timeout, signal: signal)
        } catch {
            output.error("\(name) reload: \(error)")
            return 2
        }
    }

    private func reload(
        pid: Int32?,
        runtimeDirectory: String?,
        timeout: Double,
        signal requested: ProcessSignal?
    ) throws(ControlClientError) -> Int32 {
        if let pid, pid <= 1 {
            throw ControlClientError(
                "refusing to signal pid \(pid): only a \(name)'s own pid (more than 1) can be reloaded"
            )
        }
        // First: a stop's SIGTERM that came after exec (main blocked it for the daemon) is
        // pending, and must be recorded rather than lost when the daemon is found gone.
        let interruption = ClientInterruption(name: name)
        let (directory, status) = try directories.runtimeForClient(runtimeDirectory)
        let file = directory.path(of: RuntimeStatus.fileName)
        // `systemctl stop` right behind `systemctl reload`: systemd sends SIGTERM to the daemon
        // and to this client at once, and the daemon may be stopping or gone before this client
        // has signalled it (systemd spends tens of milliseconds setting up the client's sandbox).
        // The stop supersedes the reload, as it does below once the signal is sent.
        func superseded(by signal: Int32, pid: Int32) -> Int32 {
            output.error(
                "\(name) reload: \(ProcessSignal(rawValue: signal)) while pid \(pid) is stopping: the stop supersedes the reload"
            )
            return 0
        }
        func supersededByAStop() -> Int32? {
            guard let signal = interruption.received,
                let current = try? RuntimeStatus.read(from: directory),
                current.pid == status.pid, ["stopping", "stopped"].contains(current.state)
            else { return nil }
            return superseded(by: signal, pid: status.pid)
        }
        let target: Int32
        do {
            target = try Self.verifiedDaemon(
                status,
                requested: pid,
                file: file,
                name: name,
                directoryOwner: directory.owner,
                holdsInstanceLock: { directory.instanceLockIsHeld(by: $0) },
                lockHolder: { directory.instanceLockHolder() },
                mainPID: directories.environment.directory("MAINPID")
            )
        } catch {
            if let superseded = supersededByAStop() { return superseded }
            throw error
        }
        let signal = try Self.signal(requested, for: status, target: target, file: file)
        let sent = MonotonicClock.microseconds()
        guard kill(target, signal.rawValue) == 0 else {
            if errno == ESRCH, let superseded = supersededByAStop() { return superseded }
            throw ControlClientError("cannot signal pid \(target): \(String(cString: strerror(errno)))")
        }
        // The parser bounds the timeout (0.01 ≤ timeout ≤ 86400): the product fits in a UInt64.
        var deadline = sent + UInt64(timeout * 1_000_000)
        var interrupted: Int32?
        var rejected = false
        while MonotonicClock.microseconds() < deadline {
            if let signal = interruption.received { interrupted = signal }
            // The daemon answers through its status file; poll it every 5 ms.
            let current = try? RuntimeStatus.read(from: directory)
            // The same daemon's answer: its pid as it records it (in a PID namespace of its own,
            // not `target`).
            if !rejected, let current, current.pid == status.pid, let reload = current.lastReload,
                reload.beganMonotonicUsec >= sent
            {
                if reload.result == "applied" {
                    output.print("\(name): reload applied; configuration generation \(current.generation) is in force")
                    return 0
                }
                // The reason comes from the file (up to its 256 KiB): cut as STATUS= is.
                let reason = reload.reason.map { $0.count > 1024 ? $0.prefix(1024) + "… (\($0.utf8.count) bytes)" : $0 }
                output.error(
                    "\(name): reload rejected: \(reason ?? "unknown reason"); still running generation \(current.generation)"
                )
                guard interrupted != nil else { return 1 }
                // Stopped while the rejected reload ran: wait briefly for the stop to show.
                rejected = true
                deadline = min(deadline, MonotonicClock.microseconds() + 5_000_000)
            }
            let gone = (kill(target, 0) != 0 && errno == ESRCH) || ProcessStartTime.hasExited(target)
            if let interrupted, gone || current.map({ ["stopping", "stopped"].contains($0.state) }) == true {
                // `systemctl stop` during `systemctl reload`: systemd cancels the reload job and
                // sends SIGTERM to the whole unit, this client included. The stop supersedes the
                // reload; exiting 0 keeps a clean stop clean (killed by the signal, this client
                // makes systemd record Result=signal for the unit; exiting non-zero,
                // Result=exit-code — both checked under systemd 252).
                return superseded(by: interrupted, pid: target)
            }
            if gone { throw ControlClientError("pid \(target) exited before answering") }
            usleep(5_000)
        }
        if rejected { return 1 }
        if let interrupted { interruption.dieOf(interrupted) }
        throw ControlClientError("no answer from pid \(target) within \(timeout) s (sent \(signal))")
    }

    /// The signal to send: the one the daemon reloads on, as its status file names it (`--signal`,
    /// when given, must be that one: another would go unanswered until the timeout), else
    /// `--signal`'s, else `SIGHUP` (a file written before it named the signal). A file naming
    /// something that cannot reload is refused unless `--signal` says what to send instead.
    package static func signal(
        _ requested: ProcessSignal?,
        for status: RuntimeStatus,
        target: Int32,
        file: String
    ) throws(ControlClientError) -> ProcessSignal {
        guard let named = status.reloadSignal else { return requested ?? .sighup }
        // The file is the daemon's, but read as any other input: a signal that cannot reload is
        // refused as `--signal` would refuse it.
        guard let recorded = ProcessSignal(name: named), DaemonInvocation.reloadSignalProblem(recorded) == nil else {
            // The admin's option is trusted input; the file is not (and the pid checks stand).
            if let requested { return requested }
            throw ControlClientError(
                "\(file) names \(DisplayText.quoted(named)) as the reload signal, which cannot be one; pass --signal with the daemon's --reload-signal"
            )
        }
        if let requested, requested != recorded {
            throw ControlClientError(
                "pid \(target) reloads on \(recorded) (\(file) says so), not on \(requested), which it would not answer: leave out --signal, or pass --signal \(recorded)"
            )
        }
        return recorded
    }

    /// The pid to signal: the status file's, when the process with that pid started when the
    /// daemon that wrote the file did, runs as the user who owns the file's directory (the
    /// daemon writes its own status), and, with `--pid`, is the pid asked for. The start time
    /// alone proves nothing: whoever writes the file can copy any process's from `/proc`, and
    /// a directory of another user's is trusted under a root-owned parent (a unit's
    /// `/run/<name>` under `DynamicUser=`).
    ///
    /// Under a hardened unit `ExecReload=` cannot read `/proc/$MAINPID`: with `PrivateUsers=`
    /// every process of the unit gets a user namespace of its own, and `ProtectProc=invisible`
    /// hides processes the reader could not ptrace. There systemd vouches instead: it sets
    /// `$MAINPID` for a unit's control processes only, so a hidden pid is accepted when it is
    /// `$MAINPID` (and the status file's pid).
    ///
    /// - Parameters:
    ///   - directoryOwner: who owns the directory that holds the status file.
    ///   - startTime: the start time of a pid, `nil` when `/proc` does not show it.
    ///   - processOwner: the user a pid runs as, `nil` when `/proc` does not show it.
    ///   - holdsInstanceLock: whether a pid holds the `instance.lock` of the file's directory:
    ///     proof enough where the directory's owner is not the process's user (systemd 257 maps
    ///     a `DynamicUser=` unit's preserved runtime directory, owned by `nobody` outside it).
    ///   - lockHolder: the pid, here, of the one process that holds that `instance.lock`:
    ///     a daemon in a PID namespace of its own (`PrivatePIDs=`, `unshare --pid`) records its
    ///     pid there (1, say); here it is this pid, taken when it started at the recorded time.
    ///   - mainPID: `$MAINPID`, as systemd sets it for `ExecReload=`.
    package static func verifiedDaemon(
        _ status: RuntimeStatus,
        requested: Int32?,
        file: String,
        name: String,
        directoryOwner: uid_t,
        startTime: (Int32) -> UInt64? = ProcessStartTime.of,
        processOwner: (Int32) -> uid_t? = Self.processOwner,
        holdsInstanceLock: (Int32) -> Bool = { _ in false },
        lockHolder: () -> Int32? = { nil },
        hasExited: (Int32) -> Bool = ProcessStartTime.hasExited,
        mainPID: String?
    ) throws(ControlClientError) -> Int32 {
        // /proc/<pid>/stat of the recorded pid, read once: most reloads need nothing else.
        let recordedPIDStarted = startTime(status.pid)
        let namespaced =
            (requested.map { $0 != status.pid } ?? false) || recordedPIDStarted != status.processStartTime
            ? StatusClient.namespacedDaemon(status, holder: lockHolder(), startTime: startTime) : nil
        let pid = namespaced ?? status.pid
        if let requested, requested != pid {
            let described = namespaced.map { "pid \($0) here, \(status.pid) in its PID namespace" } ?? "pid \(pid)"
            throw ControlClientError(
                "refusing to signal pid \(requested): it is not the \(name) that \(file) describes (\(described))"
            )
        }
        guard pid > 1 else {
            throw ControlClientError("refusing to signal pid \(pid) named in \(file): not a daemon's pid")
        }
        guard let recorded = status.processStartTime else {
            throw ControlClientError(
                "\(file) does not record the daemon's start time (written by an older \(name)): restart the daemon, then reload"
            )
        }
        guard let actual = pid == status.pid ? recordedPIDStarted : startTime(pid) else {
            guard kill(pid, 0) == 0 || errno == EPERM else {
                throw ControlClientError("pid \(pid) named in \(file) is not running")
            }
            if mainPID == "\(pid)" { return pid }
            throw ControlClientError(
                "refusing to signal pid \(pid): /proc/\(pid) is hidden from this process, so its start time cannot be checked (run as root, or as ExecReload= with $MAINPID)"
            )
        }
        guard actual == recorded else {
            throw ControlClientError(
                "refusing to signal pid \(pid): it started at tick \(actual), but the \(name) that \(file) describes started at tick \(recorded) (a different process now has that pid)"
            )
        }
        // The daemon, but exited: its parent has not reaped it (systemd would have), and a
        // signal would wait for an answer that cannot come.
        guard !hasExited(pid) else {
            throw ControlClientError(
                "pid \(pid) named in \(file) is not running (it exited; its parent has not reaped it yet)"
            )
        }
        guard let user = processOwner(pid) else {
            if mainPID == "\(pid)" { return pid }
            throw ControlClientError("refusing to signal pid \(pid): who runs it cannot be read from /proc/\(pid)")
        }
        guard user == directoryOwner || holdsInstanceLock(pid) else {
            throw ControlClientError(
                "refusing to signal pid \(pid): it runs as uid \(user), but \(file) is in a directory of uid \(directoryOwner), and a \(name) writes its own status file"
            )
        }
        return pid
    }

    /// The owner of `/proc/<pid>`: the process's effective uid.
    package static func processOwner(_ pid: Int32) -> uid_t? {
        var info = stat()
        return stat("/proc/\(pid)", &info) == 0 ? info.st_uid : nil
    }
}

/// A client failure with the message to print; exit status 2.
package struct ControlClientError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

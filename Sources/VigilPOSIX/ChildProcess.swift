import Synchronization
import VigilPlatform

/// A process a daemon starts (a job, a hook script) with a clean signal state and without the
/// service manager's variables: what a program expects when it starts, whatever the daemon has.
///
/// Ignored signals and the signal mask survive `exec`. A Vigil daemon ignores `SIGPIPE`,
/// `SIGXFSZ` and `SIGTTOU` and blocks `SIGHUP`, `SIGINT`, `SIGTERM`, `SIGUSR1`, `SIGUSR2` and every real-time
/// signal (`EarlySignals`, the event loop's signalfd), so a child started with `fork`/`exec`,
/// `posix_spawn` without attributes or Foundation's `Process` would run with `SIGPIPE` ignored
/// (`yes | head` never ends) and deaf to `SIGTERM`. ``spawn(_:arguments:environment:passingServiceManagerVariables:inOwnProcessGroup:)``
/// starts it with every signal at its default disposition and an empty mask (`posix_spawn` with
/// `POSIX_SPAWN_SETSIGDEF` over all signals and `POSIX_SPAWN_SETSIGMASK`).
///
/// `NOTIFY_SOCKET`, `WATCHDOG_USEC`, `WATCHDOG_PID`, `LISTEN_FDS`, `LISTEN_PID` and
/// `LISTEN_FDNAMES` are the daemon's, not its child's: a child that speaks sd_notify would
/// otherwise report readiness or stopping for the daemon's unit. They are left out unless asked.
///
/// ```swift
/// let job = try ChildProcess.spawn("/usr/lib/jobs/run-job", arguments: [id], inOwnProcessGroup: true)
/// ready.onStop { _ in try? job.send(SIGTERM, toProcessGroup: true) }  // the job and its children
/// let ended = try await job.termination()  // holds no thread while it runs
/// ```
///
/// **Waiting.** `termination()` (VigilEventLoop, brought by `import Vigil`) waits without holding a thread: the kernel's pidfd for the
/// child becomes readable when it ends, and the event loop's epoll (or, without
/// `EventLoopExecutor`, one `poll` thread per waiting child) watches it; a hundred running jobs
/// take no thread of Swift concurrency's small pool (a blocking `waitpid` on it would hold one
/// each, and two are enough to stall it on a two-core machine). The loop watches 64
/// descriptors at most; past that, each further waiting child takes a `poll` thread.
///
/// **Process groups.** A job that starts children of its own (a shell script, `make`) is
/// started with `inOwnProcessGroup: true`, and ``send(_:toProcessGroup:)`` signals it and every
/// descendant that stayed in its group together, as a terminal's Ctrl-C does: at the stop
/// deadline, SIGTERM (then SIGKILL) to the group leaves no grandchild running. (With
/// `KillMode=mixed`, systemd SIGKILLs what is left of the whole cgroup after the stop anyway;
/// the group is how the daemon ends one job early, or in time.)
///
/// The child inherits the descriptors not marked close-on-exec (Vigil opens its own with
/// `O_CLOEXEC`) and the daemon's standard input, output and error (under systemd, the journal).
public struct ChildProcess: Sendable {
    /// The child's pid.
    public let pid: Int32

    /// How the child ended, once reaped: shared by every copy of this value, so that the
    /// child is reaped once and every later wait answers from here (its pid may belong to
    /// another child by then, which a second `waitpid` would reap in its place).
    private let reaped: Reaped

    private final class Reaped: Sendable {
        let termination = Mutex<Termination?>(nil)
    }

    /// A child this process started otherwise (tests wait for one with ``wait()``).
    package init(pid: Int32) {
        self.pid = pid
        reaped = Reaped()
    }

    /// How a child ended.
    public enum Termination: Sendable, Hashable, CustomStringConvertible {
        /// It exited with this status.
        case exited(Int32)
        /// This signal ended it.
        case killed(by: Int32)

        public var description: String {
            switch self {
            case .exited(let status): "exited with status \(status)"
            case .killed(let signal): "killed by signal \(signal) (\(String(cString: strsignal(signal))))"
            }
        }
    }

    /// The variables of the service manager's protocols with the daemon, left out of a child's
    /// environment unless asked.
    package static let serviceManagerVariables: Set<String> = [
        "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES",
    ]

    /// Starts `executable` with default dispositions for every signal and an empty signal mask.
    ///
    /// - Parameters:
    ///   - executable: a path, or a name looked up in `PATH` when it holds no `/`; also the
    ///     child's `argv[0]`.
    ///   - arguments: the rest of its argv.
    ///   - environment: its environment; `nil` for this process's.
    ///   - passingServiceManagerVariables: `true` keeps `serviceManagerVariables` in the
    ///     child's environment (for a child that reports to the service manager in the daemon's
    ///     place); by default they are left out.
    ///   - inOwnProcessGroup: `true` starts the child as the leader of a new process group (its
    ///     id is the child's pid), which its own children join: ``send(_:toProcessGroup:)``
    ///     reaches them all.
    /// - Throws: ``SystemError`` with `posix_spawn`'s error (`ENOENT`: no such program,
    ///   `EACCES`: not executable, `EAGAIN`: `RLIMIT_NPROC` reached).
    ///
    /// The corresponding C function is `posix_spawn` (`posix_spawnp` for a bare name).
    public static func spawn(
        _ executable: String,
        arguments: [String] = [],
        environment: [String: String]? = nil,
        passingServiceManagerVariables: Bool = false,
        inOwnProcessGroup: Bool = false
    ) throws(SystemError) -> ChildProcess {
        var entries = environment.map { $0.map { "\($0.key)=\($0.value)" } } ?? currentEnvironment()
        if !passingServiceManagerVariables {
            entries.removeAll { entry in
                serviceManagerVariables.contains(String(entry.prefix { $0 != "=" }))
            }
        }
        return ChildProcess(
            pid: try spawn(
                executable,
                argv: [executable] + arguments,
                environment: entries,
                inOwnProcessGroup: inOwnProcessGroup
            )
        )
    }

    /// The one `posix_spawn` of the package: ``spawn(_:arguments:environment:passingServiceManagerVariables:inOwnProcessGroup:)``
    /// and VigilTesting's `DaemonProcess` start their children here. Starts `program` (looked up
    /// in `PATH` when it holds no `/`) with `argv` (its `argv[0]` included) and `environment`
    /// (`NAME=value` entries) as they are, with a clean signal state (``withCleanSignalState(_:)``),
    /// with `inOwnProcessGroup` as the leader of a new process group, and with `fileActions`
    /// (`nil`: none) applied in the child; returns its pid.
    ///
    /// - Throws: ``SystemError`` naming `program`, with `posix_spawn`'s error.
    package static func spawn(
        _ program: String,
        argv: [String],
        environment: [String],
        inOwnProcessGroup: Bool,
        fileActions: UnsafePointer<posix_spawn_file_actions_t>? = nil
    ) throws(SystemError) -> pid_t {
        let argv = argv.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        let result = withCleanSignalState { attributes in
            if inOwnProcessGroup {
                var flags: Int16 = 0
                posix_spawnattr_getflags(&attributes, &flags)
                posix_spawnattr_setpgroup(&attributes, 0)
                posix_spawnattr_setflags(&attributes, flags | Int16(POSIX_SPAWN_SETPGROUP))
            }
            var child: pid_t = 0
            let result =
                program.contains("/")
                ? posix_spawn(&child, program, fileActions, &attributes, argv, envp)
                : posix_spawnp(&child, program, fileActions, &attributes, argv, envp)
            return result == 0 ? child : -result
        }
        guard result > 0 else { throw SystemError(path: program, operation: "start", errno: -result) }
        return result
    }

    /// Calls `body` with `posix_spawn` attributes that give the child default dispositions for
    /// every signal (glibc's own included) and an empty mask.
    package static func withCleanSignalState<T>(_ body: (inout posix_spawnattr_t) -> T) -> T {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        var all = sigset_t()
        sigfillset(&all)
        includeInternalSignals(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        return body(&attributes)
    }

    /// Waits until the child ends and reaps it; `EINTR` is retried.
    ///
    /// - Important: This blocks the calling thread until the child ends: on the event loop it
    ///   would stop the daemon's signals and watchdog with it, on Swift concurrency's pool it
    ///   holds one of its few threads. In async code, await `termination()` (VigilEventLoop).
    ///
    /// It may be called again, and `termination()` too: once the child was reaped, each
    /// answers how it ended.
    ///
    /// - Throws: ``SystemError`` (`ECHILD` when something else reaped the child: a
    ///   `waitpid(-1, …)` of the daemon's own, say).
    ///
    /// The corresponding C function is `waitpid`.
    package func wait() throws(SystemError) -> Termination {
        // After waitid reported the end, the reap finds it; nil would mean another process
        // took the pid between the two calls, which only a reap elsewhere allows.
        guard let ended = try reap(blocking: true) else {
            throw SystemError(path: "pid \(pid)", operation: "wait for", errno: ECHILD)
        }
        return ended
    }

    /// Sends `signal` to the child, or with `toProcessGroup` to its process group (the child's
    /// pid as the group's id: a child started with `inOwnProcessGroup: true`, and the children
    /// it started, while any of them runs, even after the child itself ended).
    ///
    /// - Important: To the child alone, only while it has not been reaped (by `termination()`): after that, its pid may have been given to another process. To its
    ///   group, while any process of the group runs (the kernel gives no new process a pid that
    ///   is still a group's id); once the whole group is gone, the id is free again.
    ///
    /// - Throws: ``SystemError`` (`ESRCH`: no such process or group left; `EINVAL`: not a
    ///   signal; `EPERM`: a group whose processes changed user).
    ///
    /// The corresponding C function is `kill`.
    public func send(_ signal: Int32, toProcessGroup: Bool = false) throws(SystemError) {
        // kill(0) and kill(-1) would signal this daemon's group or every process it may: a pid
        // of 0 or 1 is never a child of ours.
        guard pid > 1 else {
            throw SystemError(path: "pid \(pid)", operation: "signal", errno: ESRCH)
        }
        guard kill(toProcessGroup ? -pid : pid, signal) == 0 else {
            throw SystemError(
                path: toProcessGroup ? "process group \(pid)" : "pid \(pid)",
                operation: "signal",
                errno: errno
            )
        }
    }

    /// How the child ended, reaping it, or `nil` while it runs: for a wait that watches the
    /// child's pidfd (VigilEventLoop's `termination()`).
    package func reapIfEnded() throws(SystemError) -> Termination? {
        try reap(blocking: false)
    }

    /// How the child ended, or `nil` while it runs (non-blocking): from ``reaped`` once it was
    /// reaped, else from a `waitpid` under the record's lock, retrying `EINTR`, so that the
    /// child is reaped once and every waiter gets the answer. A blocking wait first waits for
    /// the end without reaping (`waitid` with `WNOWAIT`), then reaps as a non-blocking one does:
    /// it never reaps outside the lock, where it could race another waiter, or take a child
    /// that was given the pid after another waiter reaped this one.
    private func reap(blocking: Bool) throws(SystemError) -> Termination? {
        if blocking, reaped.termination.withLock({ $0 }) == nil {
            var info = siginfo_t()
            let waited = SystemCall.retrying32(.waitid, .unspecified) {
                waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT)
            }
            if waited < 0 {
                let failure = errno
                if let ended = reaped.termination.withLock({ $0 }) { return ended }
                throw SystemError(path: "pid \(pid)", operation: "wait for", errno: failure)
            }
        }
        return try reaped.termination.withLock { stored throws(SystemError) -> Termination? in
            if let stored { return stored }
            stored = try Self.waitForChild(pid)
            return stored
        }
    }

    /// `waitpid(pid, WNOHANG)`, retrying `EINTR`: how it ended, or `nil` while it runs.
    private static func waitForChild(_ pid: Int32) throws(SystemError) -> Termination? {
        var status: Int32 = 0
        let reaped = SystemCall.retrying32(.waitpid, .unspecified) { waitpid(pid, &status, WNOHANG) }
        guard reaped >= 0 else {
            throw SystemError(path: "pid \(pid)", operation: "wait for", errno: errno)
        }
        if reaped == 0 { return nil }
        // WIFEXITED and friends are macros Swift does not import.
        let signal = status & 0x7f
        return signal == 0 ? .exited((status >> 8) & 0xff) : .killed(by: signal)
    }

    /// Adds glibc's own signals (32 and 33, below `SIGRTMIN`), which `sigfillset` leaves out:
    /// without them in the set, glibc's `posix_spawn` sets them to `SIG_IGN` in the child
    /// (they have handlers here), and being ignored they survive `exec`. A program that uses
    /// them as real-time signals (musl, Go) would never hear them.
    private static func includeInternalSignals(_ set: inout sigset_t) {
        #if canImport(Glibc)
            let bitsPerWord = UInt.bitWidth
            withUnsafeMutableBytes(of: &set) { bytes in
                let words = bytes.bindMemory(to: UInt.self)
                for signal in 32..<Int(__libc_current_sigrtmin()) {
                    words[(signal - 1) / bitsPerWord] |= 1 << UInt((signal - 1) % bitsPerWord)
                }
            }
        #endif
    }

    /// This process's environment, as `NAME=value` entries.
    package static func currentEnvironment() -> [String] {
        var entries: [String] = []
        var cursor = environ
        while let entry = cursor.pointee {
            entries.append(String(cString: entry))
            cursor += 1
        }
        return entries
    }
}

@preconcurrency import Dispatch
import Synchronization
import VigilPOSIX
import VigilPlatform
import VigilSystemd

/// A real child process for tests that send real signals: spawn, signal, await its exit.
///
/// Stop signals go to children, never to the test runner.
public final class DaemonProcess: Sendable {
    /// The child's pid.
    public let pid: Int32
    private let exit = AsyncRecorder<Int32>()
    /// Whether the exit was observed on a child left a zombie (for `deinit` to reap).
    private let zombie = Flag()

    private final class Flag: Sendable {
        let value = Mutex(false)
    }

    /// Spawns `executable` with `arguments`, this process's environment plus `environment`
    /// (or exactly `environment` when `inheritEnvironment` is `false`), and stdout/stderr sent
    /// to `outputPath` (or inherited).
    ///
    /// The exit is observed without reaping it (`waitid` with `WNOWAIT`, on a thread of its
    /// own): a caller that times the exit itself (the benchmarks) waits so too, never with
    /// `waitpid`, and this object reaps the child when it goes.
    ///
    /// - Parameters:
    ///   - executable: the program's path (a name without `/` is looked up in `PATH`).
    ///   - arguments: its arguments, without the program's name.
    ///   - environment: added to this process's environment, or the whole environment when
    ///     `inheritEnvironment` is `false`.
    ///   - inheritEnvironment: whether the child starts from this process's environment.
    ///   - outputPath: stdout and stderr are appended there; inherited when `nil`.
    ///   - listenFileDescriptors: descriptors of this process to pass as systemd's socket
    ///     activation does: as fds 3, 4, … in order, with `LISTEN_FDS`, `LISTEN_FDNAMES` (their
    ///     names) and `LISTEN_PID` set to the child's own pid. For that, the child is started
    ///     through `/bin/sh -c 'export LISTEN_PID=$$; exec "$0" "$@"'`, which keeps the pid
    ///     across `exec`. This process keeps its own copies.
    ///   - ownProcessGroup: starts the child in a process group of its own (its pid), so that a
    ///     `kill 0` in it (a script's `kill` of an empty or zero pid) reaches its group, not the
    ///     test runner's.
    public init(
        executable: String,
        arguments: [String] = [],
        environment: [String: String] = [:],
        inheritEnvironment: Bool = true,
        outputPath: String? = nil,
        listenFileDescriptors: [(fileDescriptor: Int32, name: String)] = [],
        ownProcessGroup: Bool = false
    ) throws {
        var merged: [String: String] = [:]
        for text in inheritEnvironment ? ChildProcess.currentEnvironment() : [] {
            if let equals = text.firstIndex(of: "=") {
                merged[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
        }
        for (key, value) in environment { merged[key] = value }
        var program = executable
        var argumentList = [executable] + arguments
        if !listenFileDescriptors.isEmpty {
            merged["LISTEN_FDS"] = String(listenFileDescriptors.count)
            merged["LISTEN_FDNAMES"] = listenFileDescriptors.map(\.name).joined(separator: ":")
            merged["LISTEN_PID"] = nil
            program = "/bin/sh"
            argumentList = ["/bin/sh", "-c", #"export LISTEN_PID=$$; exec "$0" "$@""#] + argumentList
        }
        // Copies above the target range first: dup2 onto 3, 4, … then never overwrites a source
        // still to be copied, and always clears FD_CLOEXEC (dup2 of a descriptor onto itself,
        // for a source that already is its target, would leave it set).
        var copies: [Int32] = []
        defer { for copy in copies { close(copy) } }
        for descriptor in listenFileDescriptors {
            let copy = fcntl(descriptor.fileDescriptor, F_DUPFD_CLOEXEC, Int32(3 + listenFileDescriptors.count))
            guard copy >= 0 else {
                throw SystemCallError(
                    "fcntl F_DUPFD_CLOEXEC fd \(descriptor.fileDescriptor) '\(descriptor.name)'",
                    errno
                )
            }
            copies.append(copy)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let outputPath {
            posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        for (index, copy) in copies.enumerated() {
            posix_spawn_file_actions_adddup2(&actions, copy, Int32(3 + index))
        }
        // A child starts with default signal dispositions and an empty mask, whatever the runner has.
        let child = try ChildProcess.spawn(
            program,
            argv: argumentList,
            environment: merged.map { "\($0.key)=\($0.value)" },
            inOwnProcessGroup: ownProcessGroup,
            fileActions: &actions
        )
        pid = child
        let spawned = child
        let exit = self.exit
        let zombie = self.zombie
        // The exit is observed without reaping (WNOWAIT): the child stays a zombie, its pid
        // taken, until this object goes. Reaped at once, its pid could be given to a new process
        // or thread (pid_max is 32768 here) — one of this test runner's own threads, say — and
        // a `send` after the exit would signal that (a SIGUSR1 once killed the runner so).
        DetachedThread.run {
            var info = siginfo_t()
            let result = SystemCall.retrying32(.waitid, .unspecified) {
                waitid(P_PID, id_t(spawned), &info, WEXITED | WNOWAIT)
            }
            // A caller that reaps the child itself (waitpid on `pid`) leaves no zombie to reap.
            if result == 0 { zombie.value.withLock { $0 = true } }
            let status = info._sifields._sigchld.si_status
            let code: Int32 = info.si_code == CLD_EXITED ? status & 0xff : 128 + status
            exit.append(code)
        }
    }

    /// Sends `signal` to the child (to its zombie, harmlessly, once it exited: its pid is not
    /// reused while this object lives).
    public func send(_ signal: Int32) {
        kill(pid, signal)
    }

    /// Waits for the child to exit; returns its status (128 + n when signal n killed it).
    public func waitForExit(timeout: Duration = .seconds(30)) async throws -> Int32 {
        try await exit.wait(timeout: timeout, "process \(pid) to exit") { !$0.isEmpty }[0]
    }

    /// Waits for the child to exit and reaps it, so that its pid names no process any more (a
    /// test of what happens to a pid that is gone); returns its status. After it, ``send(_:)``
    /// may reach a process that was given the pid since.
    public func reap(timeout: Duration = .seconds(30)) async throws -> Int32 {
        let status = try await waitForExit(timeout: timeout)
        let wasZombie = zombie.value.withLock { value in
            defer { value = false }
            return value
        }
        if wasZombie {
            var raw: Int32 = 0
            _ = SystemCall.retrying32(.waitpid, .unspecified) { waitpid(pid, &raw, 0) }
        }
        return status
    }

    /// The exit status if the child already exited.
    public var exitStatus: Int32? { exit.values.first }

    deinit {
        let running = exit.values.isEmpty
        if running { kill(pid, SIGKILL) }
        // Reaps the zombie the exit left (see init), once it is one; not a pid that the caller
        // reaped itself, which may belong to another process by now.
        guard running || zombie.value.withLock({ $0 }) else { return }
        let pid = self.pid
        DetachedThread.run {
            var status: Int32 = 0
            _ = SystemCall.retrying32(.waitpid, .unspecified) { waitpid(pid, &status, 0) }
        }
    }
}

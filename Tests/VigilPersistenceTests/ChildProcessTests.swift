import Testing
import VigilPOSIX
import VigilPlatform
import VigilTesting

/// Issue 21 #6: a Vigil daemon's children inherited its ignored signals and its mask (`yes |
/// head` never ended under a hook). Each test gives this thread a daemon's signal state and
/// reads a real child's `/proc/PID/status` and environment.
@Suite(.serialized) struct ChildProcessTests {
    /// The signals a Vigil daemon blocks (a sample: the stop, reload and user signals and two
    /// real-time ones) and ignores.
    private static let blocked = [
        SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2, __libc_current_sigrtmin() + 3, __libc_current_sigrtmax(),
    ]
    private static let ignored = [SIGPIPE, SIGXFSZ, SIGTTOU]

    /// Runs `body` with `ignored` ignored and `blocked` blocked on this thread (a synchronous
    /// test stays on one thread), as in a daemon; restores both after.
    private func withDaemonSignalState<T>(_ body: () throws -> T) rethrows -> T {
        var mask = sigset_t()
        sigemptyset(&mask)
        for signal in Self.blocked { sigaddset(&mask, signal) }
        var previousMask = sigset_t()
        pthread_sigmask(SIG_BLOCK, &mask, &previousMask)
        let previous = Self.ignored.map { signal($0, SIG_IGN) }
        defer {
            for (signal, disposition) in zip(Self.ignored, previous) { _ = Glibc.signal(signal, disposition) }
            pthread_sigmask(SIG_SETMASK, &previousMask, nil)
        }
        return try body()
    }

    /// `SigIgn`, `SigBlk`, … of `/proc/PID/status` as bit masks (bit n-1 for signal n).
    private func signalMasks(of pid: Int32) throws -> [String: UInt64] {
        let status = try #require(TextFile.read("/proc/\(pid)/status"))
        var masks: [String: UInt64] = [:]
        for line in status.split(separator: "\n") where line.hasPrefix("Sig") || line.hasPrefix("Shd") {
            let parts = line.split(separator: ":", maxSplits: 1)
            masks[String(parts[0])] = UInt64(parts[1].trimmingPrefix { $0 == "\t" || $0 == " " }, radix: 16)
        }
        return masks
    }

    private func bits(_ signals: [Int32]) -> UInt64 { signals.reduce(0) { $0 | (1 << UInt64($1 - 1)) } }

    /// The child's environment, from `/proc/PID/environ`.
    /// The child's environment. `posix_spawn` returns once the child's exec has released the
    /// parent's memory, a moment before the kernel has laid out the new environment: until then
    /// `/proc/PID/environ` is empty, so it is read again (at most 2 s) until it is not.
    private func environment(of pid: Int32) throws -> Set<String> {
        var text = ""
        for _ in 0..<2000 {
            text = try #require(TextFile.read("/proc/\(pid)/environ"))
            if !text.isEmpty { break }
            usleep(1000)
        }
        return Set(text.split(separator: "\0").map(String.init))
    }

    private let daemonEnvironment = [
        "NOTIFY_SOCKET": "/run/systemd/notify", "WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1",
        "LISTEN_FDS": "1", "LISTEN_PID": "1", "LISTEN_FDNAMES": "http", "JOB": "nightly", "PATH": "/usr/bin:/bin",
    ]

    @Test func aChildStartsWithDefaultDispositionsAnEmptyMaskAndNoServiceManagerVariables() throws {
        let child = try withDaemonSignalState {
            try ChildProcess.spawn("/bin/sleep", arguments: ["60"], environment: daemonEnvironment)
        }
        let masks = try signalMasks(of: child.pid)
        let environment = try environment(of: child.pid)
        kill(child.pid, SIGTERM)
        // SIGTERM at its default disposition ends it.
        #expect(try child.wait() == .killed(by: SIGTERM))
        #expect(masks["SigIgn"] == 0, "ignored: \(String(masks["SigIgn"] ?? 0, radix: 16))")
        #expect(masks["SigBlk"] == 0, "blocked: \(String(masks["SigBlk"] ?? 0, radix: 16))")
        #expect(environment == ["JOB=nightly", "PATH=/usr/bin:/bin"])
    }

    /// The control: what a child of plain `posix_spawn` gets under the same state, which the
    /// test above would see if `spawn` did nothing about it.
    @Test func aPlainPosixSpawnChildInheritsTheDaemonsSignalState() throws {
        var child: pid_t = 0
        let words: [String] = ["/bin/sleep", "60"]
        let argv = words.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let result = withDaemonSignalState { posix_spawn(&child, "/bin/sleep", nil, nil, argv, environ) }
        #expect(result == 0)
        let masks = try signalMasks(of: child)
        kill(child, SIGKILL)
        #expect(try ChildProcess(pid: child).wait() == .killed(by: SIGKILL))
        #expect(masks["SigIgn"].map { $0 & bits(Self.ignored) } == bits(Self.ignored))
        #expect(masks["SigBlk"].map { $0 & bits(Self.blocked) } == bits(Self.blocked))
    }

    @Test func theServiceManagerVariablesPassWhenAskedAndTheExitStatusComesBack() throws {
        let child = try ChildProcess.spawn(
            "sh",
            arguments: ["-c", #"[ "$NOTIFY_SOCKET" = /run/systemd/notify ] && [ "$LISTEN_FDS" = 1 ] && exit 7"#],
            environment: daemonEnvironment,
            passingServiceManagerVariables: true
        )
        #expect(try child.wait() == .exited(7))
    }

    @Test func aMissingProgramIsAnErrorNamingIt() {
        #expect(throws: SystemError(path: "/nonexistent/vigil-hook", operation: "start", errno: ENOENT)) {
            try ChildProcess.spawn("/nonexistent/vigil-hook")
        }
    }
}

import BenchmarkSupport
import Synchronization
import VigilTesting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A daemon under measurement: how to start it, with the arguments vigild takes.
struct MeasuredDaemon {
    var name: String
    var executable: String
    var arguments: [String]
    /// Whether it does the measured work (configuration, state, durable checkpoint): the Swift
    /// hello-world does not, and gets no ratio.
    var sameWork = true
}

/// The notify socket, as systemd holds it: one datagram socket that the daemon's `sd_notify`
/// writes to. The harness blocks on it (no tasks, no threads), so what it times is the daemon.
final class NotifySocket {
    let path: String
    private let fd: Int32

    init(path: String) throws {
        fd = try boundDatagramSocket(path: path)
        self.path = path
    }

    deinit {
        close(fd)
        unlink(path)
    }

    /// The next datagram's lines, or `nil` when none came within `timeoutMilliseconds`.
    func receive(timeoutMilliseconds: Int32) -> [Substring]? {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, timeoutMilliseconds) > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self).split(separator: "\n")
    }

    /// Waits for a datagram holding the line `line`; returns the monotonic time it arrived.
    func await(_ line: String, timeoutMilliseconds: Int32 = 10_000, from daemon: String) throws -> UInt64 {
        let deadline = Monotonic.now() + UInt64(timeoutMilliseconds) * 1_000_000
        while true {
            let now = Monotonic.now()
            guard now < deadline,
                let lines = receive(timeoutMilliseconds: Int32((deadline - now) / 1_000_000) + 1)
            else {
                throw BenchmarkError("\(daemon) sent no \(line) within \(timeoutMilliseconds) ms")
            }
            if lines.contains(where: { $0 == line }) { return Monotonic.now() }
        }
    }

    /// Runs `body` (a stop: SIGTERM, then `waitpid`) while a thread reads and discards what the
    /// daemon sends, as systemd does while a unit stops: a daemon that waits for its exit's
    /// `BARRIER=1` to be confirmed (vigild) hears the hang-up when the datagram is read (`recv`
    /// without room for control messages closes the descriptor it carries). The thread sleeps in
    /// `poll` between datagrams, looking at its stop flag every 10 ms.
    func draining<Result>(_ body: () throws -> Result) throws -> Result {
        let drain = NotifyDrain(fd: fd)
        let context = Unmanaged.passRetained(drain).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(
            &thread,
            nil,
            { context in
                let drain = Unmanaged<NotifyDrain>.fromOpaque(context!).takeRetainedValue()
                var buffer = [UInt8](repeating: 0, count: 4096)
                while !drain.done.load(ordering: .acquiring) {
                    var entry = pollfd(fd: drain.fd, events: Int16(POLLIN), revents: 0)
                    if poll(&entry, 1, 10) > 0 {
                        _ = buffer.withUnsafeMutableBytes {
                            recv(drain.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
                        }
                    }
                }
                return nil
            },
            context
        )
        guard created == 0 else {
            Unmanaged<NotifyDrain>.fromOpaque(context).release()
            throw BenchmarkError("pthread_create failed: \(created)")
        }
        defer {
            drain.done.store(true, ordering: .releasing)
            pthread_join(thread, nil)
        }
        return try body()
    }

    /// Counts datagrams holding `line` until `untilNanoseconds` (monotonic).
    func count(_ line: String, untilNanoseconds deadline: UInt64) -> Int {
        var seen = 0
        while true {
            let now = Monotonic.now()
            guard now < deadline else { return seen }
            if let lines = receive(timeoutMilliseconds: Int32((deadline - now) / 1_000_000) + 1),
                lines.contains(where: { $0 == line })
            {
                seen += 1
            }
        }
    }
}

/// The socket and stop flag of ``NotifySocket/draining(_:)``'s thread.
private final class NotifyDrain: Sendable {
    let fd: Int32
    let done = Atomic<Bool>(false)
    init(fd: Int32) { self.fd = fd }
}

/// What one start–reload–stop cycle of a daemon measured.
struct CycleSample {
    var start: UInt64
    var reloads: [UInt64]
    /// Reloads with the configuration file rewritten before each signal.
    var editedReloads: [UInt64]
    var stop: UInt64
    var memory: Memory
}

/// Resident memory from `/proc/PID/status`, in KiB.
struct Memory {
    var resident: Int
    var anonymous: Int
    var file: Int

    init(pid: pid_t) {
        let fields = ProcFile.fields("/proc/\(pid)/status")
        resident = fields["VmRSS"] ?? 0
        anonymous = fields["RssAnon"] ?? 0
        file = fields["RssFile"] ?? 0
    }
}

enum ProcFile {
    /// `Name: 123 kB` lines as numbers.
    static func fields(_ path: String) -> [String: Int] {
        guard let text = TextFile.read(path) else { return [:] }
        var fields: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let value = line[line.index(after: colon)...].split(whereSeparator: { $0 == " " || $0 == "\t" }).first
                .flatMap { Int($0) }
            if let value { fields[String(line[..<colon])] = value }
        }
        return fields
    }

    /// Voluntary context switches of every thread of `pid`: each is a thread going to sleep,
    /// so between two readings it counts the wake-ups in between.
    static func voluntarySwitches(pid: pid_t) -> Int {
        guard let directory = opendir("/proc/\(pid)/task") else { return 0 }
        defer { closedir(directory) }
        var total = 0
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.first?.isNumber == true else { continue }
            total += fields("/proc/\(pid)/task/\(name)/status")["voluntary_ctxt_switches"] ?? 0
        }
        return total
    }

    static func threads(pid: pid_t) -> Int { fields("/proc/\(pid)/status")["Threads"] ?? 0 }
}

/// Runs daemons as systemd does, through a notify socket, and times what systemd waits for.
struct ProcessBenchmarks {
    var workDirectory: String
    var configuration: String
    var cycles: Int
    var reloadsPerCycle: Int
    var idleSeconds: Int
    /// tmpfs, as systemd's `RuntimeDirectory=` is: vigild rewrites its status file there.
    var runtimeDirectory: String
    /// Two texts of the configuration, both valid, that the edited-file reloads write in turn.
    var configurationVersions: [String]

    /// Rewrites the configuration in place (truncate and write), as an editor that saves over
    /// the file does; nothing reads it meanwhile, the daemon reads it after the next SIGHUP.
    private func rewriteConfiguration(_ text: String) throws {
        let descriptor = open(configuration, O_WRONLY | O_TRUNC | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw BenchmarkError("cannot open \(configuration) to rewrite it: errno \(errno)")
        }
        defer { close(descriptor) }
        var text = text
        let written = text.withUTF8 { write(descriptor, $0.baseAddress, $0.count) }
        guard written == text.utf8.count else {
            throw BenchmarkError("cannot rewrite \(configuration): errno \(errno)")
        }
    }

    private func environment(socket: NotifySocket, watchdogMicroseconds: UInt64?) -> [String: String] {
        var environment = ["PATH": "/usr/bin:/bin", "NOTIFY_SOCKET": socket.path, "LANG": "C.UTF-8"]
        if let watchdogMicroseconds { environment["WATCHDOG_USEC"] = "\(watchdogMicroseconds)" }
        return environment
    }

    private func arguments(_ daemon: MeasuredDaemon, tag: String) -> [String] {
        daemon.arguments + [
            "--config", configuration,
            "--state-directory", "\(workDirectory)/\(tag)/state",
            "--runtime-directory", "\(runtimeDirectory)/\(tag)",
        ]
    }

    private func spawn(
        _ daemon: MeasuredDaemon,
        tag: String,
        socket: NotifySocket,
        watchdogMicroseconds: UInt64? = nil
    ) throws -> pid_t {
        try DaemonProcess.spawn(
            executable: daemon.executable,
            arguments: arguments(daemon, tag: tag),
            environment: environment(socket: socket, watchdogMicroseconds: watchdogMicroseconds),
            inheritEnvironment: false,
            outputPath: "\(workDirectory)/\(tag).log"
        )
    }

    /// exec → READY=1, reloads (signal → RELOADING=1 → READY=1), RSS, SIGTERM → exit.
    func cycle(_ daemon: MeasuredDaemon, tag: String) throws -> CycleSample {
        let socket = try NotifySocket(path: "\(workDirectory)/\(tag).notify")
        let began = Monotonic.now()
        let pid = try spawn(daemon, tag: tag, socket: socket)
        var exited = false
        defer { if !exited { kill(pid, SIGKILL) } }
        let ready = try socket.await("READY=1", from: daemon.name)
        let memory = Memory(pid: pid)
        var reloads: [UInt64] = []
        for _ in 0..<reloadsPerCycle {
            let sent = Monotonic.now()
            kill(pid, SIGHUP)
            _ = try socket.await("RELOADING=1", from: daemon.name)
            reloads.append(try socket.await("READY=1", from: daemon.name) - sent)
        }
        // The same with an edited file: what `systemctl reload` after an edit costs (a daemon
        // that skips work for unchanged bytes does it all here).
        var editedReloads: [UInt64] = []
        for index in 0..<reloadsPerCycle {
            try rewriteConfiguration(configurationVersions[index % configurationVersions.count])
            let sent = Monotonic.now()
            kill(pid, SIGHUP)
            _ = try socket.await("RELOADING=1", from: daemon.name)
            editedReloads.append(try socket.await("READY=1", from: daemon.name) - sent)
        }
        try rewriteConfiguration(configurationVersions[0])
        var status: Int32 = 0
        let (stopSent, stopped) = try socket.draining { () -> (UInt64, UInt64) in
            let sent = Monotonic.now()
            kill(pid, SIGTERM)
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            return (sent, Monotonic.now())
        }
        exited = true
        guard status == 0 else {
            throw BenchmarkError("\(daemon.name) exited with wait status \(status); see \(workDirectory)/\(tag).log")
        }
        return CycleSample(
            start: ready - began,
            reloads: reloads,
            editedReloads: editedReloads,
            stop: stopped - stopSent,
            memory: memory
        )
    }

    /// Wake-ups per second while idle after READY=1, and watchdog pings per second.
    func idle(
        _ daemon: MeasuredDaemon,
        tag: String,
        watchdogMicroseconds: UInt64?
    ) throws -> (
        wakeups: Double, pings: Double, threads: Int
    ) {
        let socket = try NotifySocket(path: "\(workDirectory)/\(tag).notify")
        let pid = try spawn(daemon, tag: tag, socket: socket, watchdogMicroseconds: watchdogMicroseconds)
        defer {
            _ = try? socket.draining {
                kill(pid, SIGTERM)
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            }
        }
        _ = try socket.await("READY=1", from: daemon.name)
        // Let start-up settle (threads that finish their first work go to sleep).
        _ = socket.count("WATCHDOG=1", untilNanoseconds: Monotonic.now() + 500_000_000)
        let before = ProcFile.voluntarySwitches(pid: pid)
        let began = Monotonic.now()
        let pings = socket.count("WATCHDOG=1", untilNanoseconds: began + UInt64(idleSeconds) * 1_000_000_000)
        let seconds = Double(Monotonic.now() - began) / 1e9
        let after = ProcFile.voluntarySwitches(pid: pid)
        return (Double(after - before) / seconds, Double(pings) / seconds, ProcFile.threads(pid: pid))
    }
}

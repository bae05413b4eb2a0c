import BenchmarkSupport
import CProcessSupport
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
/// writes to. The harness blocks on it (no tasks, no threads). Each datagram carries the kernel's
/// time of the daemon's `sendmsg()` (`SO_TIMESTAMPNS`), as notifybench takes it: a round trip
/// ends when the daemon sent its answer, not when this harness woke up to read it: the
/// harness's own wake-up (5–10 µs here; 15–65 µs after the Go peer, whose threads keep the other
/// CPU busy after READY=1) is not the daemon's work. systemd itself sets no timestamp
/// option on its notify socket (only `SO_PASSCRED`): it sees the answer when its event loop
/// wakes, the stamp plus its own wake-up; `received` is that time here.
final class NotifySocket {
    let path: String
    private let fd: Int32
    /// CPU time the reader spends on each datagram before it reads the next (a busy loop), as
    /// systemd does: it is a process on the same CPUs, and on this machine kind systemd 252 spent
    /// 62–70 µs of CPU on each `RELOADING=1` or `READY=1` a service sent
    /// (`Benchmarks/systemd-reader.sh`; README, "What systemd sees"). A daemon still at work when
    /// the reader wakes can lose its CPU for that long; a reader that answers in microseconds (0)
    /// hides that.
    private let work: UInt64

    /// `SO_TIMESTAMPNS` (`SO_TIMESTAMPNS_OLD` on 64-bit Linux: a `timespec` in `CLOCK_REALTIME`);
    /// a macro Swift does not import.
    private static let timestampOption: Int32 = 35

    init(path: String, workNanoseconds: UInt64) throws {
        fd = try boundDatagramSocket(path: path)
        self.path = path
        self.work = workNanoseconds
        var on: Int32 = 1
        guard setsockopt(fd, SOL_SOCKET, Self.timestampOption, &on, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            close(fd)
            throw BenchmarkError("cannot set SO_TIMESTAMPNS on \(path): errno \(errno)")
        }
    }

    deinit {
        close(fd)
        unlink(path)
    }

    /// One datagram: its lines, when the daemon sent it (the kernel's stamp mapped onto
    /// `CLOCK_MONOTONIC`) and when this harness read it.
    struct Datagram {
        var lines: [Substring]
        var sent: UInt64
        var received: UInt64
    }

    /// `CLOCK_REALTIME − CLOCK_MONOTONIC` in ns: the realtime read between two monotonic
    /// reads, the narrowest of three (a preemption between the reads would skew it).
    private static func realtimeOffset() -> Int64 {
        var best: (offset: Int64, width: UInt64)?
        for _ in 0..<3 {
            let before = Monotonic.now()
            var realtime = timespec()
            clock_gettime(CLOCK_REALTIME, &realtime)
            let after = Monotonic.now()
            let wall = Int64(realtime.tv_sec) * 1_000_000_000 + Int64(realtime.tv_nsec)
            let offset = wall - Int64((before + after) / 2)
            if best == nil || after - before < best!.width { best = (offset, after - before) }
        }
        return best!.offset
    }

    /// The next datagram, or `nil` when none came within `timeoutMilliseconds`.
    func receive(timeoutMilliseconds: Int32) -> Datagram? {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, timeoutMilliseconds) > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        // Room for a few control messages (credentials, the timestamp): 8-byte aligned.
        var control = [UInt64](repeating: 0, count: 16)
        var stamp: Int64?
        let count = buffer.withUnsafeMutableBytes { data in
            control.withUnsafeMutableBytes { controlBytes in
                var vector = iovec(iov_base: data.baseAddress, iov_len: data.count)
                return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                    var message = msghdr()
                    message.msg_iov = vectorPointer
                    message.msg_iovlen = 1
                    message.msg_control = controlBytes.baseAddress
                    message.msg_controllen = controlBytes.count
                    let count = recvmsg(fd, &message, 0)
                    // struct cmsghdr: size_t len, int level, int type, then the data, 8-aligned.
                    var offset = 0
                    while count >= 0, offset + 16 <= message.msg_controllen {
                        let length = Int(controlBytes.load(fromByteOffset: offset, as: UInt64.self))
                        let level = controlBytes.load(fromByteOffset: offset + 8, as: Int32.self)
                        let type = controlBytes.load(fromByteOffset: offset + 12, as: Int32.self)
                        guard length >= 16 else { break }
                        if level == SOL_SOCKET, type == Self.timestampOption, length >= 32 {
                            let seconds = controlBytes.load(fromByteOffset: offset + 16, as: Int64.self)
                            let nanoseconds = controlBytes.load(fromByteOffset: offset + 24, as: Int64.self)
                            stamp = seconds * 1_000_000_000 + nanoseconds
                        }
                        offset += (length + 7) & ~7
                    }
                    return count
                }
            }
        }
        let received = Monotonic.now()
        guard count > 0 else { return nil }
        Self.spin(until: received + work)
        var sent = received
        if let stamp {
            let mapped = stamp - Self.realtimeOffset()
            // Never later than the read; a stamp from a stepped clock counts as the read.
            if mapped > 0, UInt64(mapped) <= received, received - UInt64(mapped) < 5_000_000_000 {
                sent = UInt64(mapped)
            }
        }
        return Datagram(
            lines: String(decoding: buffer[..<count], as: UTF8.self).split(separator: "\n"),
            sent: sent,
            received: received
        )
    }

    /// Busy until `deadline` (monotonic): the reader's work on a datagram.
    fileprivate static func spin(until deadline: UInt64) {
        while Monotonic.now() < deadline {}
    }

    /// Waits for a datagram holding the line `line`; returns it.
    func await(_ line: String, timeoutMilliseconds: Int32 = 10_000, from daemon: String) throws -> Datagram {
        let deadline = Monotonic.now() + UInt64(timeoutMilliseconds) * 1_000_000
        while true {
            let now = Monotonic.now()
            guard now < deadline,
                let datagram = receive(timeoutMilliseconds: Int32((deadline - now) / 1_000_000) + 1)
            else {
                throw BenchmarkError("\(daemon) sent no \(line) within \(timeoutMilliseconds) ms")
            }
            if datagram.lines.contains(where: { $0 == line }) { return datagram }
        }
    }

    /// Runs `body` (a stop: SIGTERM, then a wait for the exit) while a thread reads and discards what the
    /// daemon sends, as systemd does while a unit stops: a daemon that waits for its exit's
    /// `BARRIER=1` to be confirmed (vigild) hears the hang-up when the datagram is read (`recv`
    /// without room for control messages closes the descriptor it carries). The thread sleeps in
    /// `poll` between datagrams, looking at its stop flag every 10 ms, and spends the reader's work
    /// on each datagram, as ``receive(timeoutMilliseconds:)`` does.
    func draining<Result>(_ body: () throws -> Result) throws -> Result {
        let drain = NotifyDrain(fd: fd, work: work)
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
                    if poll(&entry, 1, 10) > 0,
                        buffer.withUnsafeMutableBytes({
                            recv(drain.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT))
                        }) > 0
                    {
                        NotifySocket.spin(until: Monotonic.now() + drain.work)
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

    /// Sends SIGTERM to `pid` and waits for its exit as systemd does: in one loop with the notify
    /// socket (a pidfd, as systemd's `SIGCHLD`, in the same event loop), notifications first (systemd
    /// gives its notify socket a higher priority than `SIGCHLD`), each with the reader's work. A
    /// datagram is read without room for control messages, so a `BARRIER=1`'s descriptor is closed
    /// as it is read and the daemon hears the hang-up. Returns when the signal was sent and when this
    /// loop saw the exit.
    func stop(_ pid: pid_t) throws -> (sent: UInt64, exited: UInt64) {
        let exit = vigil_bench_pidfd_open(pid)
        guard exit >= 0 else { throw BenchmarkError("pidfd_open(\(pid)) failed: errno \(errno)") }
        defer { close(exit) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let sent = Monotonic.now()
        kill(pid, SIGTERM)
        let deadline = sent + 10_000_000_000
        while true {
            let now = Monotonic.now()
            guard now < deadline else { throw BenchmarkError("pid \(pid) did not exit within 10 s of SIGTERM") }
            var events = [
                pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: exit, events: Int16(POLLIN), revents: 0),
            ]
            guard poll(&events, 2, Int32((deadline - now) / 1_000_000) + 1) >= 0 || errno == EINTR else {
                throw BenchmarkError("poll failed: errno \(errno)")
            }
            if events[0].revents != 0 {
                let received = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if received > 0 { Self.spin(until: Monotonic.now() + work) }
                continue
            }
            if events[1].revents != 0 { return (sent, Monotonic.now()) }
        }
    }

    /// Counts datagrams holding `line` until `untilNanoseconds` (monotonic).
    func count(_ line: String, untilNanoseconds deadline: UInt64) -> Int {
        var seen = 0
        while true {
            let now = Monotonic.now()
            guard now < deadline else { return seen }
            if let datagram = receive(timeoutMilliseconds: Int32((deadline - now) / 1_000_000) + 1),
                datagram.lines.contains(where: { $0 == line })
            {
                seen += 1
            }
        }
    }

    /// Reads (and so keeps off the next round trip) whatever arrives for `nanoseconds`: the
    /// pause between two reloads, as `systemctl reload`s are apart.
    func pause(nanoseconds: UInt64) {
        _ = count("", untilNanoseconds: Monotonic.now() + nanoseconds)
    }
}

/// The socket and stop flag of ``NotifySocket/draining(_:)``'s thread.
private final class NotifyDrain: Sendable {
    let fd: Int32
    let work: UInt64
    let done = Atomic<Bool>(false)
    init(fd: Int32, work: UInt64) {
        self.fd = fd
        self.work = work
    }
}

/// What one start–reload–stop cycle of a daemon measured.
struct CycleSample {
    var start: UInt64
    var reloads: [UInt64]
    /// The same reloads up to the harness's wake-up on READY=1: what systemd's own clock sees.
    var reloadsSeen: [UInt64]
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
    /// The pause before each reload (notifybench's default, 10 ms): `systemctl reload`s come
    /// seconds apart, so a reload finds the daemon asleep and its caches cold, and its deferred
    /// work (vigild's status file, 1 ms after READY=1) done. Back to back (0) a reload finds
    /// everything hot: 30 µs instead of 150 for the C floor here, and a different ratio.
    var reloadGapNanoseconds: UInt64
    /// What the reader spends on each datagram (``NotifySocket``).
    var readerWorkNanoseconds: UInt64
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
    ) throws -> DaemonProcess {
        try DaemonProcess(
            executable: daemon.executable,
            arguments: arguments(daemon, tag: tag),
            environment: environment(socket: socket, watchdogMicroseconds: watchdogMicroseconds),
            inheritEnvironment: false,
            outputPath: "\(workDirectory)/\(tag).log"
        )
    }

    /// Blocks until `pid` has exited and returns its status (128 + n when signal n killed it),
    /// without reaping it: its `DaemonProcess` reaps it when it goes (a `waitpid` here could
    /// race the test kit's own reaping of the same pid, given to the next daemon by then).
    private static func awaitExit(_ pid: pid_t) -> Int32 {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
        let status = info._sifields._sigchld.si_status
        return info.si_code == CLD_EXITED ? status & 0xff : 128 + status
    }

    /// exec → READY=1, reloads (signal → RELOADING=1 → READY=1), RSS, SIGTERM → exit.
    func cycle(_ daemon: MeasuredDaemon, tag: String) throws -> CycleSample {
        let socket = try NotifySocket(path: "\(workDirectory)/\(tag).notify", workNanoseconds: readerWorkNanoseconds)
        let began = Monotonic.now()
        // Used up to the stop (`process.pid`), so that it is not released early: when it goes, it
        // kills the daemon if it still runs, and reaps it.
        let process = try spawn(daemon, tag: tag, socket: socket)
        let ready = try socket.await("READY=1", from: daemon.name).sent
        let memory = Memory(pid: process.pid)
        var reloads: [UInt64] = []
        var reloadsSeen: [UInt64] = []
        for _ in 0..<reloadsPerCycle {
            socket.pause(nanoseconds: reloadGapNanoseconds)
            let sent = Monotonic.now()
            kill(process.pid, SIGHUP)
            _ = try socket.await("RELOADING=1", from: daemon.name)
            let answer = try socket.await("READY=1", from: daemon.name)
            reloads.append(answer.sent - sent)
            reloadsSeen.append(answer.received - sent)
        }
        // The same with an edited file: what `systemctl reload` after an edit costs (a daemon
        // that skips work for unchanged bytes does it all here).
        var editedReloads: [UInt64] = []
        for index in 0..<reloadsPerCycle {
            socket.pause(nanoseconds: reloadGapNanoseconds)
            try rewriteConfiguration(configurationVersions[index % configurationVersions.count])
            let sent = Monotonic.now()
            kill(process.pid, SIGHUP)
            _ = try socket.await("RELOADING=1", from: daemon.name)
            editedReloads.append(try socket.await("READY=1", from: daemon.name).sent - sent)
        }
        try rewriteConfiguration(configurationVersions[0])
        socket.pause(nanoseconds: reloadGapNanoseconds)
        let (stopSent, stopped) = try socket.stop(process.pid)
        let status = Self.awaitExit(process.pid)
        guard status == 0 else {
            throw BenchmarkError("\(daemon.name) exited with status \(status); see \(workDirectory)/\(tag).log")
        }
        return CycleSample(
            start: ready - began,
            reloads: reloads,
            reloadsSeen: reloadsSeen,
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
        let socket = try NotifySocket(path: "\(workDirectory)/\(tag).notify", workNanoseconds: readerWorkNanoseconds)
        let process = try spawn(daemon, tag: tag, socket: socket, watchdogMicroseconds: watchdogMicroseconds)
        defer {
            _ = try? socket.draining {
                kill(process.pid, SIGTERM)
                _ = Self.awaitExit(process.pid)
            }
        }
        _ = try socket.await("READY=1", from: daemon.name)
        // Let start-up settle (threads that finish their first work go to sleep).
        _ = socket.count("WATCHDOG=1", untilNanoseconds: Monotonic.now() + 500_000_000)
        let before = ProcFile.voluntarySwitches(pid: process.pid)
        let began = Monotonic.now()
        let pings = socket.count("WATCHDOG=1", untilNanoseconds: began + UInt64(idleSeconds) * 1_000_000_000)
        let seconds = Double(Monotonic.now() - began) / 1e9
        let after = ProcFile.voluntarySwitches(pid: process.pid)
        return (Double(after - before) / seconds, Double(pings) / seconds, ProcFile.threads(pid: process.pid))
    }
}

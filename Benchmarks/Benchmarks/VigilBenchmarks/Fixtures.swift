import BenchmarkSupport
import CVigilSystemd
import Logging
import Synchronization
import Vigil
import VigilLifecycle
import VigilSystemd

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// What the benchmarks in VigilBenchmarks.swift run against. Public API only: the fixtures that
// the old in-package benchmark took from VigilTesting (`UnixDatagramSocket`, `DetachedThread`)
// and VigildCore (`VigildConfiguration`) are `package` symbols, replaced here (BenchmarkSupport,
// a pthread, `ReferenceConfiguration`); the journal handler is the one `Daemon.bootstrapLogging`
// picks when stderr is the journal (the stderr fallback, which it picks otherwise, is measured
// in a process of its own: StderrBenchmarks).

/// swift-log bootstrapped once for this process as a daemon under systemd with stderr connected
/// to the journal would be (`JOURNAL_STREAM` naming fd 2): every logger writes native journal
/// entries. At `critical` except while the journal benchmark runs, so that the daemons of the
/// other benchmarks build no entry for their lifecycle records.
let benchmarkLogging: DaemonLogging = {
    var info = stat()
    let saved = getenv("JOURNAL_STREAM").map { String(cString: $0) }
    if fstat(2, &info) == 0 { setenv("JOURNAL_STREAM", "\(info.st_dev):\(info.st_ino)", 1) }
    defer {
        if let saved { setenv("JOURNAL_STREAM", saved, 1) } else { unsetenv("JOURNAL_STREAM") }
    }
    return Daemon.bootstrapLogging(identifier: "vigild", level: .critical)
}()

/// A listener that counts what it is given, and accepts every reload; it keeps the context it
/// started with, through which the benchmark asks the daemon for events as a listener would.
final class CountingListener: Listener {
    let name: String
    let dependencies: [String]
    private let count = Atomic<Int>(0)
    private let started = Mutex<ListenerContext?>(nil)

    init(name: String, dependencies: [String] = []) {
        self.name = name
        self.dependencies = dependencies
    }

    var deliveries: Int { count.load(ordering: .relaxed) }

    /// The context the daemon handed this listener at start.
    var context: ListenerContext? { started.withLock { $0 } }

    func start(context: ListenerContext) async throws {
        started.withLock { $0 = context }
    }

    func userSignal(_ signal: ProcessSignal, context: ListenerContext) async throws {
        count.add(1, ordering: .relaxed)
    }

    func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        count.add(1, ordering: .relaxed)
        return .accept
    }

    func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws {
        count.add(1, ordering: .relaxed)
    }
}

/// Resumes whoever waits for the next record of a kind: the benchmark's end of a round trip.
final class RecordWaiter: LifecycleObserver {
    private let waiting = Mutex<(kind: String, continuation: CheckedContinuation<Void, Never>)?>(nil)

    func observe(_ record: LifecycleRecord) {
        let kind: String
        switch record.event {
        case .started: kind = "started"
        case .userSignal: kind = "userSignal"
        case .reloadApplied, .reloadRejected: kind = "reload"
        default: return
        }
        let continuation = waiting.withLock { waiting -> CheckedContinuation<Void, Never>? in
            guard let current = waiting, current.kind == kind else { return nil }
            waiting = nil
            return current.continuation
        }
        continuation?.resume()
    }

    /// Arms the wait for `kind`, then calls `trigger`, then waits.
    func wait(for kind: String, after trigger: () -> Void) async {
        await withCheckedContinuation { continuation in
            waiting.withLock { $0 = (kind, continuation) }
            trigger()
        }
    }
}

/// A running `Daemon` with a `RecordWaiter`, started in a benchmark's setup and stopped in its
/// teardown. The benchmark asks it for events through the first listener's `ListenerContext`,
/// as a daemon's own listener does (the mediator itself is not public API).
final class RunningDaemon: Sendable {
    private let running = Mutex<(task: Task<Int32, Never>, context: ListenerContext?)?>(nil)
    let waiter = RecordWaiter()

    func start(_ listeners: [CountingListener], with others: [any Listener] = []) async throws {
        guard let first = listeners.first else { throw BenchmarkError("a daemon needs a counting listener") }
        var daemon = Daemon(
            identifier: "bench",
            version: "bench",
            listeners: others + listeners,
            logging: benchmarkLogging
        )
        daemon.observers = [waiter]
        await waiter.wait(for: "started") {
            running.withLock { $0 = (Task { [daemon] in await daemon.run() }, nil) }
        }
        guard let context = first.context else { throw BenchmarkError("the daemon started without its listeners") }
        running.withLock { $0?.context = context }
    }

    var context: ListenerContext? { running.withLock { $0?.context } }

    func stop() async throws {
        guard
            let (task, context) = running.withLock({ running in
                defer { running = nil }; return running
            })
        else {
            return
        }
        if let context { context.requestTermination("benchmark done") } else { task.cancel() }
        let status = await task.value
        guard status == 0 else { throw BenchmarkError("the daemon exited with status \(status)") }
    }
}

/// One SIGUSR1-style event to `listeners` counting listeners.
final class FanOutFixture: Sendable {
    let listeners: [CountingListener]
    let running = RunningDaemon()

    init(listeners count: Int) {
        listeners = (0..<count).map { CountingListener(name: "listener-\($0)") }
    }

    func start() async throws { try await running.start(listeners) }

    func event() async {
        guard let context = running.context else { return }
        await running.waiter.wait(for: "userSignal") { context.requestUserSignal(.sigusr1) }
    }

    func stop() async throws {
        try await running.stop()
        guard listeners.allSatisfy({ $0.deliveries > 0 }) else {
            throw BenchmarkError("fan-out to \(listeners.count): a listener was never called")
        }
    }
}

/// A configuration of the reference file's shape (vigild's own type is a `package` symbol of
/// VigildCore): decoded and validated on every reload.
struct ReferenceConfiguration: ValidatedConfiguration {
    struct Interval: Decodable, Sendable, Equatable {
        var interval: Double?
        var message: String?
        var checkpointInterval: Double?
    }
    var logLevel: String?
    var heartbeat: Interval?
    var persistence: Interval?

    static let defaultConfiguration = ReferenceConfiguration()

    func validate() throws(InvalidValue) {}
}

/// SIGHUP's work without the signal: two phases through 10 listeners, one of which reads and
/// decodes packaging/vigild.json.
final class ReloadFixture: Sendable {
    static let reference: String = {
        // #filePath is Benchmarks/Benchmarks/VigilBenchmarks/Fixtures.swift in the repository.
        var path = "\(#filePath)"
        for _ in 0..<4 { path = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]) }
        return path + "/packaging/vigild.json"
    }()
    let running = RunningDaemon()

    func start() async throws {
        // A start that fails would leave the wait for "started" hanging: the file must be there.
        guard access(Self.reference, R_OK) == 0 else { throw BenchmarkError("cannot read \(Self.reference)") }
        let configuration = ConfigurationListener<ReferenceConfiguration>(source: .file(Self.reference, required: true))
        try await running.start(
            (0..<9).map { CountingListener(name: "listener-\($0)", dependencies: ["configuration"]) },
            with: [configuration]
        )
    }

    func reload() async {
        guard let context = running.context else { return }
        await running.waiter.wait(for: "reload") { context.requestReload() }
    }

    func stop() async throws { try await running.stop() }
}

/// The journal handler (through `benchmarkLogging`) and `sd_journal_sendv` with the same 11
/// fields (8 standard + 3 metadata).
final class JournalFixture: Sendable {
    private let drain = Mutex<Drain?>(nil)
    /// Calls that failed (counted, not trapped: the teardown reports them).
    private let failures = Atomic<Int>(0)
    /// Made after swift-log is bootstrapped (a logger keeps the handler it was made with).
    private let logger: Logger = {
        _ = benchmarkLogging
        return Logger(label: "bench")
    }()
    /// The fields as a C programmer would pass them, built once (the least the call can cost).
    nonisolated(unsafe) private let vectors: UnsafeMutableBufferPointer<iovec> = {
        let fields = [
            "MESSAGE=Reload applied: configuration generation 2 is now in force",
            "PRIORITY=5",
            "SYSLOG_IDENTIFIER=vigild",
            "CODE_FILE=VigilBenchmarks/Fixtures.swift",
            "CODE_LINE=200",
            "CODE_FUNC=handlerCall()",
            "SWIFT_LOG_LABEL=bench",
            "SWIFT_LOG_SOURCE=VigilBenchmarks",
            "MESSAGE_ID=7dd32b12fecb4f54b882f1a4b4061f72",
            "VIGIL_EVENT=reload-applied",
            "VIGIL_GENERATION=2",
        ]
        let vectors = UnsafeMutableBufferPointer<iovec>.allocate(capacity: fields.count)
        for (index, field) in fields.enumerated() {
            let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: field.utf8.count, alignment: 1)
            bytes.copyBytes(from: field.utf8)
            vectors[index] = iovec(iov_base: bytes.baseAddress, iov_len: bytes.count)
        }
        return vectors
    }()

    func start() throws {
        let drain = try Drain(path: "/run/systemd/journal/socket")
        self.drain.withLock { $0 = drain }
        benchmarkLogging.level = .info
    }

    func stop() throws {
        benchmarkLogging.level = .critical
        guard
            let drain = drain.withLock({ drain in
                defer { drain = nil }; return drain
            })
        else { return }
        drain.stop()
        let failed = failures.exchange(0, ordering: .relaxed)
        guard drain.received > 0, failed == 0 else {
            throw BenchmarkError(
                "the journal drain received \(drain.received) entries; \(failed) sd_journal_sendv calls failed"
            )
        }
    }

    func handlerCall() -> UInt64 {
        Monotonic.time {
            logger.notice(
                "Reload applied: configuration generation 2 is now in force",
                metadata: [
                    "MESSAGE_ID": "7dd32b12fecb4f54b882f1a4b4061f72",
                    "VIGIL_EVENT": "reload-applied",
                    "VIGIL_GENERATION": "2",
                ]
            )
        }
    }

    func rawCall() -> UInt64 {
        Monotonic.time {
            if sd_journal_sendv(vectors.baseAddress, Int32(vectors.count)) < 0 { failures.add(1, ordering: .relaxed) }
        }
    }
}

/// SystemdNotifier and `sd_notify` with `STATUS=…` and `READY=1`, to a drained socket.
final class NotifyFixture: Sendable {
    private let drain = Mutex<Drain?>(nil)
    /// Calls that failed (counted, not trapped: the teardown reports them).
    private let failures = Atomic<Int>(0)
    private let notifier = SystemdNotifier()

    func start() throws {
        var template = Array("/tmp/vigil-bench-notify.XXXXXX".utf8CString)
        let directory = template.withUnsafeMutableBufferPointer { buffer -> String? in
            guard let base = buffer.baseAddress, let made = mkdtemp(base) else { return nil }
            return String(cString: made)
        }
        guard let directory else { throw BenchmarkError("mkdtemp in /tmp failed: errno \(errno)") }
        let path = directory + "/notify.sock"
        let drain = try Drain(path: path)
        self.drain.withLock { $0 = drain }
        setenv("NOTIFY_SOCKET", path, 1)
    }

    func stop() throws {
        unsetenv("NOTIFY_SOCKET")
        guard
            let drain = drain.withLock({ drain in
                defer { drain = nil }; return drain
            })
        else { return }
        drain.stop()
        rmdir(String(drain.path[..<(drain.path.lastIndex(of: "/") ?? drain.path.endIndex)]))
        let failed = failures.exchange(0, ordering: .relaxed)
        guard drain.received > 0, failed == 0 else {
            throw BenchmarkError(
                "the notify drain received \(drain.received) datagrams; \(failed) notifications failed"
            )
        }
    }

    func notifierCall() -> UInt64 {
        Monotonic.time {
            do {
                try notifier.send("STATUS=Running (generation 2)\nREADY=1")
            } catch {
                failures.add(1, ordering: .relaxed)
            }
        }
    }

    func rawCall() -> UInt64 {
        Monotonic.time {
            if sd_notify(0, "STATUS=Running (generation 2)\nREADY=1") <= 0 { failures.add(1, ordering: .relaxed) }
        }
    }
}

/// A datagram socket that a thread of its own empties as fast as it can: journald's or
/// systemd's end, reduced to reading.
final class Drain: Sendable {
    let path: String
    private let descriptor: Int32
    private let count = Atomic<Int>(0)

    init(path: String) throws {
        self.path = path
        descriptor = try boundDatagramSocket(path: path)
        var size: Int32 = 8 << 20
        setsockopt(descriptor, SOL_SOCKET, SO_RCVBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size))
        let unmanaged = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let created = pthread_create(
            &thread,
            nil,
            { context in
                guard let context else { return nil }
                let drain = Unmanaged<Drain>.fromOpaque(context).takeRetainedValue()
                drain.empty()
                return nil
            },
            unmanaged.toOpaque()
        )
        guard created == 0 else {
            unmanaged.release()
            throw BenchmarkError("pthread_create failed: \(created)")
        }
        pthread_detach(thread)
    }

    private func empty() {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let received = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if received < 0 && errno == EINTR { continue }
            guard received > 0 else { break }
            count.add(1, ordering: .relaxed)
        }
        close(descriptor)
    }

    var received: Int { count.load(ordering: .relaxed) }

    func stop() {
        shutdown(descriptor, Int32(SHUT_RDWR))
        unlink(path)
    }
}

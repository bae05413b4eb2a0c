import CVigilMallocCounter
import CVigilSystemd
import Logging
import Synchronization
import Vigil
import VigilTesting
import VigildCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Time and allocations per operation, from a warm-up and then `iterations` measured runs.
struct Measurement {
    var nanoseconds: Double
    var allocations: Double

    static func of(iterations: Int, _ body: () throws -> Void) rethrows -> Measurement {
        for _ in 0..<max(iterations / 10, 10) { try body() }
        let allocations = cvigil_malloc_count()
        let began = Monotonic.now()
        for _ in 0..<iterations { try body() }
        let elapsed = Monotonic.now() - began
        return Measurement(
            nanoseconds: Double(elapsed) / Double(iterations),
            allocations: Double(cvigil_malloc_count() - allocations) / Double(iterations)
        )
    }

    static func of(iterations: Int, _ body: () async throws -> Void) async rethrows -> Measurement {
        for _ in 0..<max(iterations / 10, 10) { try await body() }
        let allocations = cvigil_malloc_count()
        let began = Monotonic.now()
        for _ in 0..<iterations { try await body() }
        let elapsed = Monotonic.now() - began
        return Measurement(
            nanoseconds: Double(elapsed) / Double(iterations),
            allocations: Double(cvigil_malloc_count() - allocations) / Double(iterations)
        )
    }

    /// The median of `rounds` measurements (by time), so one noisy round does not decide.
    static func median(rounds: Int = 5, iterations: Int, _ body: () throws -> Void) rethrows -> Measurement {
        var all: [Measurement] = []
        for _ in 0..<rounds { all.append(try of(iterations: iterations, body)) }
        return all.sorted { $0.nanoseconds < $1.nanoseconds }[rounds / 2]
    }

    static func median(rounds: Int = 5, iterations: Int, _ body: () async throws -> Void) async rethrows -> Measurement
    {
        var all: [Measurement] = []
        for _ in 0..<rounds { all.append(try await of(iterations: iterations, body)) }
        return all.sorted { $0.nanoseconds < $1.nanoseconds }[rounds / 2]
    }
}

/// A listener that counts what it is given, and accepts every reload.
final class CountingListener: Listener {
    let name: String
    let dependencies: [String]
    private let count = Atomic<Int>(0)

    init(name: String, dependencies: [String] = []) {
        self.name = name
        self.dependencies = dependencies
    }

    var deliveries: Int { count.load(ordering: .relaxed) }

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
        switch record {
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

/// A notifier that drops messages: the mediator's own cost, without a socket.
struct DroppingNotifier: ServiceManagerNotifier {
    func notify(_ messages: [NotifyMessage]) throws {}
}

/// Mediator fan-out, the in-process reload, the log handlers and the notifier.
struct InProcessBenchmarks {
    var configurationPath: String
    var workDirectory: String

    func progress(_ text: String) {
        var line = text + "\n"
        line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }

    func run() async throws -> [Row] {
        var rows: [Row] = []
        for listeners in [1, 10, 100] {
            progress("fan-out to \(listeners) listeners")
            rows.append(try await fanOut(listeners: listeners))
        }
        progress("in-process reload")
        rows.append(try await reload())
        progress("journal handler")
        rows += try journal()
        progress("notifier")
        rows.append(try notifier())
        return rows
    }

    private static let quietLogger = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }

    /// Starts a group of `listeners`, runs `body` against it, stops it.
    private func withGroup<Result>(
        _ listeners: [any Listener],
        values: ValueStore = ValueStore(),
        _ body: (ListenerGroup, RecordWaiter) async throws -> Result
    ) async throws -> Result {
        let waiter = RecordWaiter()
        let group = try ListenerGroup(
            listeners: listeners,
            configuration: .init(
                logger: Self.quietLogger,
                notifier: DroppingNotifier(),
                signals: SignalMap(),
                observers: [waiter],
                values: values
            )
        )
        let running = Task { try await group.run() }
        await waiter.wait(for: "started") {}
        let result = try await body(group, waiter)
        group.requestTermination(.requested("benchmark done"))
        try await running.value
        return result
    }

    /// One SIGUSR1-style event through the mediator to every listener, and back to the caller.
    func fanOut(listeners count: Int) async throws -> Row {
        let listeners = (0..<count).map { CountingListener(name: "listener-\($0)") }
        let iterations = count >= 100 ? 2_000 : 10_000
        let measured = try await withGroup(listeners) { group, waiter in
            await Measurement.median(iterations: iterations) {
                await waiter.wait(for: "userSignal") { group.requestUserSignal(.sigusr1) }
            }
        }
        let delivered = listeners.reduce(0) { $0 + $1.deliveries }
        guard delivered >= iterations * count else {
            throw BenchmarkError(
                "fan-out to \(count): \(delivered) deliveries, expected at least \(iterations * count)"
            )
        }
        let perDelivery = measured.nanoseconds / Double(count)
        return Row(
            measure:
                "Fan-out: one event to \(count) listener\(count == 1 ? "" : "s") (event \(Format.fixed(measured.nanoseconds / 1000, 1)) µs, \(Format.fixed(measured.allocations, 0)) allocations)",
            vigil: "\(Format.fixed(perDelivery, 0)) ns/delivery",
            floor: "",
            ratio: "",
            budget: "≤ 200 ns per delivery",
            met: perDelivery <= 200
        )
    }

    /// SIGHUP's work without the signal: two-phase reload through 10 listeners, one of which
    /// reads, parses, decodes and validates the reference configuration.
    func reload() async throws -> Row {
        let configuration = ConfigurationListener<VigildConfiguration>(source: .file(configurationPath, required: true))
        let listeners: [any Listener] =
            [configuration] + (0..<9).map { CountingListener(name: "listener-\($0)", dependencies: ["configuration"]) }
        let measured = try await withGroup(listeners) { group, waiter in
            await Measurement.median(iterations: 2_000) {
                await waiter.wait(for: "reload") { group.requestReload() }
            }
        }
        let decode = try Measurement.median(iterations: 2_000) {
            _ = try configuration.load()
        }
        return Row(
            measure:
                "In-process reload: 10 listeners, two phases, reference configuration read and decoded (of which decoding \(Format.fixed(decode.nanoseconds / 1000, 1)) µs); \(Format.fixed(measured.allocations, 0)) allocations",
            vigil: Format.microseconds(measured.nanoseconds),
            floor: "",
            ratio: "",
            budget: "",
            met: nil
        )
    }

    /// The journal handler against `sd_journal_sendv` with the same fields, and the stderr
    /// fallback. The journal socket is a drain that this process binds at
    /// /run/systemd/journal/socket in a private mount namespace (run.sh sets that up), so the
    /// figures are the client's cost, not journald's.
    func journal() throws -> [Row] {
        let drain = try Drain(path: "/run/systemd/journal/socket")
        defer { drain.stop() }
        let control = LogLevelControl(.info)
        let handler = JournalLogHandler(label: "bench", identifier: "vigild", levelControl: control)
        let logger = Logger(label: "bench") { _ in handler }
        // Exactly the fields the handler sends for the call below (its standard fields, then
        // the metadata), as a C programmer would pass them.
        let fields = [
            "MESSAGE=Reload applied: configuration generation 2 is now in force",
            "PRIORITY=5",
            "SYSLOG_IDENTIFIER=vigild",
            "CODE_FILE=VigilBenchmarks/InProcessBenchmarks.swift",
            "CODE_LINE=200",
            "CODE_FUNC=journal()",
            "SWIFT_LOG_LABEL=bench",
            "SWIFT_LOG_SOURCE=VigilBenchmarks",
            "MESSAGE_ID=7dd32b12fecb4f54b882f1a4b4061f72",
            "VIGIL_EVENT=reload-applied",
            "VIGIL_GENERATION=2",
        ]
        let rawPrebuilt = try prebuiltRaw(fields)
        let vigil = Measurement.median(iterations: 20_000) {
            logger.notice(
                "Reload applied: configuration generation 2 is now in force",
                metadata: [
                    "MESSAGE_ID": "7dd32b12fecb4f54b882f1a4b4061f72",
                    "VIGIL_EVENT": "reload-applied",
                    "VIGIL_GENERATION": "2",
                ]
            )
        }
        guard drain.received > 0 else {
            throw BenchmarkError("the journal drain received no entries")
        }
        let floor = rawPrebuilt.nanoseconds
        var rows = [
            Row(
                measure:
                    "Journal entry, 11 fields (8 standard + 3 metadata): JournalLogHandler vs raw sd_journal_sendv, iovecs prebuilt (\(Format.fixed(vigil.allocations, 0)) vs \(Format.fixed(rawPrebuilt.allocations, 0)) allocations)",
                vigil: "\(Format.fixed(vigil.nanoseconds, 0)) ns",
                floor: "\(Format.fixed(floor, 0)) ns",
                ratio: Format.ratio(vigil.nanoseconds, floor),
                budget: "≤ 1.1× raw",
                met: vigil.nanoseconds <= 1.1 * floor
            )
        ]
        rows.append(try stderrThroughput())
        return rows
    }

    /// `sd_journal_sendv` with iovecs built once: the least the call can cost.
    private func prebuiltRaw(_ fields: [String]) throws -> Measurement {
        var vectors = fields.map { field -> iovec in
            let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: field.utf8.count, alignment: 1)
            bytes.copyBytes(from: field.utf8)
            return iovec(iov_base: bytes.baseAddress, iov_len: bytes.count)
        }
        defer { for vector in vectors { vector.iov_base.deallocate() } }
        var errors: Int32 = 0
        let measured = Measurement.median(iterations: 20_000) {
            if sd_journal_sendv(&vectors, Int32(vectors.count)) < 0 { errors += 1 }
        }
        guard errors == 0 else { throw BenchmarkError("sd_journal_sendv failed \(errors) times") }
        return measured
    }

    /// Lines per second through the stderr handler (`<N>` format) into /dev/null.
    private func stderrThroughput() throws -> Row {
        let saved = dup(2)
        let null = open("/dev/null", O_WRONLY)
        dup2(null, 2)
        defer {
            dup2(saved, 2)
            close(saved)
            close(null)
        }
        let handler = StderrLogHandler(label: "bench", format: .syslogPrefixed, levelControl: LogLevelControl(.info))
        let logger = Logger(label: "bench") { _ in handler }
        let vigil = Measurement.median(iterations: 50_000) {
            logger.notice(
                "Reload applied: configuration generation 2 is now in force",
                metadata: ["MESSAGE_ID": "7dd32b12fecb4f54b882f1a4b4061f72", "VIGIL_GENERATION": "2"]
            )
        }
        let line = Array(
            "<5>Reload applied: configuration generation 2 is now in force MESSAGE_ID=7dd32b12fecb4f54b882f1a4b4061f72 VIGIL_GENERATION=2\n"
                .utf8
        )
        let raw = Measurement.median(iterations: 50_000) {
            _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
        }
        return Row(
            measure:
                "stderr fallback (`<N>` lines to /dev/null): StderrLogHandler vs one write(2) of the finished line",
            vigil: "\(Format.fixed(1e9 / vigil.nanoseconds / 1e6, 2)) M lines/s",
            floor: "\(Format.fixed(1e9 / raw.nanoseconds / 1e6, 2)) M lines/s",
            ratio: Format.ratio(vigil.nanoseconds, raw.nanoseconds),
            budget: "",
            met: nil
        )
    }

    /// `SystemdNotifier` against `sd_notify` with the same text, to a drained socket.
    func notifier() throws -> Row {
        let path = workDirectory + "/bench-notify.sock"
        let drain = try Drain(path: path)
        defer { drain.stop() }
        setenv("NOTIFY_SOCKET", path, 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        let notifier = SystemdNotifier()
        var errors: Int32 = 0
        let raw = Measurement.median(iterations: 20_000) {
            if sd_notify(0, "STATUS=Running (generation 2)\nREADY=1") < 0 { errors += 1 }
        }
        let vigil = try Measurement.median(iterations: 20_000) {
            try notifier.notify([.status("Running (generation 2)"), .ready])
        }
        guard errors == 0, drain.received > 0 else {
            throw BenchmarkError("sd_notify failed \(errors) times; the drain received \(drain.received) datagrams")
        }
        return Row(
            measure:
                "READY=1 with STATUS=: SystemdNotifier vs raw sd_notify (\(Format.fixed(vigil.allocations, 0)) vs \(Format.fixed(raw.allocations, 0)) allocations)",
            vigil: "\(Format.fixed(vigil.nanoseconds / 1000, 2)) µs",
            floor: "\(Format.fixed(raw.nanoseconds / 1000, 2)) µs",
            ratio: Format.ratio(vigil.nanoseconds, raw.nanoseconds),
            budget: "≤ 1.1× raw",
            met: vigil.nanoseconds <= 1.1 * raw.nanoseconds
        )
    }
}

/// A datagram socket that a thread of its own empties as fast as it can: journald's or
/// systemd's end, reduced to reading.
final class Drain: Sendable {
    private let descriptor: Int32
    private let count = Atomic<Int>(0)
    private let path: String

    init(path: String) throws {
        unlink(path)
        descriptor = try UnixDatagramSocket.bind(path: path)
        self.path = path
        var size: Int32 = 8 << 20
        setsockopt(descriptor, SOL_SOCKET, SO_RCVBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size))
        DetachedThread.run { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let received = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                if received < 0 && errno == EINTR { continue }
                guard received > 0 else { return }
                count.add(1, ordering: .relaxed)
            }
        }
    }

    var received: Int { count.load(ordering: .relaxed) }

    func stop() {
        shutdown(descriptor, Int32(SHUT_RDWR))
        unlink(path)
    }
}

import CVigilMemoryFile
import Synchronization
import VigilEventLoop
import VigilPOSIX
import VigilPlatform

/// Watches for memory pressure the way systemd hands it to a service (`MemoryPressureWatch=`,
/// systemd 254 and later; `docs/PRESSURE.md`): `$MEMORY_PRESSURE_WATCH` names what to watch and
/// `$MEMORY_PRESSURE_WRITE` (Base64) what to write to it first.
///
/// - A regular file is a PSI file (the cgroup's `memory.pressure`, `/proc/pressure/memory`),
///   refused unless it is on procfs or cgroupfs (so no other file gets the trigger written over
///   its first bytes): opened for writing, the trigger written (`some 200000 2000000`: 200 ms stalled in 2 s), then
///   watched for `POLLPRI`. It is never read.
/// - A FIFO is opened (read-write, so that it never reports a hang-up) and watched for `POLLIN`;
///   what arrives is read and discarded. `$MEMORY_PRESSURE_WRITE` is not written to it: the
///   daemon would read its own bytes back as pressure reported (``unwritten`` holds them).
/// - An `AF_UNIX` stream socket is connected to and watched for `POLLIN`, what arrives
///   discarded; when the peer closes, the watch ends.
/// - `/dev/null` means off.
///
/// Each event calls the handler, on the event loop's thread under ``VigilEventLoop/EventLoopExecutor`` (else
/// on a thread of the watch's own); ``Vigil/Daemon`` turns it into a memory-pressure lifecycle event.
/// Nothing here blocks: the open is non-blocking, the socket's connect too.
package final class MemoryPressureWatch: Sendable {
    /// What `$MEMORY_PRESSURE_WATCH` named.
    package enum Kind: String, Sendable, Hashable {
        /// A PSI file: `POLLPRI` after the trigger was written.
        case pressureFile = "PSI file"
        /// A FIFO: `POLLIN`, bytes discarded.
        case fifo = "FIFO"
        /// An `AF_UNIX` stream socket: `POLLIN`, bytes discarded.
        case socket = "socket"
    }

    /// The path watched.
    package let path: String
    /// What it is.
    package let kind: Kind
    /// The bytes written after opening it (the PSI trigger), decoded from `$MEMORY_PRESSURE_WRITE`.
    package let written: [UInt8]
    /// `$MEMORY_PRESSURE_WRITE`'s bytes when they were not written: a FIFO's.
    package let unwritten: [UInt8]
    private let descriptor: Int32
    private let watch: Mutex<DescriptorWatch?>

    /// The watch `$MEMORY_PRESSURE_WATCH` asks for; `nil` when it is unset, empty or
    /// `/dev/null` (off).
    ///
    /// - Important: Reads the process's environment.
    /// - Throws: ``VigilPOSIX/SystemError`` when the path cannot be watched (missing, not a PSI file in
    ///   procfs or cgroupfs, FIFO or socket, the trigger refused by the kernel) or `$MEMORY_PRESSURE_WRITE` is not
    ///   Base64.
    package static func fromEnvironment(
        handler: @escaping @Sendable () -> Void
    ) throws(SystemError) -> MemoryPressureWatch? {
        let environment = { (name: String) in getenv(name).map { String(cString: $0) } }
        return try Self(
            watch: environment("MEMORY_PRESSURE_WATCH"),
            write: environment("MEMORY_PRESSURE_WRITE"),
            handler: handler
        )
    }

    /// The watch for `watch` and `write` as `$MEMORY_PRESSURE_WATCH` and `$MEMORY_PRESSURE_WRITE`
    /// would give them; `nil` when `watch` is `nil`, empty or `/dev/null`.
    package convenience init?(
        watch: String?,
        write: String?,
        handler: @escaping @Sendable () -> Void
    ) throws(SystemError) {
        guard let watch, !watch.isEmpty, watch != "/dev/null" else { return nil }
        try self.init(path: watch, write: write, handler: handler)
    }

    private init(path: String, write: String?, handler: @escaping @Sendable () -> Void) throws(SystemError) {
        let shown = "MEMORY_PRESSURE_WATCH=\(StderrLogHandler.escaped(String(path.prefix(200))))"
        guard path.hasPrefix("/") else {
            throw SystemError(path: shown, operation: "watch", errno: EINVAL, detail: "it is not an absolute path")
        }
        var bytes: [UInt8] = []
        if let write, !write.isEmpty {
            guard let decoded = Base64.decode(write) else {
                throw SystemError(
                    path: "MEMORY_PRESSURE_WRITE='\(StderrLogHandler.escaped(String(write.prefix(80))))'",
                    operation: "decode",
                    errno: EINVAL,
                    detail: "it is not Base64"
                )
            }
            bytes = decoded
        }
        var info = stat()
        guard stat(path, &info) == 0 else { throw SystemError(path: shown, operation: "watch", errno: errno) }
        let kind: Kind
        let descriptor: Int32
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            kind = .pressureFile
            descriptor = open(path, (bytes.isEmpty ? O_RDONLY : O_RDWR) | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        case S_IFIFO:
            kind = .fifo
            // Read-write: a FIFO opened only for reading reports a hang-up, for ever, once its
            // last writer closed; as a writer ourselves it never does.
            descriptor = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        case S_IFSOCK:
            kind = .socket
            descriptor = Self.connectStream(path)
        case let other:
            throw SystemError(
                path: shown,
                operation: "watch",
                errno: EINVAL,
                detail: "it is \(FileSystem.describeKind(other)), not a PSI file, FIFO or socket"
            )
        }
        guard descriptor >= 0 else { throw SystemError(path: shown, operation: "open", errno: errno) }
        var opened = stat()
        if fstat(descriptor, &opened) != 0 || opened.st_mode & S_IFMT != info.st_mode & S_IFMT {
            close(descriptor)
            throw SystemError(path: shown, operation: "watch", errno: EAGAIN, detail: "it was replaced while opened")
        }
        // A PSI file lives in procfs or cgroupfs, as systemd's sd-event also demands: any other
        // regular file (a typo, /etc/passwd) would have its first bytes overwritten by the trigger.
        // And it is the memory one: procfs and cgroupfs hold files a write changes the system
        // with (/proc/sysrq-trigger, /proc/sys/…, cgroup.procs), whatever the variable names.
        if kind == .pressureFile, let problem = Self.notAMemoryPressureFile(descriptor) {
            close(descriptor)
            throw SystemError(
                path: shown,
                operation: "watch",
                errno: EINVAL,
                detail: problem + "; it was left untouched"
            )
        }
        let unwritten = kind == .fifo ? bytes : []
        if kind == .fifo { bytes = [] }
        if !bytes.isEmpty, let failed = FileSystem.writeAll(bytes, to: descriptor) {
            close(descriptor)
            throw SystemError(
                path: shown,
                operation: "write the trigger from MEMORY_PRESSURE_WRITE to",
                errno: failed,
                detail: failed == EINVAL
                    ? "the kernel refused the trigger (\(StderrLogHandler.escaped(Self.text(bytes))))" : nil
            )
        }
        self.path = path
        self.kind = kind
        self.written = bytes
        self.unwritten = unwritten
        self.descriptor = descriptor
        self.watch = Mutex(nil)
        let watching = Mutex<DescriptorWatch?>(nil)
        do {
            let created = try DescriptorWatch(
                descriptor: descriptor,
                events: kind == .pressureFile ? .priority : .readable
            ) { [kind] report in
                var ended = report.isEnd
                if kind != .pressureFile {
                    // Bytes are only a doorbell: read them away. End of file ends a socket. At
                    // most 64 reads of 4 KiB a report: a writer that floods the FIFO cannot keep
                    // the loop here (the watch is level-triggered, so the rest comes next turn).
                    var buffer = [UInt8](repeating: 0, count: 4096)
                    var reads = 0
                    while reads < 64 {
                        let outcome = buffer.withUnsafeMutableBytes {
                            SystemCall.Outcome(SystemCall.read(descriptor, into: $0))
                        }
                        reads += 1
                        if case .done(let count) = outcome, count > 0 { continue }
                        if outcome != .wouldBlock { ended = true }
                        break
                    }
                }
                if ended {
                    // A closed socket, a removed cgroup: nothing more will come, and a
                    // level-triggered watch would report the end for ever.
                    watching.withLock { $0.take() }?.cancel()
                    return
                }
                handler()
            }
            watching.withLock { $0 = created }
            self.watch.withLock { $0 = created }
        } catch {
            close(descriptor)
            throw SystemError(path: shown, operation: "watch", errno: error.errno)
        }
    }

    /// Stops watching and closes the descriptor. Idempotent.
    package func cancel() {
        guard let watch = watch.withLock({ $0.take() }) else { return }
        watch.cancel()
        close(descriptor)
    }

    deinit { cancel() }

    /// `some 200000 2000000`, for messages: a trigger up to its first NUL.
    package static func text(_ bytes: [UInt8]) -> String {
        String(decoding: bytes.prefix { $0 != 0 }.prefix(80), as: UTF8.self)
    }

    /// Why the open `descriptor` is not a memory PSI file, or `nil` when it is: procfs's
    /// `/proc/pressure/memory`, or a `memory.pressure` on cgroupfs (a cgroup's), by the path the
    /// kernel gives for the descriptor (a link in the variable is followed to what was opened).
    private static func notAMemoryPressureFile(_ descriptor: Int32) -> String? {
        let type = cvigil_file_system_type(descriptor)
        // PROC_SUPER_MAGIC, CGROUP2_SUPER_MAGIC (linux/magic.h).
        guard type == 0x9fa0 || type == 0x6367_7270 else {
            return "it is a regular file outside /proc and the cgroup file system, not a PSI file"
        }
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/self/fd/\(descriptor)", &buffer, buffer.count - 1)
        let opened = count > 0 ? String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        if type == 0x9fa0 ? opened == "/proc/pressure/memory" : opened.hasSuffix("/memory.pressure") {
            return nil
        }
        let shown = StderrLogHandler.escaped(String(opened.prefix(200)))
        return "it is \(shown.isEmpty ? "a file" : shown) on \(type == 0x9fa0 ? "procfs" : "the cgroup file system"), "
            + "not /proc/pressure/memory or a cgroup's memory.pressure"
    }

    /// A non-blocking `AF_UNIX` stream socket connected to `path`; -1 with `errno` on failure.
    private static func connectStream(_ path: String) -> Int32 {
        guard let address = UnixSocketAddress(path), !address.isAbstract else {
            errno = ENAMETOOLONG
            return -1
        }
        let descriptor = socket(
            AF_UNIX,
            Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue),
            0
        )
        guard descriptor >= 0 else { return -1 }
        guard SystemCall.connect(descriptor, address) == 0 else {
            let code = errno
            close(descriptor)
            errno = code
            return -1
        }
        return descriptor
    }
}

/// Base64 (RFC 4648, with padding or without), as systemd encodes `$MEMORY_PRESSURE_WRITE`.
enum Base64 {
    static func decode(_ text: String) -> [UInt8]? {
        var output: [UInt8] = []
        var accumulator: UInt32 = 0
        var bits = 0
        var padding = 0
        for byte in text.utf8 {
            let value: UInt8
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = byte - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): value = byte - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = byte - UInt8(ascii: "0") + 52
            case UInt8(ascii: "+"): value = 62
            case UInt8(ascii: "/"): value = 63
            case UInt8(ascii: "="):
                padding += 1
                continue
            default: return nil
            }
            guard padding == 0 else { return nil }  // data after padding
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // Leftover bits must be fewer than a byte and zero; padding at most two.
        guard padding <= 2, bits < 6, accumulator & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return output
    }
}

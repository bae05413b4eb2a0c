import Glibc
import Logging
import Testing
import VigilSystemd
import VigilTesting

/// Vigil speaks the journal and `LISTEN_FDS` protocols itself; libsystemd is the reference.
/// `vigil-libsystemd-reference` (C, linked with libsystemd) gives libsystemd's answer for the
/// same inputs: the entry `sd_journal_sendv(3)` sends (to a socket it binds as journald would,
/// in a private mount namespace) and what `sd_listen_fds_with_names(3)` reads from an
/// environment. Both journal entries are read by one reader that follows journald's
/// (`server_process_entry()` in `src/journal/journald-native.c`).
@Suite struct LibsystemdConformanceTests {
    // MARK: The journal

    /// One entry's fields as journald keeps them, in order.
    struct JournaldReading: Equatable, CustomStringConvertible {
        var fields: [Field] = []
        /// Field names journald drops (not `[A-Z0-9_]`, starting with `_` or a digit, over 64).
        var dropped: [String] = []
        /// Bytes journald ignores: an unterminated line, a bad binary field, a second entry.
        var noise = false

        struct Field: Equatable, CustomStringConvertible {
            var name: String
            var value: [UInt8]
            var description: String {
                let text = String(decoding: value.prefix(40), as: UTF8.self).debugDescription
                return "\(name)=\(text)\(value.count > 40 ? "… (\(value.count) bytes)" : "")"
            }
        }

        func value(_ name: String) -> [UInt8]? { fields.first { $0.name == name }?.value }
        /// The fields in journald's terms: a set (the journal file keeps an entry's fields in
        /// the order of their data objects, not as sent).
        var set: [Field] {
            fields.sorted { $0.name != $1.name ? $0.name < $1.name : $0.value.lexicographicallyPrecedes($1.value) }
        }
        var description: String { fields.description + (dropped.isEmpty ? "" : " dropped \(dropped)") }

        /// journald's reading of one native datagram (or memfd): `NAME=value\n`, or `NAME\n`, a
        /// little-endian 64-bit length, the value and `\n`; a line starting with `.` or `#` is
        /// skipped; an empty line ends the entry.
        init(_ bytes: [UInt8]) {
            var index = 0
            while index < bytes.count {
                guard let end = bytes[index...].firstIndex(of: UInt8(ascii: "\n")) else {
                    noise = true
                    return
                }
                if end == index {
                    noise = end + 1 < bytes.count
                    return
                }
                if bytes[index] == UInt8(ascii: ".") || bytes[index] == UInt8(ascii: "#") {
                    index = end + 1
                    continue
                }
                if let equals = bytes[index..<end].firstIndex(of: UInt8(ascii: "=")) {
                    keep(bytes[index..<equals], Array(bytes[(equals + 1)..<end]))
                    index = end + 1
                    continue
                }
                guard end + 9 < bytes.count else {
                    noise = true
                    return
                }
                var length: UInt64 = 0
                for byte in bytes[(end + 1)..<(end + 9)].reversed() { length = length << 8 | UInt64(byte) }
                let start = end + 9
                guard length < UInt64(bytes.count - start), bytes[start + Int(length)] == UInt8(ascii: "\n") else {
                    noise = true
                    return
                }
                keep(bytes[index..<end], Array(bytes[start..<(start + Int(length))]))
                index = start + Int(length) + 1
            }
        }

        /// journald's `journal_field_valid(…, allow_protected: false)`.
        private mutating func keep(_ name: ArraySlice<UInt8>, _ value: [UInt8]) {
            let text = String(decoding: name, as: UTF8.self)
            let valid =
                !name.isEmpty && name.count <= 64 && name.first != UInt8(ascii: "_")
                && !(name.first! >= UInt8(ascii: "0") && name.first! <= UInt8(ascii: "9"))
                && name.allSatisfy {
                    ($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z"))
                        || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9"))
                        || $0 == UInt8(ascii: "_")
                }
            if valid { fields.append(Field(name: text, value: value)) } else { dropped.append(text) }
        }
    }

    /// One log call, as the input to both writers.
    struct LogCall {
        var level: Logger.Level
        var message: String
        var metadata: [(key: String, journalName: String, value: String)] = []
        let identifier = "vigil-conformance"
        let label = "conformance.label"
        let source = "Conformance"
        let file = "Conformance/Conformance.swift"
        let function = "conform(to:)"
        let line: UInt = 4242

        /// `PRIORITY=` as syslog(3) numbers levels (`LOG_DEBUG` 7 … `LOG_CRIT` 2): what a C daemon
        /// passes to sd_journal_send(3), written out here rather than taken from Vigil.
        var syslogPriority: Int {
            let priorities: [Logger.Level: Int] = [
                .trace: 7, .debug: 7, .info: 6, .notice: 5, .warning: 4, .error: 3, .critical: 2,
            ]
            return priorities[level]!
        }

        /// The fields a C daemon passes to `sd_journal_sendv` for this call, written out by hand.
        var referenceFields: [String] {
            [
                "MESSAGE=\(message)", "PRIORITY=\(syslogPriority)", "SYSLOG_IDENTIFIER=\(identifier)",
                "CODE_FILE=\(file)", "CODE_LINE=\(line)", "CODE_FUNC=\(function)",
                "SWIFT_LOG_LABEL=\(label)", "SWIFT_LOG_SOURCE=\(source)",
            ] + metadata.map { "\($0.journalName)=\($0.value)" }
        }
    }

    /// What `JournalLogHandler` sends for `call`, read back from a socket that stands in for
    /// journald's.
    static func vigilEntry(_ call: LogCall) throws -> [UInt8] {
        let directory = temporaryDirectory()
        defer { rmdir(directory) }
        let path = directory + "/socket"
        let journald = try UnixDatagramSocket.bind(path: path)
        defer {
            close(journald)
            unlink(path)
        }
        let socket = JournalSocket(path: path)
        let logger = Logger(label: call.label) { label in
            JournalLogHandler(
                label: label,
                identifier: call.identifier,
                levelControl: LogLevelControl(.trace),
                socket: socket
            )
        }
        var metadata: Logger.Metadata = [:]
        for field in call.metadata { metadata[field.key] = .string(field.value) }
        logger.log(
            level: call.level,
            "\(call.message)",
            metadata: metadata,
            source: call.source,
            file: call.file,
            function: call.function,
            line: call.line
        )
        return try receive(journald)
    }

    /// One datagram from `descriptor`, already queued.
    static func receive(_ descriptor: Int32) throws -> [UInt8] {
        var probe: UInt8 = 0
        let size = recv(descriptor, &probe, 1, Int32(MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT))
        guard size >= 0 else { throw SystemCallError("recv (nothing was sent)", errno) }
        var bytes = [UInt8](repeating: 0, count: size)
        let got = bytes.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        guard got == size else { throw SystemCallError("recv", errno) }
        return bytes
    }

    /// What `sd_journal_sendv` sends for `fields`, and whether it came as a datagram (`D`) or
    /// a memfd (`M`).
    static func libsystemdEntry(_ fields: [String]) async throws -> (kind: Character, bytes: [UInt8]) {
        let directory = temporaryDirectory()
        defer { rmdir(directory) }
        var input: [UInt8] = []
        for field in fields {
            withUnsafeBytes(of: UInt64(field.utf8.count).littleEndian) { input.append(contentsOf: $0) }
            input.append(contentsOf: field.utf8)
        }
        try writeBytes(directory + "/input", input)
        defer { unlink(directory + "/input") }
        let output = try await runReference(["journal", directory + "/input", directory + "/output"], in: directory)
        return (Character(Unicode.Scalar(output[0])), Array(output.dropFirst()))
    }

    /// Runs the reference with `arguments` (the last names its output file, read and removed).
    static func runReference(_ arguments: [String], in directory: String) async throws -> [UInt8] {
        let log = directory + "/stderr"
        defer { unlink(log) }
        let process = try DaemonProcess(
            executable: BuiltExecutable.path(of: "vigil-libsystemd-reference"),
            arguments: arguments,
            inheritEnvironment: false,
            outputPath: log
        )
        let status = try await process.waitForExit()
        try #require(
            status == 0,
            "vigil-libsystemd-reference \(arguments.dropLast()): exit \(status): \(readFile(log) ?? "")"
        )
        defer { unlink(arguments.last!) }
        return try readBytes(arguments.last!)
    }

    static func writeBytes(_ path: String, _ bytes: [UInt8]) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw SystemCallError("open \(path)", errno) }
        defer { close(descriptor) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            guard written > 0 else { throw SystemCallError("write \(path)", errno) }
            offset += written
        }
    }

    static func readBytes(_ path: String) throws -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw SystemCallError("open \(path)", errno) }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let got = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard got >= 0 else { throw SystemCallError("read \(path)", errno) }
            if got == 0 { return bytes }
            bytes.append(contentsOf: chunk[..<got])
        }
    }

    /// Both writers' entries for `call`, as journald reads them.
    static func both(
        _ call: LogCall
    ) async throws -> (vigil: JournaldReading, libsystemd: JournaldReading, kind: Character) {
        let vigil = JournaldReading(try vigilEntry(call))
        let reference = try await libsystemdEntry(call.referenceFields)
        let libsystemd = JournaldReading(reference.bytes)
        #expect(!vigil.noise && vigil.dropped.isEmpty, "\(vigil)")
        #expect(!libsystemd.noise && libsystemd.dropped.isEmpty, "\(libsystemd)")
        return (vigil, libsystemd, reference.kind)
    }

    @Test func fieldsAndBinaryValuesBecomeTheSameEntry() async throws {
        let call = LogCall(
            level: .error,
            message: "line one\nline two",
            metadata: [
                ("with-newline", "WITH_NEWLINE", "a\nb"),
                ("with-nul", "WITH_NUL", "x\u{0}y"),
                ("both", "BOTH", "\u{0}\n\u{0}\n"),
                ("empty", "EMPTY", ""),
                ("plain", "PLAIN", "value = with equals"),
                ("sl-service", "SL_SERVICE", "ünïcödé ✓"),
                ("MESSAGE_ID", "MESSAGE_ID", "61ece635e54942e1b9c1dd26c92678c0"),
            ]
        )
        let (vigil, libsystemd, kind) = try await Self.both(call)
        #expect(kind == "D")
        #expect(vigil.set == libsystemd.set)
        #expect(vigil.value("BOTH") == Array("\u{0}\n\u{0}\n".utf8))
        #expect(vigil.fields.count == 15)
    }

    @Test(arguments: Logger.Level.allCases)
    func priorityAndIdentifierAreTheSame(level: Logger.Level) async throws {
        let call = LogCall(level: level, message: "at \(level)")
        let (vigil, libsystemd, _) = try await Self.both(call)
        #expect(vigil.set == libsystemd.set)
        #expect(vigil.value("PRIORITY") == Array("\(call.syslogPriority)".utf8))
        #expect(vigil.value("SYSLOG_IDENTIFIER") == Array(call.identifier.utf8))
    }

    /// A value over 64 KiB: libsystemd sends it whole (as a datagram while one fits its send
    /// buffer, else as a sealed memfd); Vigil cuts it at `JournalSocket.maximumValueBytes` and
    /// says so, by design (one non-blocking datagram per entry). Everything else is the same.
    @Test(arguments: [100 << 10, 0])
    func aLongValueIsWholeInLibsystemdAndCutInVigil(requested: Int) async throws {
        // 0: longer than the biggest datagram libsystemd's socket can send (it asks for an 8 MiB
        // send buffer, the kernel caps it at net.core.wmem_max and doubles it), so the memfd path.
        let wmemMax = Int(readFile("/proc/sys/net/core/wmem_max")?.split(separator: "\n").first ?? "") ?? (8 << 20)
        let size = requested > 0 ? requested : 2 * min(wmemMax, 8 << 20) + (64 << 10)
        let value = "\n" + String(repeating: "x", count: size - 1)
        let call = LogCall(level: .info, message: "long", metadata: [("long", "LONG", value)])
        let (vigil, libsystemd, kind) = try await Self.both(call)
        if requested == 0 { #expect(kind == "M") }
        #expect(libsystemd.value("LONG") == Array(value.utf8))
        let kept = JournalSocket.maximumValueBytes
        #expect(vigil.value("LONG") == Array(value.utf8.prefix(kept)) + Array("… [\(size - kept) bytes cut]".utf8))
        #expect(vigil.set.filter { $0.name != "LONG" } == libsystemd.set.filter { $0.name != "LONG" })
    }

    // MARK: LISTEN_FDS

    enum Reading: Equatable, CustomStringConvertible {
        /// Descriptors from fd 3 on, with these names.
        case passed([String])
        /// Nothing for this process.
        case nothing
        /// An error.
        case refused

        var description: String {
            switch self {
            case .passed(let names): "passed \(names)"
            case .nothing: "nothing"
            case .refused: "refused"
            }
        }
    }

    /// One environment: `pid` with `self` for the reading process, `nil` for unset; `open`
    /// descriptors open from fd 3 in the libsystemd process.
    struct Environment: Sendable, CustomStringConvertible {
        var pid: String?
        var fds: String?
        var names: String?
        var open: Int
        /// libsystemd's reading, when it differs from Vigil's, and why Vigil's is the right one.
        var libsystemdDiffers: (reading: Reading, why: String)? = nil
        var vigil: Reading

        var description: String {
            "LISTEN_PID=\(pid ?? "-") LISTEN_FDS=\(fds ?? "-") LISTEN_FDNAMES=\((names ?? "-").prefix(20).debugDescription)"
        }
    }

    static let longestName = String(repeating: "n", count: 255)
    static let environments: [Environment] = [
        // What systemd sets.
        Environment(pid: "self", fds: "2", names: "http:metrics", open: 2, vigil: .passed(["http", "metrics"])),
        Environment(pid: "self", fds: "1", names: nil, open: 1, vigil: .passed(["unknown"])),
        Environment(pid: "self", fds: "2", names: ":" + longestName, open: 2, vigil: .passed(["", longestName])),
        Environment(pid: "self", fds: "1", names: "", open: 1, vigil: .passed([""])),
        Environment(pid: "self", fds: "3", names: "a:b:c", open: 3, vigil: .passed(["a", "b", "c"])),
        // Meant for another process, or incomplete.
        Environment(pid: "other", fds: "1", names: "http", open: 1, vigil: .nothing),
        Environment(pid: nil, fds: "1", names: "http", open: 1, vigil: .nothing),
        Environment(pid: "self", fds: nil, names: nil, open: 1, vigil: .nothing),
        // Bad values.
        Environment(pid: "abc", fds: "1", names: nil, open: 1, vigil: .refused),
        Environment(pid: "", fds: "1", names: nil, open: 1, vigil: .refused),
        Environment(pid: "0", fds: "1", names: nil, open: 1, vigil: .refused),
        Environment(pid: "-1", fds: "1", names: nil, open: 1, vigil: .refused),
        Environment(pid: "self ", fds: "1", names: nil, open: 1, vigil: .refused),
        Environment(pid: "99999999999999999999", fds: "1", names: nil, open: 1, vigil: .refused),
        Environment(pid: "self", fds: "x", names: nil, open: 1, vigil: .refused),
        Environment(pid: "self", fds: "", names: nil, open: 1, vigil: .refused),
        Environment(pid: "self", fds: "-1", names: nil, open: 1, vigil: .refused),
        Environment(pid: "self", fds: "1 ", names: nil, open: 1, vigil: .refused),
        Environment(pid: "self", fds: "2147483647", names: nil, open: 0, vigil: .refused),
        Environment(pid: "self", fds: "1022", names: nil, open: 0, vigil: .refused),
        Environment(pid: "self", fds: "2", names: "http", open: 2, vigil: .refused),
        Environment(pid: "self", fds: "1", names: "http:metrics", open: 1, vigil: .refused),
        // Where they differ, on purpose.
        Environment(
            pid: "self",
            fds: "0",
            names: nil,
            open: 0,
            libsystemdDiffers: (.refused, "zero descriptors are none: a daemon started by hand binds its own"),
            vigil: .nothing
        ),
        Environment(
            pid: " self",
            fds: "1",
            names: nil,
            open: 1,
            libsystemdDiffers: (.passed(["unknown"]), "systemd writes plain decimal; anything else is refused"),
            vigil: .refused
        ),
        Environment(
            pid: "self",
            fds: "+1",
            names: nil,
            open: 1,
            libsystemdDiffers: (.passed(["unknown"]), "systemd writes plain decimal"),
            vigil: .refused
        ),
        Environment(
            pid: "self",
            fds: "0x2",
            names: nil,
            open: 2,
            libsystemdDiffers: (.passed(["unknown", "unknown"]), "a base prefix is not systemd's"),
            vigil: .refused
        ),
        Environment(
            pid: "self",
            fds: "010",
            names: nil,
            open: 10,
            libsystemdDiffers: (.passed(Array(repeating: "unknown", count: 8)), "libsystemd reads 010 as octal 8"),
            vigil: .refused
        ),
        Environment(
            pid: "self",
            fds: "2",
            names: "http:met\nrics",
            open: 2,
            libsystemdDiffers: (
                .passed(["http", "met\nrics"]),
                "FileDescriptorName= allows printable ASCII only (fdname_is_valid); a newline could forge a log line"
            ),
            vigil: .refused
        ),
        Environment(
            pid: "self",
            fds: "1",
            names: longestName + "n",
            open: 1,
            libsystemdDiffers: (.passed([longestName + "n"]), "FileDescriptorName= allows 255 characters at most"),
            vigil: .refused
        ),
    ]

    @Test(arguments: environments)
    func listenFileDescriptorsAreReadAsLibsystemdReadsThem(environment: Environment) async throws {
        // libsystemd, in a process whose pid replaces "self".
        let directory = temporaryDirectory()
        defer { rmdir(directory) }
        let output = try await Self.runReference(
            [
                "listen", environment.pid ?? "-", environment.fds ?? "-", environment.names ?? "-",
                String(environment.open), directory + "/output",
            ],
            in: directory
        )
        // "r=<result>\n", then each name ending in NUL.
        let firstLine = output.firstIndex(of: UInt8(ascii: "\n")) ?? output.endIndex
        let result = Int(String(decoding: output[..<firstLine].dropFirst(2), as: UTF8.self)) ?? Int.min
        let names = output[min(firstLine + 1, output.endIndex)...].split(separator: 0, omittingEmptySubsequences: false)
            .dropLast().map { String(decoding: $0, as: UTF8.self) }
        let libsystemd: Reading = result > 0 ? .passed(names) : result == 0 ? .nothing : .refused

        // Vigil, told that its pid is 4242.
        var variables: [String: String] = [:]
        variables["LISTEN_PID"] = environment.pid.map {
            $0.replacing("self", with: "4242").replacing("other", with: "4243")
        }
        variables["LISTEN_FDS"] = environment.fds
        variables["LISTEN_FDNAMES"] = environment.names
        let vigil: Reading
        do {
            let passed = try ListenedFileDescriptor.parse(
                environment: { variables[$0] },
                pid: 4242,
                descriptorLimit: 1024
            )
            #expect(passed.map(\.fileDescriptor) == passed.indices.map { Int32(3 + $0) })
            vigil = passed.isEmpty ? .nothing : .passed(passed.map(\.name))
        } catch {
            vigil = .refused
        }

        #expect(vigil == environment.vigil, "Vigil: \(environment)")
        #expect(
            libsystemd == (environment.libsystemdDiffers?.reading ?? environment.vigil),
            "libsystemd (r=\(result)): \(environment) \(environment.libsystemdDiffers?.why ?? "")"
        )
    }
}

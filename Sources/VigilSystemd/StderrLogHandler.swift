import Logging
import Synchronization
import VigilPOSIX
import VigilPlatform

/// A swift-log handler that writes one line per entry to stderr, in one of two formats.
///
/// - ``Format/syslogPrefixed``: under a service manager whose stderr is not the journal, the
///   sd-daemon(3) form `<6>message key=value`; journald or syslog reads the priority from the
///   prefix. Control characters in the message and metadata are escaped (`escaped(_:)`), so
///   an entry stays one line and cannot forge another priority.
/// - ``Format/terminal(colors:)``: for a person: `2026-11-21 19:45:30.123 info vigild: message
///   key=value`, the level coloured when `colors` is on.
package struct StderrLogHandler: LevelControlledLogHandler {
    /// How lines look.
    package enum Format: Sendable, Hashable {
        /// `<N>` priority prefix, no time (the journal adds it).
        case syslogPrefixed
        /// Local time, level, label, message, metadata; ANSI colours when `colors`.
        case terminal(colors: Bool)
    }

    package var metadata: Logger.Metadata = [:]
    package var metadataProvider: Logger.MetadataProvider?
    package let levelControl: LogLevelControl

    private let label: String
    private let format: Format

    /// Creates a handler writing `format` lines for the logger `label`.
    package init(
        label: String,
        format: Format,
        levelControl: LogLevelControl,
        metadataProvider: Logger.MetadataProvider? = nil
    ) {
        self.label = label
        self.format = format
        self.levelControl = levelControl
        self.metadataProvider = metadataProvider
    }

    package func log(event: LogEvent) {
        var line = EscapedLine()
        line.entry(
            format: format,
            label: label,
            level: event.level,
            message: event.message.description,
            metadata: entryMetadata(event),
            error: event.error,
            time: nil
        )
        line.bytes.append(UInt8(ascii: "\n"))
        let format = format
        let label = label
        StandardError.write(line.bytes) { dropped in
            var notice = EscapedLine()
            notice.entry(
                format: format,
                label: label,
                level: .warning,
                message: StandardError.droppedNotice(dropped),
                metadata: [:],
                error: nil,
                time: nil
            )
            notice.bytes.append(UInt8(ascii: "\n"))
            return notice.bytes
        }
    }

    /// Writes `line` to stderr in one `write(2)` where possible, so lines from several threads
    /// never interleave. A closed stderr (`EPIPE`; vigild ignores `SIGPIPE`) loses the line.
    static func writeToStandardError(_ line: String) {
        writeToStandardError(Array(line.utf8))
    }

    /// Writes `bytes` as ``writeToStandardError(_:)-(String)`` does.
    static func writeToStandardError(_ bytes: [UInt8]) {
        StandardError.write(bytes) { Array((StandardError.droppedNotice($0) + "\n").utf8) }
    }

    /// `text` with every control character spelled out (`\n`, `\r`, `\t`, `\x1B`, `\u{85}`)
    /// and backslashes doubled, so an entry stays one line and a message cannot forge a
    /// `<0>` prefix, a second line or a terminal escape sequence.
    package static func escaped(_ text: String) -> String {
        var line = EscapedLine(capacity: 0)
        guard line.appendEscaped(text, unlessClean: true) else { return text }
        return String(decoding: line.bytes, as: UTF8.self)
    }

    /// One entry as a line, without the newline (tests call this directly).
    package static func line(
        format: Format,
        label: String,
        level: Logger.Level,
        message: String,
        metadata: Logger.Metadata,
        error: (any Error)? = nil,
        time: String
    ) -> String {
        var line = EscapedLine()
        line.entry(
            format: format,
            label: label,
            level: level,
            message: message,
            metadata: metadata,
            error: error,
            time: time
        )
        return String(decoding: line.bytes, as: UTF8.self)
    }

    /// `2026-11-21 19:45:30.123`, local time.
    package static func localTime() -> String {
        var line = EscapedLine(capacity: 24)
        line.appendLocalTime()
        return String(decoding: line.bytes, as: UTF8.self)
    }
}

/// One stderr line, built as bytes: clean text is copied as it is, and only the bytes that
/// start a control character or a backslash take the escaping path.
struct EscapedLine {
    var bytes: [UInt8] = []

    init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    /// Appends one entry in `format`; `time` `nil` means now (the terminal format only).
    mutating func entry(
        format: StderrLogHandler.Format,
        label: String,
        level: Logger.Level,
        message: String,
        metadata: Logger.Metadata,
        error: (any Error)?,
        time: String?
    ) {
        switch format {
        case .syslogPrefixed:
            bytes.append(UInt8(ascii: "<"))
            bytes.append(UInt8(ascii: "0") + UInt8(level.syslogPriority))
            bytes.append(UInt8(ascii: ">"))
        case .terminal(let colors):
            if let time { bytes.append(contentsOf: time.utf8) } else { appendLocalTime() }
            bytes.append(UInt8(ascii: " "))
            if colors { bytes.append(contentsOf: Self.color(level).utf8) }
            bytes.append(contentsOf: level.rawValue.utf8)
            if colors { bytes.append(contentsOf: "\u{1B}[0m".utf8) }
            bytes.append(UInt8(ascii: " "))
            appendEscaped(label)
            bytes.append(contentsOf: ": ".utf8)
        }
        appendEscaped(message)
        LogMetadata.forEachSorted(metadata) { key, value in
            bytes.append(UInt8(ascii: " "))
            appendEscaped(key)
            bytes.append(UInt8(ascii: "="))
            if case .string(let string) = value { appendEscaped(string) } else { appendEscaped(value.description) }
        }
        if let error {
            bytes.append(contentsOf: " error=".utf8)
            appendEscaped("\(error)")
        }
    }

    /// Appends `text`, escaped as ``StderrLogHandler/escaped(_:)`` says. With `unlessClean`, appends
    /// nothing and returns `false` when `text` needs no escaping.
    @discardableResult
    mutating func appendEscaped(_ text: String, unlessClean: Bool = false) -> Bool {
        if let appended = text.utf8.withContiguousStorageIfAvailable({
            appendEscaped(utf8: $0, unlessClean: unlessClean)
        }) {
            return appended
        }
        var text = text
        return text.withUTF8 { appendEscaped(utf8: $0, unlessClean: unlessClean) }
    }

    private mutating func appendEscaped(utf8 text: UnsafeBufferPointer<UInt8>, unlessClean: Bool) -> Bool {
        var index = 0
        var clean = 0  // start of the run not yet copied
        func flush(upTo end: Int) {
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: text[clean..<end]))
        }
        while index < text.count {
            // Eight bytes at a time while none of them can start a character to escape.
            while index + 8 <= text.count && !Self.mayNeedEscaping(word: text, at: index) { index += 8 }
            guard index < text.count else { break }
            let byte = text[index]
            // Every character to escape starts with one of these bytes: C0 and DEL, the
            // backslash, 0xC2 (C1 controls, U+0080–U+009F), 0xE2 (U+2028, U+2029, and the
            // bidirectional embeddings, overrides and isolates).
            guard byte < 0x20 || byte == 0x5C || byte == 0x7F || byte == 0xC2 || byte == 0xE2 else {
                index += 1
                continue
            }
            let scalar: UInt32
            let width: Int
            switch byte {
            case 0xC2 where index + 1 < text.count && text[index + 1] < 0xA0:
                (scalar, width) = (UInt32(text[index + 1]), 2)
            case 0xE2 where index + 2 < text.count && Self.isEscapedAfterE2(text[index + 1], text[index + 2]):
                (scalar, width) = (0x2000 | UInt32(text[index + 1] & 0x3F) << 6 | UInt32(text[index + 2] & 0x3F), 3)
            case 0xC2, 0xE2:
                index += 1
                continue
            default:
                (scalar, width) = (UInt32(byte), 1)
            }
            flush(upTo: index)
            appendEscape(scalar)
            index += width
            clean = index
        }
        if unlessClean && clean == 0 { return false }
        flush(upTo: text.count)
        return true
    }

    /// Whether `E2 second third` is U+2028 or U+2029, or one of the bidirectional embeddings,
    /// overrides and isolates (U+202A–U+202E, U+2066–U+2069).
    private static func isEscapedAfterE2(_ second: UInt8, _ third: UInt8) -> Bool {
        switch (second, third) {
        case (0x80, 0xA8...0xAE), (0x81, 0xA6...0xA9): true
        default: false
        }
    }

    /// Whether any of the eight bytes from `index` is below 0x20, a backslash, DEL or not ASCII.
    private static func mayNeedEscaping(word bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> Bool {
        let word = UnsafeRawPointer(bytes.baseAddress! + index).loadUnaligned(as: UInt64.self)
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        func hasZeroByte(_ value: UInt64) -> Bool { (value &- ones) & ~value & high != 0 }
        return word & high != 0  // not ASCII
            || (word &- 0x20 &* ones) & ~word & high != 0  // below 0x20
            || hasZeroByte(word ^ (0x5C &* ones)) || hasZeroByte(word ^ (0x7F &* ones))
    }

    /// `\\`, `\n`, `\r`, `\t`, `\xHH` below U+0080, `\u{H…}` above.
    private mutating func appendEscape(_ scalar: UInt32) {
        bytes.append(UInt8(ascii: "\\"))
        switch scalar {
        case 0x5C: bytes.append(UInt8(ascii: "\\"))
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        case ..<0x80:
            bytes.append(UInt8(ascii: "x"))
            appendHex(scalar, minimumDigits: 2)
        default:
            bytes.append(contentsOf: "u{".utf8)
            appendHex(scalar, minimumDigits: 1)
            bytes.append(UInt8(ascii: "}"))
        }
    }

    private mutating func appendHex(_ value: UInt32, minimumDigits: Int) {
        var shift: UInt32 = 28
        while shift >= 4 * UInt32(minimumDigits) && value >> shift == 0 { shift -= 4 }
        while true {
            let digit = UInt8(truncatingIfNeeded: value >> shift) & 0xF
            bytes.append(digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "A") + digit - 10)
            if shift == 0 { return }
            shift -= 4
        }
    }

    /// Appends `value` in decimal with at least `width` digits.
    private mutating func appendDecimal(_ value: Int, width: Int) {
        let start = bytes.count
        var rest = value < 0 ? 0 : value
        repeat {
            bytes.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        } while rest > 0 || bytes.count - start < width
        bytes[start...].reverse()
    }

    /// `2026-11-21 19:45:30.123`, local time, now.
    mutating func appendLocalTime() {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        localtime_r(&seconds, &parts)
        appendDecimal(Int(parts.tm_year) + 1900, width: 4)
        bytes.append(UInt8(ascii: "-"))
        appendDecimal(Int(parts.tm_mon) + 1, width: 2)
        bytes.append(UInt8(ascii: "-"))
        appendDecimal(Int(parts.tm_mday), width: 2)
        bytes.append(UInt8(ascii: " "))
        appendDecimal(Int(parts.tm_hour), width: 2)
        bytes.append(UInt8(ascii: ":"))
        appendDecimal(Int(parts.tm_min), width: 2)
        bytes.append(UInt8(ascii: ":"))
        appendDecimal(Int(parts.tm_sec), width: 2)
        bytes.append(UInt8(ascii: "."))
        appendDecimal(now.tv_nsec / 1_000_000, width: 3)
    }

    private static func color(_ level: Logger.Level) -> String {
        switch level {
        case .trace, .debug: "\u{1B}[2m"
        case .info: "\u{1B}[32m"
        case .notice: "\u{1B}[36m"
        case .warning: "\u{1B}[33m"
        case .error: "\u{1B}[31m"
        case .critical: "\u{1B}[1;31m"
        }
    }
}

/// Standard error as the log handlers write it, without blocking the daemon's thread.
///
/// A pipe, a FIFO, a socket or a terminal blocks a write once it is full: a reader that stopped
/// reading, a log pipe that stalled, a terminal paused with Ctrl-S or whose ssh session hangs.
/// A blocking write there held the event loop, and with it every answer: a reload and a stop
/// waited for the reader (a helper's attack). So lines to one of those go through a descriptor
/// that never blocks: for a pipe, FIFO or terminal a description of our own, opened anew through
/// `/proc/self/fd/2` with `O_NONBLOCK` (setting it on descriptor 2 itself would change it for
/// every process that shares it, a shell among them); for a socket, `send` with `MSG_DONTWAIT`.
/// A line it cannot take now is dropped and counted (``DroppingLineWriter``). A regular file or
/// `/dev/null` never fills: written to descriptor 2 as before (a hung file system aside). What
/// descriptor 2 is, is read at the first line: a daemon that points it elsewhere later keeps
/// writing where it pointed then, when that was a pipe, FIFO, socket or terminal.
package enum StandardError {
    private struct State {
        /// Where lines go and how; `nil` until the first line.
        var target: DroppingLineWriter.Target?
        var writer = DroppingLineWriter()
    }

    private static let state = Mutex(State())
    /// Descriptor 2 once it was found to be a regular file or `/dev/null` (written whole,
    /// blocking): lines then go straight to it, without the lock. -1 until then, or when lines
    /// go through ``DroppingLineWriter``.
    private static let blocking = Atomic<Int32>(-1)

    /// The warning that follows lines dropped.
    package static func droppedNotice(_ count: Int) -> String {
        "\(count) log line\(count == 1 ? " was" : "s were") dropped: standard error could not take "
            + "\(count == 1 ? "it" : "them") (its reader stopped reading, or the terminal is paused)"
    }

    /// Writes `bytes` (whole lines); when lines were dropped before, first the line `notice`
    /// makes from their count.
    package static func write(_ bytes: [UInt8], notice: (Int) -> [UInt8]) {
        let descriptor = blocking.load(ordering: .relaxed)
        if descriptor >= 0 {
            _ = bytes.withUnsafeBytes { SystemCall.writeAll($0, to: descriptor) }
            return
        }
        state.withLock { state in
            let target = state.target ?? resolve(&state)
            if case .blocking(let descriptor) = target {
                _ = bytes.withUnsafeBytes { SystemCall.writeAll($0, to: descriptor) }
            } else {
                state.writer.write(bytes, to: target, notice: notice)
            }
        }
    }

    /// Decides where lines go, once.
    private static func resolve(_ state: inout State) -> DroppingLineWriter.Target {
        var info = stat()
        var target = DroppingLineWriter.Target.blocking(2)
        if fstat(2, &info) == 0 {
            switch info.st_mode & S_IFMT {
            case S_IFSOCK: target = .socket(2)
            case S_IFIFO,
                S_IFCHR where info.st_mode & S_IFMT == S_IFIFO || isatty(2) == 1:
                let own = SystemCall.open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
                var opened = stat()
                // The same pipe or terminal, or nothing: else lines go to descriptor 2 as before.
                if own >= 0, fstat(own, &opened) == 0, opened.st_dev == info.st_dev, opened.st_ino == info.st_ino,
                    opened.st_rdev == info.st_rdev
                {
                    target = .nonBlocking(own)
                } else if own >= 0 {
                    SystemCall.close(own)
                }
            default: break
            }
        }
        state.target = target
        if case .blocking(let descriptor) = target { blocking.store(descriptor, ordering: .relaxed) }
        return target
    }
}

/// Lines to a descriptor that never blocks: what it cannot take now is dropped and counted, and
/// the next line that goes through follows a notice of the count, written on its own. A line is
/// cut to 4 KiB (`PIPE_BUF`, what a pipe takes whole or not at all) with a mark of what was cut;
/// a line cut short by a partial write (a terminal, a socket) counts as dropped, and the next
/// write ends it with a line break first, so lines stay lines.
package struct DroppingLineWriter: Sendable {
    /// Where lines go.
    package enum Target: Sendable, Equatable {
        /// A regular file or `/dev/null`: written whole, blocking.
        case blocking(Int32)
        /// A non-blocking descriptor of our own.
        case nonBlocking(Int32)
        /// A socket: `send` with `MSG_DONTWAIT`.
        case socket(Int32)
    }

    /// The longest line written: `PIPE_BUF`.
    package static let maximumLineBytes = 4096

    /// Lines dropped since the last notice that went out.
    package private(set) var dropped = 0
    /// A line was cut after part of it went out.
    private var brokenLine = false

    package init() {}

    /// Writes `bytes` (whole lines) to `target`, after the line `notice` makes from the count of
    /// lines dropped before, if any.
    package mutating func write(_ bytes: [UInt8], to target: Target, notice: (Int) -> [UInt8]) {
        if brokenLine {
            guard send([UInt8(ascii: "\n")], to: target) == 1 else {
                dropped += Self.lines(in: bytes)
                return
            }
            brokenLine = false
        }
        if dropped > 0 {
            let line = Self.capped(notice(dropped))
            let sent = send(line, to: target)
            guard sent == line.count else {
                brokenLine = sent > 0
                dropped += Self.lines(in: bytes)
                return
            }
            dropped = 0
        }
        var start = 0
        while start < bytes.count {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? bytes.count
            let line = Self.capped(Array(bytes[start..<end]))
            let sent = send(line, to: target)
            if sent != line.count {
                brokenLine = sent > 0
                dropped += Self.lines(in: bytes[start...])
                return
            }
            start = end
        }
    }

    /// Sends `bytes` in as many calls as the target takes now; how many went out.
    private func send(_ bytes: [UInt8], to target: Target) -> Int {
        bytes.withUnsafeBytes { buffer -> Int in
            var offset = 0
            while offset < buffer.count {
                let rest = UnsafeRawBufferPointer(rebasing: buffer[offset...])
                let count: Int
                switch target {
                case .blocking(let descriptor), .nonBlocking(let descriptor):
                    count = SystemCall.write(rest, to: descriptor)
                case .socket(let descriptor):
                    count = SystemCall.send(rest, on: descriptor, flags: Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL))
                }
                if count <= 0 { break }
                offset += count
            }
            return offset
        }
    }

    /// `line` cut to ``maximumLineBytes`` on a character boundary, with a mark of what was cut.
    static func capped(_ line: [UInt8]) -> [UInt8] {
        guard line.count > maximumLineBytes else { return line }
        let mark = Array(" … [\(line.count - maximumLineBytes + 64) bytes cut]\n".utf8)
        var end = maximumLineBytes - 64
        while end > 0 && line[end] & 0xC0 == 0x80 { end -= 1 }
        return Array(line[..<end]) + mark
    }

    private static func lines(in bytes: some Collection<UInt8>) -> Int {
        max(1, bytes.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) })
    }
}

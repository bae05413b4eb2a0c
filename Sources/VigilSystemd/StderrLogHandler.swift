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
/// reading, a log pipe that stalled, a terminal paused with Ctrl-S. A blocking write there held
/// the event loop, and with it every answer: a reload and a stop waited for the reader (a
/// helper's attack). So to one of those a line is written only when `poll` says descriptor 2
/// takes it now (a pipe has room for 4 KiB at least then: a longer line may still wait for
/// the rest); else it is dropped and counted, and the next line that goes through follows a
/// warning with the count (``DroppingLineWriter``). Descriptor 2 itself is written, as it is at
/// each line (a daemon may point it elsewhere), and never made non-blocking, which would change
/// it for every process that shares it, a shell among them. A regular file or `/dev/null` never
/// fills: written without the check (a hung file system aside). What kind descriptor 2 is, is
/// read at the first line.
package enum StandardError {
    private struct State {
        /// Whether descriptor 2 can fill (a pipe, FIFO, socket or terminal); `nil` until the
        /// first line.
        var canFill: Bool?
        var writer = DroppingLineWriter()
    }

    private static let state = Mutex(State())

    /// The warning that follows lines dropped.
    package static func droppedNotice(_ count: Int) -> String {
        "\(count) log line\(count == 1 ? " was" : "s were") dropped: standard error could not take "
            + "\(count == 1 ? "it" : "them") (its reader stopped reading, or the terminal is paused)"
    }

    /// Writes `bytes` (whole lines); when lines were dropped before, first the line `notice`
    /// makes from their count.
    package static func write(_ bytes: [UInt8], notice: (Int) -> [UInt8]) {
        state.withLock { state in
            let canFill = state.canFill ?? resolve(&state)
            state.writer.write(bytes, to: 2, checkingFirst: canFill, notice: notice)
        }
    }

    /// Whether descriptor 2 is one that can fill: a pipe, a FIFO, a socket or a terminal.
    private static func resolve(_ state: inout State) -> Bool {
        var info = stat()
        let canFill: Bool
        if fstat(2, &info) != 0 {
            canFill = false
        } else {
            switch info.st_mode & S_IFMT {
            case S_IFIFO, S_IFSOCK: canFill = true
            case S_IFCHR: canFill = isatty(2) == 1
            default: canFill = false
            }
        }
        state.canFill = canFill
        return canFill
    }
}

/// Lines to a descriptor that can fill: written only when `poll` says it takes them now, else
/// dropped and counted, and the next write that goes through begins with a notice of the count.
package struct DroppingLineWriter: Sendable {
    /// Lines dropped since the last write that went through.
    package private(set) var dropped = 0

    package init() {}

    /// Writes `bytes` (whole lines) to `descriptor` after the line `notice` makes from the count
    /// of lines dropped before, if any; with `checkingFirst`, only when `poll` says it is
    /// writable now (an error or a hang-up lets the write say what it is).
    package mutating func write(
        _ bytes: [UInt8],
        to descriptor: Int32,
        checkingFirst: Bool,
        notice: (Int) -> [UInt8]
    ) {
        if checkingFirst {
            var entry = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
            if SystemCall.poll(&entry, 1, timeout: 0) == 0 {
                dropped += bytes.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
                return
            }
        }
        // Most writes have nothing before them: the line goes as it is, without a copy.
        let out = dropped > 0 ? notice(dropped) + bytes : bytes
        dropped = 0
        _ = out.withUnsafeBytes { SystemCall.writeAll($0, to: descriptor) }
    }
}

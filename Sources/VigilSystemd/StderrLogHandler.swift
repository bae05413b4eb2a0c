import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A swift-log handler that writes one line per entry to stderr, in one of two formats.
///
/// - ``Format/syslogPrefixed``: under a service manager whose stderr is not the journal, the
///   sd-daemon(3) form `<6>message key=value`; journald or syslog reads the priority from the
///   prefix. Control characters in the message and metadata are escaped (``escaped(_:)``), so
///   an entry stays one line and cannot forge another priority.
/// - ``Format/terminal(colors:)``: for a person: `2026-11-21 19:45:30.123 info vigild: message
///   key=value`, the level coloured when `colors` is on.
public struct StderrLogHandler: LogHandler {
    /// How lines look.
    public enum Format: Sendable, Hashable {
        /// `<N>` priority prefix, no time (the journal adds it).
        case syslogPrefixed
        /// Local time, level, label, message, metadata; ANSI colours when `colors`.
        case terminal(colors: Bool)
    }

    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    /// The level comes from the shared ``LogLevelControl``.
    public var logLevel: Logger.Level {
        get { levelControl.level }
        set { levelControl.level = newValue }
    }

    private let label: String
    private let format: Format
    private let levelControl: LogLevelControl

    /// Creates a handler writing `format` lines for the logger `label`.
    public init(
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

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let explicit = event.metadata { merged.merge(explicit) { _, new in new } }
        var line = Self.line(
            format: format,
            label: label,
            level: event.level,
            message: "\(event.message)",
            metadata: merged,
            error: event.error,
            time: format == .syslogPrefixed ? "" : Self.localTime()
        )
        line.append("\n")
        Self.writeToStandardError(line)
    }

    /// Writes `line` to stderr in one `write(2)` where possible, so lines from several threads
    /// never interleave. A closed stderr (`EPIPE`; vigild ignores `SIGPIPE`) loses the line.
    static func writeToStandardError(_ line: String) {
        var line = line
        line.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(2, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
        }
    }

    /// `text` with every control character spelled out (`\n`, `\r`, `\t`, `\x1B`, `\u{85}`)
    /// and backslashes doubled, so an entry stays one line and a message cannot forge a
    /// `<0>` prefix, a second line or a terminal escape sequence.
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0 == "\\" || isControl($0) }) else { return text }
        var result = ""
        result.unicodeScalars.reserveCapacity(text.unicodeScalars.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where isControl(scalar):
                let hex = String(scalar.value, radix: 16, uppercase: true)
                result += scalar.value < 0x80 ? "\\x" + (hex.count < 2 ? "0" + hex : hex) : "\\u{\(hex)}"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.generalCategory == .control || scalar.value == 0x2028 || scalar.value == 0x2029
    }

    /// One entry as a line, without the newline (tests call this directly).
    public static func line(
        format: Format,
        label: String,
        level: Logger.Level,
        message: String,
        metadata: Logger.Metadata,
        error: (any Error)? = nil,
        time: String
    ) -> String {
        var fields = metadata.sorted(by: { $0.key < $1.key }).map { "\($0.key)=\($0.value)" }
        if let error { fields.append("error=\(error)") }
        let tail = fields.isEmpty ? "" : escaped(" " + fields.joined(separator: " "))
        switch format {
        case .syslogPrefixed:
            return "<\(level.syslogPriority)>\(escaped(message))\(tail)"
        case .terminal(let colors):
            let name = "\(level)"
            let shown = colors ? Self.color(level) + name + "\u{1B}[0m" : name
            return "\(time) \(shown) \(escaped(label)): \(escaped(message))\(tail)"
        }
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

    /// `2026-11-21 19:45:30.123`, local time.
    static func localTime() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        localtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let millis = now.tv_nsec / 1_000_000
        let millisText = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(millisText)"
    }
}

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
///   prefix. Line breaks inside a message become `\n` so an entry stays one line.
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
        // One write per entry, so lines from several threads never interleave.
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
        let tail = fields.isEmpty ? "" : " " + fields.joined(separator: " ")
        switch format {
        case .syslogPrefixed:
            let escaped = message.replacing("\\", with: "\\\\").replacing("\n", with: "\\n")
            return "<\(level.syslogPriority)>\(escaped)\(tail)"
        case .terminal(let colors):
            let name = "\(level)"
            let shown = colors ? Self.color(level) + name + "\u{1B}[0m" : name
            return "\(time) \(shown) \(label): \(message)\(tail)"
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

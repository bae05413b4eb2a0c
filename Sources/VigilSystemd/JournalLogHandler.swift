import CVigilSystemd
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A swift-log handler that writes native journal entries with `sd_journal_sendv(3)`.
///
/// Each entry carries `MESSAGE` (multi-line messages stay whole), `PRIORITY` (from the level),
/// `SYSLOG_IDENTIFIER`, `CODE_FILE`, `CODE_LINE`, `CODE_FUNC`, `SWIFT_LOG_LABEL` (the logger's
/// label), `SWIFT_LOG_SOURCE` (the module), `SWIFT_LOG_ERROR` when an error is attached, and
/// every metadata value as a field named by ``JournalFieldName``. A metadata key that sanitises
/// to `MESSAGE_ID` sets the entry's `MESSAGE_ID`.
public struct JournalLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    /// The level comes from the shared ``LogLevelControl``; setting it changes every handler
    /// that shares the control.
    public var logLevel: Logger.Level {
        get { levelControl.level }
        set { levelControl.level = newValue }
    }

    private let label: String
    private let identifier: String
    private let levelControl: LogLevelControl

    /// Creates a handler.
    ///
    /// - Parameters:
    ///   - label: the logger's label.
    ///   - identifier: `SYSLOG_IDENTIFIER`, usually the program name (`journalctl -t`).
    ///   - levelControl: the shared, run-time adjustable level.
    public init(
        label: String,
        identifier: String,
        levelControl: LogLevelControl,
        metadataProvider: Logger.MetadataProvider? = nil
    ) {
        self.label = label
        self.identifier = identifier
        self.levelControl = levelControl
        self.metadataProvider = metadataProvider
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let fields = JournalEntry.fields(
            event: event,
            label: label,
            identifier: identifier,
            metadata: mergedMetadata(event.metadata)
        )
        let result = JournalEntry.send(fields)
        if result < 0 {
            // The journal is gone (journald restarting?): fall back to stderr rather than lose it.
            let line = "<\(event.level.syslogPriority)>\(event.message) (journal send failed: errno \(-result))\n"
            _ = line.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
        }
    }

    private func mergedMetadata(_ explicit: Logger.Metadata?) -> Logger.Metadata {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let explicit { merged.merge(explicit) { _, new in new } }
        return merged
    }
}

/// Building and sending one native journal entry.
package enum JournalEntry {
    /// The `NAME=value` fields of one entry, in order.
    package static func fields(
        event: LogEvent,
        label: String,
        identifier: String,
        metadata: Logger.Metadata
    ) -> [String] {
        var fields: [String] = [
            "MESSAGE=\(event.message)",
            "PRIORITY=\(event.level.syslogPriority)",
            "SYSLOG_IDENTIFIER=\(identifier)",
            "CODE_FILE=\(event.file)",
            "CODE_LINE=\(event.line)",
            "CODE_FUNC=\(event.function)",
            "SWIFT_LOG_LABEL=\(label)",
            "SWIFT_LOG_SOURCE=\(event.source)",
        ]
        if let error = event.error { fields.append("SWIFT_LOG_ERROR=\(error)") }
        var used = JournalFieldName.reserved
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            flatten(JournalFieldName.sanitize(key), value, used: &used, into: &fields)
        }
        return fields
    }

    private static func flatten(
        _ name: String,
        _ value: Logger.Metadata.Value,
        used: inout Set<String>,
        into fields: inout [String]
    ) {
        switch value {
        case .dictionary(let dictionary):
            for (key, nested) in dictionary.sorted(by: { $0.key < $1.key }) {
                flatten(JournalFieldName.sanitize(name + "_" + key), nested, used: &used, into: &fields)
            }
        case .array(let array):
            for (index, nested) in array.enumerated() {
                flatten(JournalFieldName.sanitize("\(name)_\(index)"), nested, used: &used, into: &fields)
            }
        case .string(let string):
            fields.append(unique(name, used: &used) + "=" + string)
        case .stringConvertible(let convertible):
            fields.append(unique(name, used: &used) + "=" + convertible.description)
        }
    }

    private static func unique(_ name: String, used: inout Set<String>) -> String {
        if used.insert(name).inserted { return name }
        var suffix = 2
        while true {
            let base = name.count > 61 ? String(name.prefix(61)) : name
            let candidate = "\(base)_\(suffix)"
            if used.insert(candidate).inserted { return candidate }
            suffix += 1
        }
    }

    /// Sends the fields as one entry; returns `sd_journal_sendv`'s result (negative errno on
    /// failure). The corresponding C function is `sd_journal_sendv`.
    static func send(_ fields: [String]) -> Int32 {
        // One contiguous buffer for every field, and one iovec per field pointing into it.
        var buffer: [UInt8] = []
        buffer.reserveCapacity(fields.reduce(0) { $0 + $1.utf8.count })
        var ranges: [(Int, Int)] = []
        ranges.reserveCapacity(fields.count)
        for field in fields {
            let start = buffer.count
            buffer.append(contentsOf: field.utf8)
            ranges.append((start, buffer.count - start))
        }
        return buffer.withUnsafeMutableBytes { bytes in
            var vectors = ranges.map { start, length in
                iovec(iov_base: bytes.baseAddress! + start, iov_len: length)
            }
            return sd_journal_sendv(&vectors, Int32(vectors.count))
        }
    }
}

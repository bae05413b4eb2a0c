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
        var entry = JournalEntry.Buffer()
        JournalEntry.build(
            event: event,
            label: label,
            identifier: identifier,
            metadata: mergedMetadata(event.metadata),
            into: &entry
        )
        let result = entry.send()
        if result < 0 {
            // The journal is gone (journald restarting?): fall back to stderr rather than lose it.
            let line = "<\(event.level.syslogPriority)>\(event.message) (journal send failed: errno \(-result))\n"
            _ = line.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
        }
    }

    private func mergedMetadata(_ explicit: Logger.Metadata?) -> Logger.Metadata {
        // The common case: no handler metadata to merge, so no dictionary copies.
        if metadata.isEmpty, metadataProvider == nil { return explicit ?? [:] }
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let explicit { merged.merge(explicit) { _, new in new } }
        return merged
    }
}

/// Building and sending one native journal entry.
package enum JournalEntry {
    /// One entry's `NAME=value` fields, back to back in one byte buffer: a log call costs a
    /// couple of allocations, not one per field.
    package struct Buffer {
        private(set) var bytes: [UInt8] = []
        private(set) var ends: [Int] = []
        /// Names used by metadata so far (the standard fields are checked separately).
        private var used: [String] = []

        init() {
            bytes.reserveCapacity(512)
            ends.reserveCapacity(16)
        }

        mutating func field(_ name: String, _ value: String) {
            bytes.append(contentsOf: name.utf8)
            bytes.append(UInt8(ascii: "="))
            bytes.append(contentsOf: value.utf8)
            ends.append(bytes.count)
        }

        mutating func field(_ name: String, _ value: UInt) {
            bytes.append(contentsOf: name.utf8)
            bytes.append(UInt8(ascii: "="))
            if value == 0 { bytes.append(UInt8(ascii: "0")) }
            let start = bytes.count
            var rest = value
            while rest > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(rest % 10))
                rest /= 10
            }
            bytes[start...].reverse()
            ends.append(bytes.count)
        }

        /// `name`, or `name_2`, `name_3`… when a field of that name is already there.
        mutating func unique(_ name: String) -> String {
            func taken(_ candidate: String) -> Bool {
                JournalFieldName.reserved.contains(candidate) || used.contains(candidate)
            }
            var candidate = name
            var suffix = 2
            while taken(candidate) {
                let base = name.count > 61 ? String(name.prefix(61)) : name
                candidate = "\(base)_\(suffix)"
                suffix += 1
            }
            used.append(candidate)
            return candidate
        }

        /// The fields as strings (tests).
        var fields: [String] {
            var start = 0
            return ends.map { end in
                defer { start = end }
                return String(decoding: bytes[start..<end], as: UTF8.self)
            }
        }

        /// Sends the entry; returns `sd_journal_sendv`'s result (negative errno on failure).
        /// The corresponding C function is `sd_journal_sendv`.
        func send() -> Int32 {
            bytes.withUnsafeBytes { raw in
                withUnsafeTemporaryAllocation(of: iovec.self, capacity: ends.count) { vectors in
                    var start = 0
                    for (index, end) in ends.enumerated() {
                        vectors[index] = iovec(
                            iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress! + start),
                            iov_len: end - start
                        )
                        start = end
                    }
                    return sd_journal_sendv(vectors.baseAddress, Int32(ends.count))
                }
            }
        }
    }

    /// The `NAME=value` fields of one entry, in order.
    package static func fields(
        event: LogEvent,
        label: String,
        identifier: String,
        metadata: Logger.Metadata
    ) -> [String] {
        var entry = Buffer()
        build(event: event, label: label, identifier: identifier, metadata: metadata, into: &entry)
        return entry.fields
    }

    static func build(
        event: LogEvent,
        label: String,
        identifier: String,
        metadata: Logger.Metadata,
        into entry: inout Buffer
    ) {
        entry.field("MESSAGE", event.message.description)
        entry.field("PRIORITY", UInt(event.level.syslogPriority))
        entry.field("SYSLOG_IDENTIFIER", identifier)
        entry.field("CODE_FILE", event.file)
        entry.field("CODE_LINE", event.line)
        entry.field("CODE_FUNC", event.function)
        entry.field("SWIFT_LOG_LABEL", label)
        entry.field("SWIFT_LOG_SOURCE", event.source)
        if let error = event.error { entry.field("SWIFT_LOG_ERROR", "\(error)") }
        switch metadata.count {
        case 0: break
        case 1: flatten(JournalFieldName.sanitize(metadata.first!.key), metadata.first!.value, into: &entry)
        default:
            for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
                flatten(JournalFieldName.sanitize(key), value, into: &entry)
            }
        }
    }

    private static func flatten(_ name: String, _ value: Logger.Metadata.Value, into entry: inout Buffer) {
        switch value {
        case .dictionary(let dictionary):
            for (key, nested) in dictionary.sorted(by: { $0.key < $1.key }) {
                flatten(JournalFieldName.sanitize(name + "_" + key), nested, into: &entry)
            }
        case .array(let array):
            for (index, nested) in array.enumerated() {
                flatten(JournalFieldName.sanitize("\(name)_\(index)"), nested, into: &entry)
            }
        case .string(let string):
            entry.field(entry.unique(name), string)
        case .stringConvertible(let convertible):
            entry.field(entry.unique(name), convertible.description)
        }
    }
}

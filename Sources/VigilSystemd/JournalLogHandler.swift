import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A swift-log handler that writes native journal entries, never blocking (``JournalSocket``).
///
/// Each entry carries `MESSAGE` (multi-line messages stay whole), `PRIORITY` (from the level),
/// `SYSLOG_IDENTIFIER`, `CODE_FILE`, `CODE_LINE`, `CODE_FUNC`, `SWIFT_LOG_LABEL` (the logger's
/// label), `SWIFT_LOG_SOURCE` (the module), `SWIFT_LOG_ERROR` when an error is attached, and
/// every metadata value as a field named by ``JournalFieldName``. A metadata key that sanitises
/// to `MESSAGE_ID` sets the entry's `MESSAGE_ID`.
///
/// When journald cannot take an entry (frozen, or its queue full) the entry is dropped and
/// counted, and a later entry reports the count (see ``JournalSocket``); logging never stalls
/// the caller. When journald is not there at all, the entry goes to stderr instead.
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
    private let socket: JournalSocket

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
        self.init(
            label: label,
            identifier: identifier,
            levelControl: levelControl,
            metadataProvider: metadataProvider,
            socket: .shared
        )
    }

    /// Creates a handler that writes to `socket` (tests).
    package init(
        label: String,
        identifier: String,
        levelControl: LogLevelControl,
        metadataProvider: Logger.MetadataProvider? = nil,
        socket: JournalSocket
    ) {
        self.label = label
        self.identifier = identifier
        self.levelControl = levelControl
        self.metadataProvider = metadataProvider
        self.socket = socket
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
        let identifier = self.identifier
        let outcome = socket.send(entry.payload) { dropped in
            var report = JournalEntry.Buffer()
            report.field(
                "MESSAGE",
                "\(dropped) journal entries dropped: journald did not take them in time "
                    + "(frozen, or its socket queue was full)"
            )
            report.field("PRIORITY", UInt(Logger.Level.warning.syslogPriority))
            report.field("SYSLOG_IDENTIFIER", identifier)
            report.field("MESSAGE_ID", JournalSocket.droppedEntriesMessageID)
            report.field("VIGIL_DROPPED_ENTRIES", UInt(dropped))
            return report.payload
        }
        if case .failed(let code) = outcome {
            // The journal is gone (journald restarting?): fall back to stderr rather than lose it.
            let line = StderrLogHandler.line(
                format: .syslogPrefixed,
                label: label,
                level: event.level,
                message: "\(event.message) (journal send failed: errno \(code))",
                metadata: [:],
                time: ""
            )
            StderrLogHandler.writeToStandardError(line + "\n")
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

        /// Appends `NAME=value`; a value over ``JournalSocket/maximumValueBytes`` is cut on a
        /// character boundary and says how much was cut.
        mutating func field(_ name: String, _ value: String) {
            bytes.append(contentsOf: name.utf8)
            bytes.append(UInt8(ascii: "="))
            let size = value.utf8.count
            if size <= JournalSocket.maximumValueBytes {
                bytes.append(contentsOf: value.utf8)
            } else {
                var kept = 0
                for scalar in value.unicodeScalars {
                    let width = UTF8.width(scalar)
                    if kept + width > JournalSocket.maximumValueBytes { break }
                    kept += width
                }
                bytes.append(contentsOf: value.utf8.prefix(kept))
                bytes.append(contentsOf: "… [\(size - kept) bytes cut]".utf8)
            }
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

        /// The entry in journald's native protocol: `NAME=value\n` per field, or, for a value
        /// with a line break, `NAME\n`, its length as a little-endian UInt64, the value, `\n`.
        package var payload: [UInt8] {
            var payload: [UInt8] = []
            payload.reserveCapacity(bytes.count + ends.count * 10)
            var start = 0
            for end in ends {
                defer { start = end }
                let field = bytes[start..<end]
                guard let equals = field.firstIndex(of: UInt8(ascii: "=")) else { continue }
                let value = field[(equals + 1)...]
                if value.contains(UInt8(ascii: "\n")) {
                    payload.append(contentsOf: field[..<equals])
                    payload.append(UInt8(ascii: "\n"))
                    withUnsafeBytes(of: UInt64(value.count).littleEndian) { payload.append(contentsOf: $0) }
                    payload.append(contentsOf: value)
                } else {
                    payload.append(contentsOf: field)
                }
                payload.append(UInt8(ascii: "\n"))
            }
            return payload
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

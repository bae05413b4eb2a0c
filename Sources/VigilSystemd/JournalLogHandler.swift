import Logging
import VigilPlatform

/// A swift-log handler that writes native journal entries, never blocking (`JournalSocket`).
///
/// Each entry carries `MESSAGE` (multi-line messages stay whole), `PRIORITY` (from the level),
/// `SYSLOG_IDENTIFIER`, `CODE_FILE`, `CODE_LINE`, `CODE_FUNC`, `SWIFT_LOG_LABEL` (the logger's
/// label), `SWIFT_LOG_SOURCE` (the module), `SWIFT_LOG_ERROR` when an error is attached, and
/// every metadata value as a field named by `JournalFieldName`. A metadata key that sanitises
/// to `MESSAGE_ID` sets the entry's `MESSAGE_ID`.
///
/// When journald cannot take an entry (frozen, or its queue full) the entry is dropped and
/// counted, and a later entry reports the count (see `JournalSocket`); logging never stalls
/// the caller. When journald is not there at all, the entry goes to stderr instead.
package struct JournalLogHandler: LevelControlledLogHandler {
    package var metadata: Logger.Metadata = [:]
    package var metadataProvider: Logger.MetadataProvider?
    package let levelControl: LogLevelControl

    private let label: String
    private let identifier: String
    private let socket: JournalSocket

    /// Creates a handler.
    ///
    /// - Parameters:
    ///   - label: the logger's label.
    ///   - identifier: `SYSLOG_IDENTIFIER`, usually the program name (`journalctl -t`).
    ///   - levelControl: the shared, run-time adjustable level.
    ///   - metadataProvider: metadata added to every entry, as swift-log's handlers take it.
    package init(
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

    package func log(event: LogEvent) {
        var entry = JournalEntry.Buffer()
        JournalEntry.build(
            event: event,
            label: label,
            identifier: identifier,
            metadata: entryMetadata(event),
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
            var line = EscapedLine()
            line.entry(
                format: .syslogPrefixed,
                label: label,
                level: event.level,
                message: "\(event.message) (journal send failed: errno \(code))",
                metadata: [:],
                error: nil,
                time: nil
            )
            line.bytes.append(UInt8(ascii: "\n"))
            StderrLogHandler.writeToStandardError(line.bytes)
        }
    }
}

/// Building and sending one native journal entry.
package enum JournalEntry {
    /// One entry, written straight in journald's native protocol into one byte buffer: `NAME=value\n`
    /// per field, or, for a value with a line break, `NAME\n`, its length as a little-endian UInt64,
    /// the value, `\n`. A log call costs one allocation for the entry, not one per field or name.
    package struct Buffer {
        /// The entry as it goes to journald.
        package private(set) var payload: [UInt8] = []
        /// Where the metadata fields start (names there must be unique; the standard fields
        /// before are checked against ``JournalFieldName/reserved``).
        private var metadataStart = 0
        /// Whether every metadata field so far is named by its key as it is (a key already in
        /// journald's form, neither nested nor renamed): distinct dictionary keys then give
        /// distinct names, and a new name needs checking against the reserved names only.
        private var verbatimSoFar = true
        /// Whether the name written last is its key as it is.
        private var lastNameVerbatim = false

        init() {
            payload.reserveCapacity(512)
        }

        /// Appends `NAME=value`; a value over ``JournalSocket/maximumValueBytes`` is cut on a
        /// character boundary and says how much was cut.
        mutating func field(_ name: StaticString, _ value: String) {
            name.withUTF8Buffer { payload.append(contentsOf: $0) }
            self.value(value)
        }

        mutating func field(_ name: StaticString, _ value: UInt) {
            name.withUTF8Buffer { payload.append(contentsOf: $0) }
            payload.append(UInt8(ascii: "="))
            let start = payload.count
            var rest = value
            repeat {
                payload.append(UInt8(ascii: "0") + UInt8(rest % 10))
                rest /= 10
            } while rest > 0
            payload[start...].reverse()
            payload.append(UInt8(ascii: "\n"))
        }

        /// Appends the value of the field whose name was just written.
        mutating func value(_ value: String) {
            var value = value
            value.withUTF8 { bytes in
                var end = bytes.count
                if end > JournalSocket.maximumValueBytes {
                    // Back to the start of the character that straddles the limit.
                    end = JournalSocket.maximumValueBytes
                    while end > 0 && bytes[end] & 0xC0 == 0x80 { end -= 1 }
                }
                let cut = end < bytes.count ? "… [\(bytes.count - end) bytes cut]" : ""
                let kept = UnsafeBufferPointer(rebasing: bytes[..<end])
                if let base = kept.baseAddress, memchr(base, Int32(UInt8(ascii: "\n")), kept.count) != nil {
                    payload.append(UInt8(ascii: "\n"))
                    withUnsafeBytes(of: UInt64(kept.count + cut.utf8.count).littleEndian) {
                        payload.append(contentsOf: $0)
                    }
                } else {
                    payload.append(UInt8(ascii: "="))
                }
                payload.append(contentsOf: kept)
                payload.append(contentsOf: cut.utf8)
                payload.append(UInt8(ascii: "\n"))
            }
        }

        /// Marks where the metadata fields begin.
        mutating func startMetadata() {
            metadataStart = payload.count
            verbatimSoFar = true
        }

        /// Appends the sanitised name for metadata `key` (`JournalFieldName`), as `PARENT_KEY`
        /// under `parent` (an already sanitised name) when nested; returns where it starts.
        mutating func name(_ key: some StringProtocol, under parent: [UInt8]?) -> Int {
            let start = payload.count
            if let parent {
                payload.append(contentsOf: parent)
                payload.append(UInt8(ascii: "_"))
                JournalFieldName.appendMapped(key, to: &payload)
                if payload.count - start > JournalFieldName.maximumLength {
                    payload.removeLast(payload.count - start - JournalFieldName.maximumLength)
                }
                lastNameVerbatim = false
            } else {
                JournalFieldName.appendSanitized(key, to: &payload)
                lastNameVerbatim = payload[start...].elementsEqual(key.utf8)
            }
            return start
        }

        /// Removes the name from `start` on and returns it: the prefix of nested names.
        mutating func takeName(from start: Int) -> [UInt8] {
            verbatimSoFar = false
            defer { payload.removeLast(payload.count - start) }
            return Array(payload[start...])
        }

        /// Makes the name from `start` unique: `NAME`, or `NAME_2`, `NAME_3`… when a field of
        /// that name is already there or ``JournalFieldName/reserved``.
        mutating func makeUnique(nameFrom start: Int) {
            if verbatimSoFar && lastNameVerbatim {
                guard JournalFieldName.isReserved(payload[start...]) else { return }
            } else if !taken(payload[start...]) {
                verbatimSoFar = false
                return
            }
            verbatimSoFar = false
            let name = Array(payload[start...])
            let base = name.prefix(JournalFieldName.maximumLength - 3)
            var suffix: UInt = 2
            repeat {
                payload.removeLast(payload.count - start)
                payload.append(contentsOf: base)
                payload.append(contentsOf: "_\(suffix)".utf8)
                suffix += 1
            } while taken(payload[start...])
        }

        private func taken(_ name: ArraySlice<UInt8>) -> Bool {
            if JournalFieldName.isReserved(name) { return true }
            var found = false
            Self.forEachField(in: payload[metadataStart..<name.startIndex]) { existing, _ in
                if existing.elementsEqual(name) { found = true }
            }
            return found
        }

        /// Calls `body` with each field's name and value in `payload`.
        static func forEachField(
            in payload: ArraySlice<UInt8>,
            _ body: (ArraySlice<UInt8>, ArraySlice<UInt8>) -> Void
        ) {
            var index = payload.startIndex
            while index < payload.endIndex {
                guard
                    let end = payload[index...].firstIndex(where: {
                        $0 == UInt8(ascii: "=") || $0 == UInt8(ascii: "\n")
                    })
                else { return }
                let name = payload[index..<end]
                if payload[end] == UInt8(ascii: "=") {
                    let stop = payload[(end + 1)...].firstIndex(of: UInt8(ascii: "\n")) ?? payload.endIndex
                    body(name, payload[(end + 1)..<stop])
                    index = stop + 1
                } else {
                    guard end + 9 <= payload.endIndex else { return }
                    var length: UInt64 = 0
                    for byte in payload[(end + 1)..<(end + 9)].reversed() { length = length << 8 | UInt64(byte) }
                    let start = end + 9
                    guard length <= UInt64(payload.endIndex - start) else { return }
                    let stop = start + Int(length)
                    body(name, payload[start..<stop])
                    index = stop + 1
                }
            }
        }

        /// The fields as `NAME=value` strings (tests).
        var fields: [String] {
            var fields: [String] = []
            Self.forEachField(in: payload[...]) { name, value in
                fields.append(String(decoding: name, as: UTF8.self) + "=" + String(decoding: value, as: UTF8.self))
            }
            return fields
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
        entry.startMetadata()
        LogMetadata.forEachSorted(metadata) { key, value in
            flatten(entry.name(key, under: nil), value, into: &entry)
        }
    }

    /// Writes the field(s) for `value`, whose name `entry` holds from `nameStart` on: a leaf
    /// as one field, a dictionary or an array as one field per element, named `NAME_KEY`,
    /// `NAME_0`…
    private static func flatten(_ nameStart: Int, _ value: Logger.Metadata.Value, into entry: inout Buffer) {
        switch value {
        case .string(let string):
            entry.makeUnique(nameFrom: nameStart)
            entry.value(string)
        case .stringConvertible(let convertible):
            entry.makeUnique(nameFrom: nameStart)
            entry.value(convertible.description)
        case .dictionary(let dictionary):
            let parent = entry.takeName(from: nameStart)
            for (key, nested) in dictionary.sorted(by: { $0.key < $1.key }) {
                flatten(entry.name(key, under: parent), nested, into: &entry)
            }
        case .array(let array):
            let parent = entry.takeName(from: nameStart)
            for (index, nested) in array.enumerated() {
                flatten(entry.name(String(index), under: parent), nested, into: &entry)
            }
        }
    }
}

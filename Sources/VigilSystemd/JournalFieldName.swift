/// Turns swift-log metadata keys into journald field names.
///
/// journald silently drops fields whose names are not `[A-Z0-9_]`, start with `_` (reserved for
/// trusted fields) or a digit, or exceed 64 characters. The mapping:
/// 1. ASCII letters are upper-cased; digits and `_` stay; every other character becomes `_`
///    (`sl-service` → `SL_SERVICE`, `http.status` → `HTTP_STATUS`).
/// 2. Leading underscores are dropped; a name that would start with a digit gets `F_` in front;
///    an empty name becomes `FIELD`.
/// 3. Names are cut to 64 characters.
/// 4. Nested metadata is flattened with `_`: `["request": ["id": 7]]` → `REQUEST_ID=7`, and
///    array elements are numbered from 0: `TAGS_0`, `TAGS_1`.
/// 5. A name that collides with a field Vigil writes itself (`MESSAGE`, `PRIORITY`, `CODE_*`,
///    `SYSLOG_IDENTIFIER`, …) or with an earlier metadata field gets `_2`, `_3`, … appended.
package enum JournalFieldName {
    /// Fields the handler writes itself; metadata never overwrites them.
    package static let reserved: Set<String> = [
        "MESSAGE", "PRIORITY", "CODE_FILE", "CODE_LINE", "CODE_FUNC", "SYSLOG_IDENTIFIER",
        "SWIFT_LOG_LABEL", "SWIFT_LOG_SOURCE", "SWIFT_LOG_ERROR",
    ]

    /// The longest name journald keeps.
    static let maximumLength = 64

    private static let reservedBytes = reserved.map { Array($0.utf8) }

    /// Whether `name` is one of the ``reserved`` fields.
    static func isReserved(_ name: ArraySlice<UInt8>) -> Bool {
        // Every reserved name starts with C, M, P or S.
        guard let first = name.first,
            first == UInt8(ascii: "C") || first == UInt8(ascii: "M") || first == UInt8(ascii: "P")
                || first == UInt8(ascii: "S")
        else { return false }
        return reservedBytes.contains { $0.elementsEqual(name) }
    }

    /// Rules 1–3 for one key.
    package static func sanitize(_ key: String) -> String {
        var bytes: [UInt8] = []
        appendSanitized(key, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `key` sanitised by rules 1–3 to `bytes`.
    static func appendSanitized(_ key: some StringProtocol, to bytes: inout [UInt8]) {
        let start = bytes.count
        appendMapped(key, to: &bytes)
        let first = bytes[start...].firstIndex { $0 != UInt8(ascii: "_") } ?? bytes.endIndex
        bytes.removeSubrange(start..<first)
        if bytes.count == start {
            bytes.append(contentsOf: "FIELD".utf8)
        } else if bytes[start] >= UInt8(ascii: "0"), bytes[start] <= UInt8(ascii: "9") {
            bytes.insert(contentsOf: "F_".utf8, at: start)
        }
        if bytes.count - start > maximumLength { bytes.removeLast(bytes.count - start - maximumLength) }
    }

    /// Appends `key` mapped by rule 1: letters upper-cased, digits and `_` kept, one `_` for
    /// any other character.
    static func appendMapped(_ key: some StringProtocol, to bytes: inout [UInt8]) {
        for byte in key.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"): bytes.append(byte - 32)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"):
                bytes.append(byte)
            case 0x80...0xBF:
                continue  // continuation bytes of one non-ASCII character: one `_` is enough
            default: bytes.append(UInt8(ascii: "_"))
            }
        }
    }
}

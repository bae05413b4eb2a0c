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
public enum JournalFieldName {
    /// Fields the handler writes itself; metadata never overwrites them.
    public static let reserved: Set<String> = [
        "MESSAGE", "PRIORITY", "CODE_FILE", "CODE_LINE", "CODE_FUNC", "SYSLOG_IDENTIFIER",
        "SWIFT_LOG_LABEL", "SWIFT_LOG_SOURCE", "SWIFT_LOG_ERROR",
    ]

    /// Rules 1–3 for one key.
    public static func sanitize(_ key: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(key.utf8.count)
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
        while bytes.first == UInt8(ascii: "_") { bytes.removeFirst() }
        if bytes.isEmpty { return "FIELD" }
        if let first = bytes.first, first >= UInt8(ascii: "0"), first <= UInt8(ascii: "9") {
            bytes.insert(contentsOf: Array("F_".utf8), at: 0)
        }
        if bytes.count > 64 { bytes.removeLast(bytes.count - 64) }
        return String(decoding: bytes, as: UTF8.self)
    }
}

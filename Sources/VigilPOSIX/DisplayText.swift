/// Text from a file, the environment or the command line, made safe to echo in a message.
public enum DisplayText {
    /// `value` in double quotes for an error message: control characters escaped (`\n`,
    /// `\u{1b}`), quotes and backslashes escaped, and a value longer than `limit` characters cut
    /// to its first `limit` followed by `… (5000 bytes)`, so a huge value gives a short error.
    public static func quoted(_ value: String, limit: Int = 64) -> String {
        var text = ""
        var characters = 0
        for scalar in value.unicodeScalars {
            if characters == limit {
                return "\"" + text + "\"… (\(value.utf8.count) bytes)"
            }
            characters += 1
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            default: text += escaped(scalar)
            }
        }
        return "\"" + text + "\""
    }

    /// `text` with each control character (C0, DEL, C1, the line and paragraph separators, and
    /// the bidirectional embeddings, overrides and isolates) written as an escape (`\n`, `\t`, `\u{1b}`,
    /// `\u{202e}`), and nothing else changed.
    public static func escapingControlCharacters(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var result = ""
        for scalar in text.unicodeScalars { result += escaped(scalar) }
        return result
    }

    /// Control characters: C0, DEL, C1, and the line and paragraph separators.
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028
            || scalar.value == 0x2029 || isBidirectionalControl(scalar)
    }

    /// Unicode's bidirectional embeddings, overrides and isolates (U+202A–U+202E,
    /// U+2066–U+2069; UAX #9): invisible, and they reorder the text after them on a terminal,
    /// so that `status` output or a log line could show something else than it holds ("Trojan
    /// Source"). The marks (U+200E, U+200F, U+061C) only settle the direction of neutral
    /// characters, and right-to-left text uses them: they stay.
    package static func isBidirectionalControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    private static func escaped(_ scalar: Unicode.Scalar) -> String {
        guard isControl(scalar) else { return String(scalar) }
        switch scalar {
        case "\n": return "\\n"
        case "\r": return "\\r"
        case "\t": return "\\t"
        default: return "\\u{" + String(scalar.value, radix: 16) + "}"
        }
    }
}

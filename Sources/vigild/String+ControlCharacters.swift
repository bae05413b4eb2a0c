extension String {
    /// The string with every control character (C0, DEL and C1) written as an escape: `\n`,
    /// `\r`, `\t`, else `\u{1b}`-style. For anything the clients echo from a file or the
    /// environment: a newline in a rejection reason must not become a second line (under
    /// systemd, a second journal entry whose `<0>` prefix sets its priority), and an ESC must
    /// not drive the terminal.
    var escapingControlCharacters: String {
        guard unicodeScalars.contains(where: \.isControlCharacter) else { return self }
        var escaped = ""
        escaped.reserveCapacity(utf8.count + 8)
        for scalar in unicodeScalars {
            guard scalar.isControlCharacter else {
                escaped.unicodeScalars.append(scalar)
                continue
            }
            switch scalar {
            case "\n": escaped += "\\n"
            case "\r": escaped += "\\r"
            case "\t": escaped += "\\t"
            default: escaped += "\\u{" + String(scalar.value, radix: 16) + "}"
            }
        }
        return escaped
    }
}

extension Unicode.Scalar {
    /// C0 (U+0000–U+001F), DEL (U+007F) or C1 (U+0080–U+009F).
    fileprivate var isControlCharacter: Bool { value < 0x20 || (0x7f...0x9f).contains(value) }
}

/// Parses JSON with the two extensions admins expect in a configuration file: comments
/// (`// …` and `/* … */`) and trailing commas. Every value keeps its line and column.
///
/// Hostile input is a ``SyntaxError`` with a line and column, never a trap or a hang: parsing is
/// linear in the input, nesting deeper than ``maximumDepth`` is refused before it can exhaust
/// the stack, strings must be well-formed UTF-8, `\u` escapes must form whole Unicode scalars
/// (a surrogate pair or none), and numbers are kept as their text so that no conversion happens
/// here (``JSONValueDecoder`` range-checks them for the type that asks).
package struct JSONParser {
    /// Why the text is not valid, and where.
    package struct SyntaxError: Error, Hashable, Sendable, CustomStringConvertible {
        package var message: String
        package var position: JSONValue.Position

        package init(message: String, position: JSONValue.Position) {
            self.message = message
            self.position = position
        }

        /// `line 1, column 14: …`, for logs.
        package var description: String { "line \(position.line), column \(position.column): \(message)" }
    }

    /// How many arrays and objects may enclose a value. Deeper input is a syntax error (each
    /// level is a recursive call, so an unlimited depth would let `[[[[…` overflow the stack).
    package static let maximumDepth = 256

    /// Which strings must keep to ``maximumCombiningRun``.
    package enum StreamSafety: Sendable {
        /// Keys only: a state file keeps any text in its values.
        case keys
        /// Keys and values: a configuration, whose values a `validate()` compares.
        case keysAndValues
    }

    private let bytes: [UInt8]
    private let streamSafety: StreamSafety
    private var index = 0
    private var line = 1
    private var lineStart = 0
    /// The 1-based column of `columnIndex`, a byte offset on the current line. Positions are
    /// asked for in increasing order, so counting on from the last one keeps parsing linear;
    /// counting from the line's start every time made a long line quadratic (issue 10, item 7).
    private var columnIndex = 0
    private var column = 1

    private init(_ bytes: [UInt8], streamSafety: StreamSafety) {
        self.bytes = bytes
        self.streamSafety = streamSafety
    }

    /// Parses one complete document. Keys, and values too with `.keysAndValues`, must keep to
    /// ``maximumCombiningRun``.
    package static func parse(
        _ bytes: [UInt8],
        streamSafety: StreamSafety = .keys
    ) throws(SyntaxError) -> JSONValue {
        var parser = JSONParser(bytes, streamSafety: streamSafety)
        // A UTF-8 byte order mark is tolerated.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { parser.index = 3; parser.lineStart = 3 }
        try parser.skipTrivia()
        guard parser.index < bytes.count else {
            throw parser.fail("the file is empty (only white space or comments)")
        }
        let value = try parser.parseValue(depth: 0)
        try parser.skipTrivia()
        if parser.index < bytes.count {
            throw parser.fail("unexpected \(parser.describeCurrent()) after the end of the document")
        }
        return value
    }

    /// The line and column of `index`. Columns count characters, not bytes.
    private mutating func position() -> JSONValue.Position {
        if columnIndex < lineStart || columnIndex > index {
            columnIndex = lineStart
            column = 1
        }
        while columnIndex < index {
            // UTF-8 continuation bytes do not start a character.
            if bytes[columnIndex] & 0xC0 != 0x80 { column += 1 }
            columnIndex += 1
        }
        return .init(line: line, column: column)
    }

    private func describeCurrent() -> String {
        guard index < bytes.count else { return "end of file" }
        return Self.describe(bytes[index])
    }

    private static func describe(_ byte: UInt8) -> String {
        if byte >= 0x21 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "character 0x\(hex(byte, digits: 2))"
    }

    private static func hex<I: BinaryInteger>(_ value: I, digits: Int) -> String {
        let text = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }

    private mutating func fail(_ message: String) -> SyntaxError {
        SyntaxError(message: message, position: position())
    }

    private mutating func skipTrivia() throws(SyntaxError) {
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                index += 1
            case UInt8(ascii: "\n"):
                index += 1
                line += 1
                lineStart = index
            case UInt8(ascii: "/") where index + 1 < bytes.count && bytes[index + 1] == UInt8(ascii: "/"):
                while index < bytes.count && bytes[index] != UInt8(ascii: "\n") { index += 1 }
            case UInt8(ascii: "/") where index + 1 < bytes.count && bytes[index + 1] == UInt8(ascii: "*"):
                let start = position()
                index += 2
                while true {
                    guard index + 1 < bytes.count else {
                        throw SyntaxError(message: "a /* comment is never closed with */", position: start)
                    }
                    if bytes[index] == UInt8(ascii: "*") && bytes[index + 1] == UInt8(ascii: "/") {
                        index += 2
                        break
                    }
                    if bytes[index] == UInt8(ascii: "\n") {
                        line += 1
                        lineStart = index + 1
                    }
                    index += 1
                }
            default:
                return
            }
        }
    }

    private mutating func parseValue(depth: Int) throws(SyntaxError) -> JSONValue {
        guard index < bytes.count else { throw fail("expected a value, found the end of the file") }
        let start = position()
        switch bytes[index] {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard depth < Self.maximumDepth else {
                throw fail(
                    "arrays and objects are nested more than \(Self.maximumDepth) levels deep here; "
                        + "flatten the document"
                )
            }
            if bytes[index] == UInt8(ascii: "{") {
                return JSONValue(.object(try parseObject(depth: depth)), position: start)
            }
            return JSONValue(.array(try parseArray(depth: depth)), position: start)
        case UInt8(ascii: "\""): return JSONValue(.string(try parseString()), position: start)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return JSONValue(.number(try parseNumber()), position: start)
        case UInt8(ascii: "t") where literal("true"):
            return JSONValue(.bool(true), position: start)
        case UInt8(ascii: "f") where literal("false"):
            return JSONValue(.bool(false), position: start)
        case UInt8(ascii: "n") where literal("null"):
            return JSONValue(.null, position: start)
        case UInt8(ascii: "'"):
            throw fail("strings must use double quotes (\"), not single quotes")
        default:
            throw fail(
                "expected a value (object, array, string, number, true, false or null), found \(describeCurrent())"
            )
        }
    }

    /// Consumes `word` when the input continues with it.
    private mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count else { return false }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
        index += count
        return true
    }

    private mutating func parseObject(depth: Int) throws(SyntaxError) -> [JSONValue.Member] {
        let open = position()
        index += 1
        var members: [JSONValue.Member] = []
        // The first keys are compared in place (cheaper than hashing for a configuration's few);
        // from the 17th on, through a set: a search of every member made a large object quadratic.
        var keys: Set<String> = []
        while true {
            try skipTrivia()
            guard index < bytes.count else {
                throw SyntaxError(message: "the object opened here is never closed with }", position: open)
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return members
            }
            guard bytes[index] == UInt8(ascii: "\"") else {
                throw fail("expected a key in double quotes or }, found \(describeCurrent())")
            }
            let keyPosition = position()
            let key = try parseString(isKey: true)
            let duplicate: Bool
            if members.count < 16 {
                duplicate = members.contains { $0.key == key }
            } else {
                if keys.isEmpty { keys = Set(members.lazy.map(\.key)) }
                duplicate = !keys.insert(key).inserted
            }
            guard !duplicate else {
                throw SyntaxError(
                    message: "the key \"\(JSONValue.abbreviated(key))\" appears twice in this object",
                    position: keyPosition
                )
            }
            try skipTrivia()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                throw fail("expected ':' after the key \"\(JSONValue.abbreviated(key))\", found \(describeCurrent())")
            }
            index += 1
            try skipTrivia()
            let value = try parseValue(depth: depth + 1)
            members.append(.init(key: key, keyPosition: keyPosition, value: value))
            try skipTrivia()
            guard index < bytes.count else {
                throw SyntaxError(message: "the object opened here is never closed with }", position: open)
            }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] != UInt8(ascii: "}") {
                throw fail(
                    "expected ',' or '}' after the value of \"\(JSONValue.abbreviated(key))\", "
                        + "found \(describeCurrent())"
                )
            }
        }
    }

    private mutating func parseArray(depth: Int) throws(SyntaxError) -> [JSONValue] {
        let open = position()
        index += 1
        var elements: [JSONValue] = []
        while true {
            try skipTrivia()
            guard index < bytes.count else {
                throw SyntaxError(message: "the array opened here is never closed with ]", position: open)
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return elements
            }
            elements.append(try parseValue(depth: depth + 1))
            try skipTrivia()
            guard index < bytes.count else {
                throw SyntaxError(message: "the array opened here is never closed with ]", position: open)
            }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] != UInt8(ascii: "]") {
                throw fail("expected ',' or ']' in the array, found \(describeCurrent())")
            }
        }
    }

    /// A string; a key (`isKey`), and a value when ``streamSafety`` says so, must also keep to
    /// ``maximumCombiningRun``, since keys are compared and hashed, and a configuration's values
    /// compared by its `validate()` (a state file's values are taken as they are, so that it
    /// keeps any text).
    private mutating func parseString(isKey: Bool = false) throws(SyntaxError) -> String {
        let open = position()
        index += 1
        // Most strings are plain ASCII with no escape: taken from the input in one piece.
        let plainStart = index
        while index < bytes.count, bytes[index] >= 0x20, bytes[index] < 0x80, bytes[index] != UInt8(ascii: "\""),
            bytes[index] != UInt8(ascii: "\\")
        {
            index += 1
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
            index += 1
            return String(decoding: bytes[plainStart..<index - 1], as: UTF8.self)
        }
        var result = Array(bytes[plainStart..<index])
        while true {
            guard index < bytes.count else {
                throw SyntaxError(message: "the string starting here is never closed with \"", position: open)
            }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                // Well-formed by construction: every byte copied was validated as UTF-8.
                let text = String(decoding: result, as: UTF8.self)
                guard !(isKey || streamSafety == .keysAndValues) || Self.isStreamSafe(text) else {
                    throw SyntaxError(
                        message: "the \(isKey ? "key" : "string") starting here has more than "
                            + "\(Self.maximumCombiningRun) combining "
                            + "marks in a row (Unicode's stream-safe limit; no text needs more)",
                        position: open
                    )
                }
                return text
            case UInt8(ascii: "\n"):
                throw SyntaxError(
                    message: "the string starting here is never closed with \" on its line",
                    position: open
                )
            case UInt8(ascii: "\\"):
                let escapeStart = index
                index += 1
                guard index < bytes.count else {
                    throw SyntaxError(message: "the string starting here is never closed with \"", position: open)
                }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): result.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): result.append(UInt8(ascii: "\\"))
                case UInt8(ascii: "/"): result.append(UInt8(ascii: "/"))
                case UInt8(ascii: "b"): result.append(8)
                case UInt8(ascii: "f"): result.append(12)
                case UInt8(ascii: "n"): result.append(UInt8(ascii: "\n"))
                case UInt8(ascii: "r"): result.append(UInt8(ascii: "\r"))
                case UInt8(ascii: "t"): result.append(UInt8(ascii: "\t"))
                case UInt8(ascii: "u"):
                    result.append(contentsOf: String(try parseUnicodeEscape(startingAt: escapeStart)).utf8)
                default:
                    index = escapeStart
                    throw fail(
                        "unknown escape sequence: \\ followed by \(Self.describe(escape)); "
                            + "the escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\u followed by four hex digits"
                    )
                }
            case 0..<0x20:
                throw fail(
                    "control character 0x\(Self.hex(byte, digits: 2)) inside a string; "
                        + "write it as \\u00\(Self.hex(byte, digits: 2)) (or \\t, \\n, \\r)"
                )
            case 0x80...:
                guard let length = utf8SequenceLength() else {
                    throw fail(
                        "invalid UTF-8 (byte 0x\(Self.hex(byte, digits: 2))) inside a string; save the file as UTF-8"
                    )
                }
                result.append(contentsOf: bytes[index..<index + length])
                index += length
            default:
                result.append(byte)
                index += 1
            }
        }
    }

    /// Unicode's stream-safe limit (UAX #15): at most 30 non-starters (combining marks) in a row.
    package static let maximumCombiningRun = 30

    /// Whether `text` keeps to ``maximumCombiningRun``. Comparing or hashing a string normalises
    /// it, and a long run of combining marks makes that quadratic: one 64 KiB key of them took
    /// 0.2 s to hash, a 1 MiB one about a minute, on the thread that parses (a reload's).
    package static func isStreamSafe(_ text: String) -> Bool {
        var run = 0
        for scalar in text.unicodeScalars {
            if scalar.value < 0x300 {
                run = 0  // below U+0300 every scalar is a starter
            } else if scalar.properties.canonicalCombiningClass.rawValue != 0 {
                run += 1
                if run > maximumCombiningRun { return false }
            } else {
                run = 0
            }
        }
        return true
    }

    /// The length of the well-formed UTF-8 sequence (Unicode 15, table 3-7) that starts at
    /// `index` with a byte of 0x80 or more, or `nil` when it is not one: a stray continuation
    /// byte, an overlong form, an encoded surrogate, a value over U+10FFFF, or a cut-off sequence.
    private func utf8SequenceLength() -> Int? {
        let length: Int
        var second: ClosedRange<UInt8> = 0x80...0xBF
        switch bytes[index] {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; second = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; second = 0x80...0x9F
        case 0xF0: length = 4; second = 0x90...0xBF
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; second = 0x80...0x8F
        default: return nil
        }
        guard bytes.count - index >= length, second.contains(bytes[index + 1]) else { return nil }
        for offset in 2..<length where bytes[index + offset] & 0xC0 != 0x80 { return nil }
        return length
    }

    /// The scalar of a `\uXXXX` escape (the `\u` is consumed), or of a `\uD83D\uDE00` surrogate
    /// pair. A lone or reversed surrogate is an error: it is no character, and JSON parsers differ
    /// on what to do with one.
    private mutating func parseUnicodeEscape(startingAt start: Int) throws(SyntaxError) -> Unicode.Scalar {
        let first = try parseHex4(escapeStart: start)
        let value: UInt32
        switch first {
        case 0xD800..<0xDC00:
            let lowStart = index
            guard bytes.count - index >= 2, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
            else {
                index = start
                throw fail(
                    "\\u\(Self.hex(first, digits: 4)) is the first half of a UTF-16 surrogate pair "
                        + "and must be followed by the second half (\\uDC00 to \\uDFFF)"
                )
            }
            index += 2
            let low = try parseHex4(escapeStart: lowStart)
            guard (0xDC00..<0xE000).contains(low) else {
                index = start
                throw fail(
                    "\\u\(Self.hex(first, digits: 4)) is the first half of a UTF-16 surrogate pair "
                        + "and must be followed by the second half (\\uDC00 to \\uDFFF), not \\u\(Self.hex(low, digits: 4))"
                )
            }
            value = 0x10000 + ((first - 0xD800) << 10) + (low - 0xDC00)
        case 0xDC00..<0xE000:
            index = start
            throw fail(
                "\\u\(Self.hex(first, digits: 4)) is the second half of a UTF-16 surrogate pair "
                    + "without a first half (\\uD800 to \\uDBFF) before it"
            )
        default:
            value = first
        }
        guard let scalar = Unicode.Scalar(value) else {
            // Unreachable: surrogates were handled above and a pair is at most U+10FFFF.
            index = start
            throw fail("\\u escape of U+\(Self.hex(value, digits: 4)) is not a Unicode scalar")
        }
        return scalar
    }

    /// Four hexadecimal digits (exactly: no sign, no fewer).
    private mutating func parseHex4(escapeStart: Int) throws(SyntaxError) -> UInt32 {
        var value: UInt32 = 0
        for offset in 0..<4 {
            let digit: UInt8? =
                if index + offset < bytes.count {
                    switch bytes[index + offset] {
                    case UInt8(ascii: "0")...UInt8(ascii: "9"): bytes[index + offset] - UInt8(ascii: "0")
                    case UInt8(ascii: "a")...UInt8(ascii: "f"): bytes[index + offset] - UInt8(ascii: "a") + 10
                    case UInt8(ascii: "A")...UInt8(ascii: "F"): bytes[index + offset] - UInt8(ascii: "A") + 10
                    default: nil
                    }
                } else {
                    nil
                }
            guard let digit else {
                index = escapeStart
                throw fail("\\u must be followed by four hexadecimal digits")
            }
            value = value << 4 | UInt32(digit)
        }
        index += 4
        return value
    }

    /// A number's text, checked against JSON's grammar but not converted: its size is not
    /// limited here, the type that decodes it decides (see ``JSONValueDecoder``).
    private mutating func parseNumber() throws(SyntaxError) -> String {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        func digits() -> Int {
            let from = index
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                index += 1
            }
            return index - from
        }
        let integerStart = index
        let integerDigits = digits()
        guard integerDigits > 0 else { throw fail("a number needs digits after '-'") }
        if integerDigits > 1 && bytes[integerStart] == UInt8(ascii: "0") {
            index = integerStart
            throw fail("a number must not start with 0 followed by more digits (leading zeros are not JSON)")
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw fail("a number needs digits after the decimal point") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard digits() > 0 else { throw fail("a number needs digits in its exponent") }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }
}

/// Parses JSON with the two extensions admins expect in a configuration file: comments
/// (`// …` and `/* … */`) and trailing commas. Every value keeps its line and column.
package struct JSONParser {
    /// Why the text is not valid, and where.
    package struct SyntaxError: Error, Hashable, Sendable {
        package var message: String
        package var position: JSONValue.Position
    }

    private let bytes: [UInt8]
    private var index = 0
    private var line = 1
    private var lineStart = 0

    private init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Parses one complete document.
    package static func parse(_ bytes: [UInt8]) throws(SyntaxError) -> JSONValue {
        var parser = JSONParser(bytes)
        // A UTF-8 byte order mark is tolerated.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { parser.index = 3; parser.lineStart = 3 }
        try parser.skipTrivia()
        guard parser.index < bytes.count else {
            throw SyntaxError(message: "the file is empty (only white space or comments)", position: parser.position)
        }
        let value = try parser.parseValue(depth: 0)
        try parser.skipTrivia()
        if parser.index < bytes.count {
            throw SyntaxError(
                message: "unexpected \(parser.describeCurrent()) after the end of the document",
                position: parser.position
            )
        }
        return value
    }

    private var position: JSONValue.Position {
        // Columns count characters, not bytes: skip UTF-8 continuation bytes.
        var column = 1
        var cursor = lineStart
        while cursor < index {
            if bytes[cursor] & 0xC0 != 0x80 { column += 1 }
            cursor += 1
        }
        return .init(line: line, column: column)
    }

    private func describeCurrent() -> String {
        guard index < bytes.count else { return "end of file" }
        let byte = bytes[index]
        if byte >= 0x21 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "character 0x\(String(byte, radix: 16))"
    }

    private func fail(_ message: String) -> SyntaxError {
        SyntaxError(message: message, position: position)
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
                let start = position
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
        guard depth < 256 else { throw fail("values are nested more than 256 levels deep") }
        guard index < bytes.count else { throw fail("expected a value, found the end of the file") }
        let start = position
        switch bytes[index] {
        case UInt8(ascii: "{"): return JSONValue(.object(try parseObject(depth: depth)), position: start)
        case UInt8(ascii: "["): return JSONValue(.array(try parseArray(depth: depth)), position: start)
        case UInt8(ascii: "\""): return JSONValue(.string(try parseString()), position: start)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return JSONValue(.number(try parseNumber()), position: start)
        default:
            for (word, kind) in [("true", JSONValue.Kind.bool(true)), ("false", .bool(false)), ("null", .null)]
            where bytes[index...].starts(with: word.utf8) {
                index += word.utf8.count
                return JSONValue(kind, position: start)
            }
            if bytes[index] == UInt8(ascii: "'") {
                throw fail("strings must use double quotes (\"), not single quotes")
            }
            throw fail(
                "expected a value (object, array, string, number, true, false or null), found \(describeCurrent())"
            )
        }
    }

    private mutating func parseObject(depth: Int) throws(SyntaxError) -> [JSONValue.Member] {
        let open = position
        index += 1
        var members: [JSONValue.Member] = []
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
            let keyPosition = position
            let key = try parseString()
            try skipTrivia()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
                throw fail("expected ':' after the key \"\(key)\", found \(describeCurrent())")
            }
            index += 1
            try skipTrivia()
            let value = try parseValue(depth: depth + 1)
            if members.contains(where: { $0.key == key }) {
                throw SyntaxError(message: "the key \"\(key)\" appears twice in this object", position: keyPosition)
            }
            members.append(.init(key: key, keyPosition: keyPosition, value: value))
            try skipTrivia()
            guard index < bytes.count else {
                throw SyntaxError(message: "the object opened here is never closed with }", position: open)
            }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] != UInt8(ascii: "}") {
                throw fail("expected ',' or '}' after the value of \"\(key)\", found \(describeCurrent())")
            }
        }
    }

    private mutating func parseArray(depth: Int) throws(SyntaxError) -> [JSONValue] {
        let open = position
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

    private mutating func parseString() throws(SyntaxError) -> String {
        let open = position
        index += 1
        var result: [UInt8] = []
        while true {
            guard index < bytes.count else {
                throw SyntaxError(message: "the string starting here is never closed with \"", position: open)
            }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return String(decoding: result, as: UTF8.self)
            case UInt8(ascii: "\n"):
                throw SyntaxError(
                    message: "the string starting here is never closed with \" on its line",
                    position: open
                )
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { continue }
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
                    var scalar = try parseHex4()
                    if (0xD800..<0xDC00).contains(scalar), bytes[index...].starts(with: Array("\\u".utf8)) {
                        index += 2
                        let low = try parseHex4()
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    let character = Unicode.Scalar(scalar) ?? "\u{FFFD}"
                    result.append(contentsOf: Array(String(character).utf8))
                default:
                    index -= 1
                    throw fail("unknown escape sequence \\\(Character(Unicode.Scalar(escape)))")
                }
            case 0..<0x20:
                throw fail("control characters must be escaped inside strings")
            default:
                result.append(byte)
                index += 1
            }
        }
    }

    private mutating func parseHex4() throws(SyntaxError) -> UInt32 {
        guard index + 4 <= bytes.count,
            let value = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16)
        else { throw fail("\\u must be followed by four hexadecimal digits") }
        index += 4
        return value
    }

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
        guard digits() > 0 else { throw fail("a number needs digits after '-'") }
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

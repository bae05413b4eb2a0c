/// A parsed JSON value with where it stood in its file.
///
/// Vigil parses configuration and state itself instead of using Foundation's `JSONDecoder`, so
/// that errors can name the line and column of any key, unknown keys can be detected, and the
/// binary stays free of Foundation.
package struct JSONValue: Sendable, Hashable {
    /// The value itself.
    package enum Kind: Sendable, Hashable {
        case object([Member])
        case array([JSONValue])
        case string(String)
        /// The number's text as written, so integers stay exact.
        case number(String)
        case bool(Bool)
        case null
    }

    /// One `"key": value` pair of an object, in file order.
    package struct Member: Sendable, Hashable {
        package var key: String
        package var keyPosition: Position
        package var value: JSONValue

        package init(key: String, keyPosition: Position = .none, value: JSONValue) {
            self.key = key
            self.keyPosition = keyPosition
            self.value = value
        }
    }

    /// A 1-based line and column; zero when the value was not parsed from text.
    ///
    /// Stored in 32 bits each (a file the parser takes is at most 16 MiB, so neither comes near
    /// 2^32): every value and key of a parsed file carries one, and a state file of small
    /// values is mostly values, each 32 bytes where two `Int`s made it 40.
    package struct Position: Sendable, Hashable {
        private var storedLine: UInt32
        private var storedColumn: UInt32
        package static let none = Position(line: 0, column: 0)

        package var line: Int {
            get { Int(storedLine) }
            set { storedLine = Self.clamped(newValue) }
        }

        package var column: Int {
            get { Int(storedColumn) }
            set { storedColumn = Self.clamped(newValue) }
        }

        package init(line: Int, column: Int) {
            storedLine = Self.clamped(line)
            storedColumn = Self.clamped(column)
        }

        private static func clamped(_ value: Int) -> UInt32 { UInt32(clamping: value) }
    }

    package var kind: Kind
    package var position: Position

    package init(_ kind: Kind, position: Position = .none) {
        self.kind = kind
        self.position = position
    }

    /// What this is, for error messages: "an object", "the string \"x\"", "the number 5", …
    package var summary: String {
        switch kind {
        case .object: "an object"
        case .array: "an array"
        case .string(let text): "the string \"\(Self.abbreviated(text))\""
        case .number(let text): "the number \(Self.abbreviated(text))"
        case .bool(let value): "\(value)"
        case .null: "null"
        }
    }

    /// `text` cut to its first 40 characters (with "…"), for echoing file contents in messages.
    package static func abbreviated(_ text: String) -> String {
        let scalars = text.unicodeScalars
        guard let cut = scalars.index(scalars.startIndex, offsetBy: 40, limitedBy: scalars.endIndex),
            cut != scalars.endIndex
        else { return text }
        return String(scalars[..<cut]) + "…"
    }

    /// The member named `key`, if this is an object that has it.
    package subscript(key: String) -> JSONValue? {
        guard case .object(let members) = kind else { return nil }
        return members.last { $0.key == key }?.value
    }
}

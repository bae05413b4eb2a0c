import VigilPOSIX

/// Encodes an `Encodable` value into a ``JSONValue`` (for the state file), keeping object keys
/// in the order the type encoded them.
package enum JSONValueEncoder {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    package static func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        let root = Node()
        try value.encode(to: ValueEncoder(node: root, path: []))
        return try root.value()
    }

    /// A value under construction.
    final class Node {
        enum Content {
            case empty
            case object([(String, Node)])
            case array([Node])
            case value(JSONValue.Kind)
        }
        var content = Content.empty
        /// Where each key is in the members, once an object has more than
        /// ``linearSearchLimit`` of them (a dictionary with many entries, say): looking keys up
        /// by comparison would make encoding it quadratic.
        private var memberIndex: [String: Int] = [:]
        private static let linearSearchLimit = 16

        func value() throws -> JSONValue {
            switch content {
            case .empty: return JSONValue(.object([]))
            case .object(let members):
                return JSONValue(
                    .object(
                        try members.map { key, node in
                            // The parser refuses such a key (comparing or hashing it is quadratic),
                            // so a file holding one could not be read back.
                            guard JSONParser.isStreamSafe(key) else {
                                throw Failure(
                                    description: "cannot store the key \(DisplayText.quoted(key, limit: 16)): "
                                        + "it has more than \(JSONParser.maximumCombiningRun) combining marks in a "
                                        + "row (Unicode's stream-safe limit), which a JSON file of Vigil's may not hold"
                                )
                            }
                            return .init(key: key, value: try node.value())
                        }
                    )
                )
            case .array(let elements): return JSONValue(.array(try elements.map { try $0.value() }))
            case .value(let kind): return JSONValue(kind)
            }
        }

        func member(_ key: String) -> Node {
            var members: [(String, Node)] = []
            if case .object(let existing) = content {
                members = existing
            } else {
                memberIndex = [:]  // an encode(to:) that left the object and came back starts anew
            }
            // Leaves `members` the only reference, so appending to it copies nothing.
            content = .empty
            defer { content = .object(members) }
            if members.count <= Self.linearSearchLimit {
                if let found = members.first(where: { $0.0 == key }) { return found.1 }
            } else {
                // Keys are unique in `members`: the index holds the first `memberIndex.count`.
                for position in memberIndex.count..<members.count { memberIndex[members[position].0] = position }
                if let position = memberIndex[key] { return members[position].1 }
            }
            let node = Node()
            members.append((key, node))
            return node
        }

        func appendElement() -> Node {
            var elements: [Node] = []
            if case .array(let existing) = content { elements = existing }
            content = .empty  // as in member(_:): no copy per element
            let node = Node()
            elements.append(node)
            content = .array(elements)
            return node
        }
    }

    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { self.stringValue = "\(intValue)" }
    }

    /// An array element's place in a coding path (spelled only if the path is made).
    struct Index: CodingKey {
        let index: Int
        var stringValue: String { "\(index)" }
        var intValue: Int? { index }
        init(_ index: Int) { self.index = index }
        init?(stringValue: String) { nil }
        init?(intValue: Int) { self.index = intValue }
    }

    struct ValueEncoder: Encoder {
        let node: Node
        let path: [any CodingKey]
        var codingPath: [any CodingKey] { path }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<K: CodingKey>(keyedBy type: K.Type) -> KeyedEncodingContainer<K> {
            if case .empty = node.content { node.content = .object([]) }
            return KeyedEncodingContainer(KeyedContainer<K>(node: node, path: path))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            if case .empty = node.content { node.content = .array([]) }
            return UnkeyedContainer(node: node, path: path)
        }

        func singleValueContainer() -> any SingleValueEncodingContainer { SingleContainer(node: node, path: path) }
    }

    /// Encodes `value` at `path` + `key`. The path is made only for a value that is not a
    /// number, a string or a Boolean (whose encoder can read it) or for an error: a new array per
    /// member was most of the cost of encoding a daemon's few status keys.
    static func box<T: Encodable>(
        _ value: T,
        into node: Node,
        under path: [any CodingKey],
        key: (any CodingKey)?
    ) throws {
        func full() -> [any CodingKey] { key.map { path + [$0] } ?? path }
        // Dispatch on the type first: a value of any other type (a daemon's struct, an array)
        // would otherwise be tried against each of these types in turn, a dynamic cast each.
        switch ObjectIdentifier(T.self) {
        case ObjectIdentifier(Bool.self), ObjectIdentifier(String.self), ObjectIdentifier(Double.self),
            ObjectIdentifier(Float.self), ObjectIdentifier(Int.self), ObjectIdentifier(Int64.self),
            ObjectIdentifier(UInt64.self), ObjectIdentifier(Int32.self), ObjectIdentifier(UInt32.self),
            ObjectIdentifier(UInt.self), ObjectIdentifier(Int16.self), ObjectIdentifier(UInt16.self),
            ObjectIdentifier(Int8.self), ObjectIdentifier(UInt8.self):
            break
        default:
            try value.encode(to: ValueEncoder(node: node, path: full()))
            return
        }
        switch value {
        case let flag as Bool: node.content = .value(.bool(flag))
        case let text as String: node.content = .value(.string(text))
        case let number as Double:
            guard number.isFinite else {
                let path = full()
                let key = path.isEmpty ? "the top level" : "\"" + path.map(\.stringValue).joined(separator: ".") + "\""
                throw Failure(description: "cannot store \(number) at \(key): JSON has no infinity or NaN")
            }
            node.content = .value(
                .number(number.rounded() == number && abs(number) < 1e15 ? "\(Int64(number))" : "\(number)")
            )
        case let number as Float: try box(Double(number), into: node, under: path, key: key)
        // Each integer type by name: a cast to `any FixedWidthInteger` made the runtime scan every
        // conformance record of the binary once for each type encoded (a daemon's status keys
        // at start: 0.3 M instructions), where a cast to a concrete type compares metadata.
        case let number as Int: node.content = .value(.number("\(number)"))
        case let number as Int64: node.content = .value(.number("\(number)"))
        case let number as UInt64: node.content = .value(.number("\(number)"))
        case let number as Int32: node.content = .value(.number("\(number)"))
        case let number as UInt32: node.content = .value(.number("\(number)"))
        case let number as UInt: node.content = .value(.number("\(number)"))
        case let number as Int16: node.content = .value(.number("\(number)"))
        case let number as UInt16: node.content = .value(.number("\(number)"))
        case let number as Int8: node.content = .value(.number("\(number)"))
        case let number as UInt8: node.content = .value(.number("\(number)"))
        default: try value.encode(to: ValueEncoder(node: node, path: full()))
        }
    }

    struct KeyedContainer<K: CodingKey>: KeyedEncodingContainerProtocol {
        let node: Node
        let path: [any CodingKey]
        var codingPath: [any CodingKey] { path }

        mutating func encodeNil(forKey key: K) throws { node.member(key.stringValue).content = .value(.null) }

        mutating func encode<T: Encodable>(_ value: T, forKey key: K) throws {
            try JSONValueEncoder.box(value, into: node.member(key.stringValue), under: path, key: key)
        }

        mutating func nestedContainer<N: CodingKey>(keyedBy type: N.Type, forKey key: K) -> KeyedEncodingContainer<N> {
            ValueEncoder(node: node.member(key.stringValue), path: path + [key]).container(keyedBy: type)
        }

        mutating func nestedUnkeyedContainer(forKey key: K) -> any UnkeyedEncodingContainer {
            ValueEncoder(node: node.member(key.stringValue), path: path + [key]).unkeyedContainer()
        }

        mutating func superEncoder() -> any Encoder { ValueEncoder(node: node, path: path) }
        mutating func superEncoder(forKey key: K) -> any Encoder {
            ValueEncoder(node: node.member(key.stringValue), path: path + [key])
        }
    }

    struct UnkeyedContainer: UnkeyedEncodingContainer {
        let node: Node
        let path: [any CodingKey]
        var codingPath: [any CodingKey] { path }
        var count: Int {
            if case .array(let elements) = node.content { return elements.count }
            return 0
        }

        mutating func encodeNil() throws { node.appendElement().content = .value(.null) }
        mutating func encode<T: Encodable>(_ value: T) throws {
            // The index before the element is appended (the path named the next one's before).
            let index = Index(count)
            try JSONValueEncoder.box(value, into: node.appendElement(), under: path, key: index)
        }
        mutating func nestedContainer<N: CodingKey>(keyedBy type: N.Type) -> KeyedEncodingContainer<N> {
            ValueEncoder(node: node.appendElement(), path: path).container(keyedBy: type)
        }
        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            ValueEncoder(node: node.appendElement(), path: path).unkeyedContainer()
        }
        mutating func superEncoder() -> any Encoder { ValueEncoder(node: node.appendElement(), path: path) }
    }

    struct SingleContainer: SingleValueEncodingContainer {
        let node: Node
        let path: [any CodingKey]
        var codingPath: [any CodingKey] { path }
        mutating func encodeNil() throws { node.content = .value(.null) }
        mutating func encode<T: Encodable>(_ value: T) throws {
            try JSONValueEncoder.box(value, into: node, under: path, key: nil)
        }
    }
}

/// Writes a ``JSONValue`` as JSON text.
///
/// Pretty text puts each member and element on a line of its own, indented two spaces a level,
/// for the first ``indentedDepth`` levels; a container nested deeper is written compactly on
/// the line where it starts. Indenting every level made the text grow with the square of the
/// nesting: a 100 KB state file of arrays nested 250 deep came back from a checkpoint as 25 MB.
/// Capped, pretty text has at most one line break per byte of the compact text, each with at
/// most `2 × indentedDepth` spaces (and a space after each colon), so it is never more than
/// `2 × indentedDepth + 3` times as long, whatever the nesting; at the depths Vigil's own files
/// have, it is less than twice as long.
package enum JSONWriter {
    /// How many levels pretty text indents; deeper values are written compactly. A state file,
    /// a status file or a configuration of Vigil's nests a few levels, well within it.
    package static let indentedDepth = 8

    /// The text of `value`, indented with two spaces per level when `pretty`.
    package static func write(_ value: JSONValue, pretty: Bool = true) -> String {
        String(decoding: bytes(value, pretty: pretty), as: UTF8.self)
    }

    /// The UTF-8 text of `value`, as ``write(_:pretty:)`` spells it.
    package static func bytes(_ value: JSONValue, pretty: Bool = true) -> [UInt8] {
        bytes(value, pretty: pretty, limit: .max) ?? []
    }

    /// The UTF-8 text of `value`, as ``write(_:pretty:)`` spells it, or `nil` once it is longer
    /// than `limit` bytes: writing stops there, so a value whose text would be huge costs no
    /// more than `limit` bytes of memory (and about as much time) to find out.
    package static func bytes(_ value: JSONValue, pretty: Bool, limit: Int) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(min(512, limit))
        var layout = 0
        guard write(value, level: 0, pretty: pretty, limit: limit, into: &output, layout: &layout) else { return nil }
        if pretty { output.append(UInt8(ascii: "\n")) }
        return output.count <= limit ? output : nil
    }

    /// The compact text of `value` (at most `limit` bytes, else `nil`, as
    /// ``bytes(_:pretty:limit:)``) and how long its pretty text is, found in the same pass: a
    /// caller that picks one by their sizes writes the pretty text only once it knows it wants it.
    package static func compact(_ value: JSONValue, limit: Int) -> (bytes: [UInt8], prettyCount: Int)? {
        var output: [UInt8] = []
        output.reserveCapacity(min(512, limit))
        var layout = 0
        guard write(value, level: 0, pretty: false, limit: limit, into: &output, layout: &layout),
            output.count <= limit
        else { return nil }
        return (output, output.count + layout + 1)
    }

    /// A line break and the indentation of `level`; added to `layout`, written when `pretty`.
    private static func newline(_ level: Int, pretty: Bool, into output: inout [UInt8], layout: inout Int) {
        layout += 1 + 2 * level
        guard pretty else { return }
        output.append(UInt8(ascii: "\n"))
        for _ in 0..<level { output.append(UInt8(ascii: " ")); output.append(UInt8(ascii: " ")) }
    }

    /// Writes `value`, which starts on a line indented `level` levels; `layout` counts what the
    /// pretty text has beyond the compact one (line breaks, indentation, a space after each
    /// colon), written only when `pretty`. `false` once `output` is longer than `limit`,
    /// checked after each member and element, and before each string (one that cannot fit is
    /// not copied; one that may, goes in whole, escaped).
    private static func write(
        _ value: JSONValue,
        level: Int,
        pretty: Bool,
        limit: Int,
        into output: inout [UInt8],
        layout: inout Int
    ) -> Bool {
        // The members of a container at the last indented level go on its line, compactly.
        let indented = level < indentedDepth
        switch value.kind {
        case .object(let members):
            if members.isEmpty { output += "{}".utf8; return true }
            output.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                if indented { newline(level + 1, pretty: pretty, into: &output, layout: &layout) }
                guard output.count + member.key.utf8.count <= limit else { return false }
                quote(member.key, into: &output)
                output.append(UInt8(ascii: ":"))
                if indented {
                    layout += 1
                    if pretty { output.append(UInt8(ascii: " ")) }
                }
                guard
                    write(member.value, level: level + 1, pretty: pretty, limit: limit, into: &output, layout: &layout),
                    output.count <= limit
                else { return false }
            }
            if indented { newline(level, pretty: pretty, into: &output, layout: &layout) }
            output.append(UInt8(ascii: "}"))
        case .array(let elements):
            if elements.isEmpty { output += "[]".utf8; return true }
            output.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                if indented { newline(level + 1, pretty: pretty, into: &output, layout: &layout) }
                guard write(element, level: level + 1, pretty: pretty, limit: limit, into: &output, layout: &layout),
                    output.count <= limit
                else { return false }
            }
            if indented { newline(level, pretty: pretty, into: &output, layout: &layout) }
            output.append(UInt8(ascii: "]"))
        case .string(let text):
            // Its text is at least as long as its UTF-8: one over the limit is not copied in vain.
            guard output.count + text.utf8.count <= limit else { return false }
            quote(text, into: &output)
        case .number(let text): output += text.utf8
        case .bool(let flag): output += flag ? "true".utf8 : "false".utf8
        case .null: output += "null".utf8
        }
        return true
    }

    /// `text` as a JSON string. Control characters are escaped, and so are those `DisplayText`
    /// calls control that JSON would pass raw (DEL, C1, U+2028/U+2029, the bidirectional
    /// embeddings, overrides and isolates): `status --json` on a terminal shows a value planted in
    /// a status file as `\u009b`, never runs it.
    private static func quote(_ text: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        // Most text needs no escape: copied at once (a byte at a time was most of a status write).
        // Every character to escape starts with one of these bytes: C0, the quote, the backslash,
        // DEL, 0xC2 (C1: U+0080–U+009F) and 0xE2 (U+2028/9 and the bidirectional controls).
        var text = text
        let clean = text.withUTF8 { bytes in
            guard
                !bytes.contains(where: {
                    $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 == 0x7F || $0 == 0xC2
                        || $0 == 0xE2
                })
            else { return false }
            output.append(contentsOf: bytes)
            return true
        }
        if !clean {
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": output += "\\\"".utf8
                case "\\": output += "\\\\".utf8
                case "\n": output += "\\n".utf8
                case "\r": output += "\\r".utf8
                case "\t": output += "\\t".utf8
                case _ where DisplayText.isControl(scalar):
                    // Every one is in the Basic Multilingual Plane: four hex digits.
                    output += "\\u".utf8
                    for shift in stride(from: 12, through: 0, by: -4) {
                        let digit = UInt8((scalar.value >> UInt32(shift)) & 0xF)
                        output.append(digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10)
                    }
                default: output += String(scalar).utf8
                }
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}

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

        func value() throws -> JSONValue {
            switch content {
            case .empty: return JSONValue(.object([]))
            case .object(let members):
                return JSONValue(.object(try members.map { .init(key: $0.0, value: try $0.1.value()) }))
            case .array(let elements): return JSONValue(.array(try elements.map { try $0.value() }))
            case .value(let kind): return JSONValue(kind)
            }
        }

        func member(_ key: String) -> Node {
            var members: [(String, Node)] = []
            if case .object(let existing) = content { members = existing }
            if let found = members.first(where: { $0.0 == key }) { return found.1 }
            let node = Node()
            members.append((key, node))
            content = .object(members)
            return node
        }

        func appendElement() -> Node {
            var elements: [Node] = []
            if case .array(let existing) = content { elements = existing }
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

    static func box<T: Encodable>(_ value: T, into node: Node, path: [any CodingKey]) throws {
        switch value {
        case let flag as Bool: node.content = .value(.bool(flag))
        case let text as String: node.content = .value(.string(text))
        case let number as Double:
            guard number.isFinite else {
                let key = path.isEmpty ? "the top level" : "\"" + path.map(\.stringValue).joined(separator: ".") + "\""
                throw Failure(description: "cannot store \(number) at \(key): JSON has no infinity or NaN")
            }
            node.content = .value(
                .number(number.rounded() == number && abs(number) < 1e15 ? "\(Int64(number))" : "\(number)")
            )
        case let number as Float: try box(Double(number), into: node, path: path)
        case let number as any FixedWidthInteger: node.content = .value(.number("\(number)"))
        default: try value.encode(to: ValueEncoder(node: node, path: path))
        }
    }

    struct KeyedContainer<K: CodingKey>: KeyedEncodingContainerProtocol {
        let node: Node
        let path: [any CodingKey]
        var codingPath: [any CodingKey] { path }

        mutating func encodeNil(forKey key: K) throws { node.member(key.stringValue).content = .value(.null) }

        mutating func encode<T: Encodable>(_ value: T, forKey key: K) throws {
            try JSONValueEncoder.box(value, into: node.member(key.stringValue), path: path + [key])
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
            try JSONValueEncoder.box(value, into: node.appendElement(), path: path + [Key(stringValue: "\(count)")])
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
            try JSONValueEncoder.box(value, into: node, path: path)
        }
    }
}

/// Writes a ``JSONValue`` as JSON text.
package enum JSONWriter {
    /// The text of `value`, indented with two spaces per level when `pretty`.
    package static func write(_ value: JSONValue, pretty: Bool = true) -> String {
        var output = ""
        write(value, indent: 0, pretty: pretty, into: &output)
        if pretty { output += "\n" }
        return output
    }

    private static func write(_ value: JSONValue, indent: Int, pretty: Bool, into output: inout String) {
        let newline = pretty ? "\n" + String(repeating: "  ", count: indent + 1) : ""
        let close = pretty ? "\n" + String(repeating: "  ", count: indent) : ""
        switch value.kind {
        case .object(let members):
            if members.isEmpty { output += "{}"; return }
            output += "{"
            for (index, member) in members.enumerated() {
                output += (index == 0 ? "" : ",") + newline
                quote(member.key, into: &output)
                output += pretty ? ": " : ":"
                write(member.value, indent: indent + 1, pretty: pretty, into: &output)
            }
            output += close + "}"
        case .array(let elements):
            if elements.isEmpty { output += "[]"; return }
            output += "["
            for (index, element) in elements.enumerated() {
                output += (index == 0 ? "" : ",") + newline
                write(element, indent: indent + 1, pretty: pretty, into: &output)
            }
            output += close + "]"
        case .string(let text): quote(text, into: &output)
        case .number(let text): output += text
        case .bool(let flag): output += flag ? "true" : "false"
        case .null: output += "null"
        }
    }

    private static func quote(_ text: String, into output: inout String) {
        output += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }
}

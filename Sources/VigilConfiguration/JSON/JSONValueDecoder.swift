import VigilPOSIX

/// Decodes a `Decodable` type from a ``JSONValue``, knowing where every value stood in its
/// file, and which keys the type never asked for (unknown keys: usually typos).
package enum JSONValueDecoder {
    /// A decoding failure: the key path, its position, and the reason in an admin's words.
    package struct Failure: Error, Hashable, Sendable, CustomStringConvertible {
        /// `["heartbeat", "interval"]`.
        package var path: [String]
        package var position: JSONValue.Position
        package var message: String

        package init(path: [String], position: JSONValue.Position, message: String) {
            self.path = path
            self.position = position
            self.message = message
        }

        /// `line 3, column 14: heartbeat.count: expected a whole number, found the string "many"`,
        /// for logs; without a line when the value was not parsed from text.
        package var description: String {
            let location = position.line > 0 ? "line \(position.line), column \(position.column): " : ""
            return location + (path.isEmpty ? "" : JSONValueDecoder.shown(path) + ": ") + message
        }
    }

    /// `path` as a message shows it, `heartbeat.interval`: each key cut to its first 64
    /// characters and `…`, so that a megabyte-long key in a file gives a short error (and a
    /// short reload rejection in `status.json`, which `reload` and `status` must read).
    package static func shown(_ path: [String]) -> String {
        path.lazy.map { $0.count > 64 ? $0.prefix(64) + "…" : $0 }.joined(separator: ".")
    }

    /// Decodes `type` from `value`.
    ///
    /// - Parameter rejectUnknownKeys: when `true`, a key that the type never looked at is an
    ///   error, with a "did you mean" when a known key is close.
    package static func decode<T: Decodable>(
        _ type: T.Type,
        from value: JSONValue,
        rejectUnknownKeys: Bool
    ) throws -> T {
        let tracker = Tracker()
        let result: T
        do {
            result = try T(from: ValueDecoder(value: value, path: [], tracker: tracker))
        } catch let failure as Failure {
            throw failure
        } catch let error as DecodingError {
            throw failureFor(error, in: value)
        }
        if rejectUnknownKeys { try tracker.checkUnknownKeys(in: value, path: []) }
        return result
    }

    /// The value at `path`, if there is one.
    package static func value(at path: [String], in root: JSONValue) -> JSONValue? {
        var current = root
        for component in path {
            switch current.kind {
            case .object: guard let next = current[component] else { return nil }; current = next
            case .array(let elements):
                guard let index = Int(component), elements.indices.contains(index) else { return nil }
                current = elements[index]
            default: return nil
            }
        }
        return current
    }

    /// The position of the deepest existing value along `path`.
    package static func position(of path: [String], in root: JSONValue) -> JSONValue.Position {
        var length = path.count
        while length > 0 {
            if let value = value(at: Array(path.prefix(length)), in: root) { return value.position }
            length -= 1
        }
        return root.position
    }

    /// The values an enum with raw values and every case listed takes, as a message shows them
    /// (`"debug", "info"`, at most 16); `nil` for another type.
    /// `asKeys`: every value quoted, as an object's keys are strings (`"80", "443"`).
    static func choices<T>(of type: T.Type, asKeys: Bool = false) -> String? {
        guard let listed = type as? any (CaseIterable & RawRepresentable).Type else { return nil }
        return rawValues(of: listed, asKeys: asKeys)
    }

    private static func rawValues<E: CaseIterable & RawRepresentable>(of type: E.Type, asKeys: Bool) -> String? {
        let shown = type.allCases.prefix(17).map { choice in
            (choice.rawValue as? String).map { "\"\(JSONValue.abbreviated($0))\"" }
                ?? (asKeys ? "\"\(choice.rawValue)\"" : "\(choice.rawValue)")
        }
        guard !shown.isEmpty else { return nil }
        return shown.prefix(16).joined(separator: ", ") + (shown.count > 16 ? ", …" : "")
    }

    private static func failureFor(_ error: DecodingError, in root: JSONValue) -> Failure {
        let (path, message): ([any CodingKey], String) =
            switch error {
            case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
                (context.codingPath, context.debugDescription)
            case .keyNotFound(let key, let context):
                (context.codingPath, "the required key \"\(key.stringValue)\" is missing")
            @unknown default:
                ([], "\(error)")
            }
        let names = path.map(\.stringValue)
        return Failure(path: names, position: position(of: names, in: root), message: message)
    }

    /// Which keys each object's type asked for.
    final class Tracker {
        /// The keys one object's type asked for: one per keyed container, so that asking costs
        /// an append, not a hash of the path and the key.
        final class AskedKeys {
            var keys: [String] = []
            /// `allKeys` was read: the type looked at every key (a dictionary, say).
            var everything = false

            func contains(_ key: String) -> Bool { keys.contains(key) }
        }

        /// The records of the first objects, searched in place (a configuration has a handful of
        /// objects: hashing each path cost more than comparing it); later ones through a
        /// dictionary, so that an array of thousands of objects stays linear.
        private var firstAsked: [(path: [String], keys: AskedKeys)] = []
        private var moreAsked: [[String]: AskedKeys] = [:]
        private static let searchedInPlace = 16

        /// The record of the object at `path`, if a container was opened on it.
        func existingKeys(at path: [String]) -> AskedKeys? {
            for record in firstAsked where record.path == path { return record.keys }
            return firstAsked.count < Self.searchedInPlace ? nil : moreAsked[path]
        }

        /// The record of the object at `path`, made when its first container is opened.
        func keys(at path: [String]) -> AskedKeys {
            if let existing = existingKeys(at: path) { return existing }
            let keys = AskedKeys()
            if firstAsked.count < Self.searchedInPlace {
                firstAsked.append((path, keys))
            } else {
                moreAsked[path] = keys
            }
            return keys
        }

        func checkUnknownKeys(in value: JSONValue, path: [String]) throws {
            switch value.kind {
            case .object(let members):
                if let record = existingKeys(at: path), !record.everything {
                    // A few keys are searched in place; many (a type with dozens of keys) once
                    // through a set.
                    let known: Set<String>? = record.keys.count > 16 ? Set(record.keys) : nil
                    for member in members where !(known?.contains(member.key) ?? record.contains(member.key)) {
                        let known = known ?? Set(record.keys)
                        let location = path.isEmpty ? "at the top level" : "in \"\(JSONValueDecoder.shown(path))\""
                        var message = "unknown key \(DisplayText.quoted(member.key)) \(location)"
                        if let suggestion = Self.closest(to: member.key, in: known) {
                            message += "; did you mean \"\(suggestion)\"?"
                        } else if !known.isEmpty {
                            message += "; known keys: " + known.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
                        }
                        throw Failure(path: path + [member.key], position: member.keyPosition, message: message)
                    }
                }
                // Only objects and arrays can hold keys: a leaf costs no path.
                for member in members where Self.isContainer(member.value) {
                    try checkUnknownKeys(in: member.value, path: path + [member.key])
                }
            case .array(let elements):
                for (index, element) in elements.enumerated() where Self.isContainer(element) {
                    try checkUnknownKeys(in: element, path: path + ["\(index)"])
                }
            default:
                break
            }
        }

        private static func isContainer(_ value: JSONValue) -> Bool {
            switch value.kind {
            case .object, .array: true
            default: false
            }
        }

        static func closest(to key: String, in known: Set<String>) -> String? {
            let length = key.count
            let limit = max(2, length / 3)
            // The distance is at least the difference in length: skipping the keys too long or
            // too short keeps a megabyte-long unknown key from costing seconds here.
            let candidates = known.filter { abs($0.count - length) <= limit }
            guard !candidates.isEmpty else { return nil }
            let lowered = key.lowercased()
            let scored = candidates.map { ($0, editDistance(lowered, $0.lowercased())) }
            guard let best = scored.min(by: { ($0.1, $0.0) < ($1.1, $1.0) }) else { return nil }
            return best.1 <= limit ? best.0 : nil
        }

        static func editDistance(_ a: String, _ b: String) -> Int {
            let a = Array(a)
            let b = Array(b)
            var previous = Array(0...b.count)
            for i in 1...max(a.count, 1) where !a.isEmpty {
                var current = [i] + Array(repeating: 0, count: b.count)
                for j in 1...max(b.count, 1) where !b.isEmpty {
                    current[j] = min(
                        previous[j] + 1,
                        current[j - 1] + 1,
                        previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
                    )
                }
                previous = current
            }
            return a.isEmpty ? b.count : previous[b.count]
        }
    }

    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int?
        init(stringValue: String) { self.stringValue = stringValue }
        init(intValue: Int) {
            self.stringValue = "\(intValue)"
            self.intValue = intValue
        }
    }

    struct ValueDecoder: Decoder {
        let value: JSONValue
        let path: [String]
        let tracker: Tracker
        var codingPath: [any CodingKey] { path.map { Key(stringValue: $0) } }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func fail(_ message: String) -> Failure {
            Failure(path: path, position: value.position, message: message)
        }

        func container<K: CodingKey>(keyedBy type: K.Type) throws -> KeyedDecodingContainer<K> {
            guard case .object(let members) = value.kind else {
                throw fail("expected an object, found \(value.summary)")
            }
            return KeyedDecodingContainer(
                KeyedContainer<K>(decoder: self, members: Members(members), asked: tracker.keys(at: path))
            )
        }

        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            guard case .array(let elements) = value.kind else {
                throw fail("expected an array, found \(value.summary)")
            }
            return UnkeyedContainer(decoder: self, elements: elements)
        }

        func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleContainer(decoder: self) }

        func child(_ value: JSONValue, _ key: String) -> ValueDecoder {
            ValueDecoder(value: value, path: path + [key], tracker: tracker)
        }

        func unbox<T: Decodable>(_ type: T.Type) throws -> T {
            // Metatypes compared by identity (a pointer comparison), not `is` casts (a runtime
            // call each), and the value handed over as the type just proven equal.
            if type == Bool.self {
                guard case .bool(let flag) = value.kind else {
                    throw fail("expected true or false, found \(value.summary)")
                }
                return unsafeBitCast(flag, to: T.self)
            }
            if type == String.self {
                guard case .string(let text) = value.kind else {
                    throw fail("expected a string, found \(value.summary)")
                }
                return unsafeBitCast(text, to: T.self)
            }
            if type == Double.self { return unsafeBitCast(try floatingPoint(Double.self), to: T.self) }
            if type == Int.self { return unsafeBitCast(try integer(Int.self), to: T.self) }
            if type == Float.self { return unsafeBitCast(try floatingPoint(Float.self), to: T.self) }
            if type == Int64.self { return unsafeBitCast(try integer(Int64.self), to: T.self) }
            if type == Int32.self { return unsafeBitCast(try integer(Int32.self), to: T.self) }
            if type == Int16.self { return unsafeBitCast(try integer(Int16.self), to: T.self) }
            if type == Int8.self { return unsafeBitCast(try integer(Int8.self), to: T.self) }
            if type == UInt.self { return unsafeBitCast(try integer(UInt.self), to: T.self) }
            if type == UInt64.self { return unsafeBitCast(try integer(UInt64.self), to: T.self) }
            if type == UInt32.self { return unsafeBitCast(try integer(UInt32.self), to: T.self) }
            if type == UInt16.self { return unsafeBitCast(try integer(UInt16.self), to: T.self) }
            if type == UInt8.self { return unsafeBitCast(try integer(UInt8.self), to: T.self) }
            do {
                return try T(from: self)
            } catch let error as DecodingError {
                // An enum with raw values that has no case for this value, decoded by the
                // standard library: its "Cannot initialize Level from invalid String value DEBUG"
                // names no value the key takes and echoes the file's value whole. Say what the
                // key takes, as the other messages do (the type is asked only now, on the error's
                // path: a cast to a protocol scans every conformance record). A daemon's own
                // `init(from:)` keeps its own words.
                if let failure = Self.unconvertedKey(error, of: T.self, in: value, at: path) { throw failure }
                guard case .dataCorrupted(let context) = error, context.codingPath.count == path.count,
                    context.debugDescription.hasPrefix("Cannot initialize \(T.self) from invalid ")
                else { throw error }
                if let choices = JSONValueDecoder.choices(of: T.self) {
                    throw fail("expected one of \(choices), found \(value.summary)")
                }
                throw fail("expected a value of \(T.self), found \(value.summary)")
            }
        }

        /// A dictionary keyed by an enum (`CodingKeyRepresentable`) given a key it has no case
        /// for: the standard library's "Could not convert key to type Mode" names neither the key
        /// nor what keys the object takes. Asked only on an error's path (a cast to a protocol
        /// scans every conformance record).
        static func unconvertedKey<T>(
            _ error: DecodingError,
            of type: T.Type,
            in object: JSONValue,
            at path: [String]
        ) -> Failure? {
            guard case .dataCorrupted(let context) = error, context.codingPath.count == path.count + 1,
                let keyType = (type as? any DictionaryKeyedByAnyType.Type)?.keyType,
                context.debugDescription == "Could not convert key to type \(keyType)"
            else { return nil }
            let codingKey = context.codingPath[path.count]
            // The standard library's words from a value's own init(from:) are no reason to
            // blame a key the type takes.
            guard let convertible = keyType as? any CodingKeyRepresentable.Type,
                convertible.init(codingKey: codingKey) == nil
            else { return nil }
            let key = codingKey.stringValue
            let found = DisplayText.quoted(key, limit: 40)
            let message =
                if let choices = JSONValueDecoder.choices(of: keyType, asKeys: true) {
                    "expected a key that is one of \(choices), found \(found)"
                } else {
                    "expected a key of \(keyType), found \(found)"
                }
            let member: JSONValue.Member? =
                if case .object(let members) = object.kind { members.last { $0.key == key } } else { nil }
            return Failure(path: path + [key], position: member?.keyPosition ?? object.position, message: message)
        }

        /// A number as `F`. A text beyond `F`'s range is a failure naming the range, never
        /// infinity (which a later conversion such as `Duration.seconds` traps on), and a non-zero
        /// text too small for `F` is a failure, never a silent zero.
        func floatingPoint<F: BinaryFloatingPoint & LosslessStringConvertible>(_ type: F.Type) throws -> F {
            guard case .number(let text) = value.kind, let number = F(text) else {
                throw fail("expected a number, found \(value.summary)")
            }
            guard number.isFinite else {
                throw fail(
                    "\(JSONValue.abbreviated(text)) is out of range "
                        + "(\(-F.greatestFiniteMagnitude) to \(F.greatestFiniteMagnitude))"
                )
            }
            guard number != 0 || !NumberText(text).hasNonZeroDigit else {
                throw fail(
                    "\(JSONValue.abbreviated(text)) is too close to zero to be represented: write 0, or a number "
                        + "of magnitude at least \(F.leastNonzeroMagnitude)"
                )
            }
            return number
        }

        /// A whole number as `I`, decided exactly on the text (no detour through `Double`, which
        /// rounds): `1e2` and `100.0` are 100, `1.5` is not whole, anything beyond `I.min...I.max`
        /// is a failure naming that range.
        func integer<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
            guard case .number(let text) = value.kind else {
                throw fail("expected a whole number, found \(value.summary)")
            }
            if let exact = I(text) { return exact }
            let outOfRange = fail(
                "\(JSONValue.abbreviated(text)) is out of range (\(I.min) to \(I.max))"
            )
            switch NumberText(text).integerDigits {
            case .notWhole: throw fail("expected a whole number, found \(value.summary)")
            case .tooLarge: throw outOfRange
            case .digits(let digits, let negative):
                guard let exact = I((negative ? "-" : "") + digits) else { throw outOfRange }
                return exact
            }
        }
    }

    /// The parts of a JSON number's text (which ``JSONParser`` has checked against the grammar:
    /// `-?digits(.digits)?([eE][+-]?digits)?`), for exact decisions without floating point.
    struct NumberText {
        var negative = false
        /// The integer and fraction digits, without the decimal point.
        var mantissa: [UInt8]
        /// How many of `mantissa`'s digits are after the decimal point.
        var fractionDigits = 0
        /// The exponent's magnitude, or `nil` when it has more than nine digits (≥ 10⁹).
        var exponent: Int? = 0
        var exponentNegative = false

        init(_ text: String) {
            var rest = Array(text.utf8)[...]
            if rest.first == UInt8(ascii: "-") {
                negative = true
                rest = rest.dropFirst()
            }
            if let exponentStart = rest.firstIndex(where: { $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) {
                var digits = rest[(exponentStart + 1)...]
                if digits.first == UInt8(ascii: "-") || digits.first == UInt8(ascii: "+") {
                    exponentNegative = digits.first == UInt8(ascii: "-")
                    digits = digits.dropFirst()
                }
                let significant = digits.drop { $0 == UInt8(ascii: "0") }
                // At most nine digits: no overflow, whatever the bytes are.
                exponent = significant.count <= 9 ? significant.reduce(0) { $0 * 10 + (Int($1) - 48) } : nil
                rest = rest[..<exponentStart]
            }
            if let point = rest.firstIndex(of: UInt8(ascii: ".")) {
                fractionDigits = rest.endIndex - point - 1
                mantissa = Array(rest[..<point]) + Array(rest[(point + 1)...])
            } else {
                mantissa = Array(rest)
            }
        }

        var hasNonZeroDigit: Bool { mantissa.contains { $0 != UInt8(ascii: "0") } }

        enum IntegerDigits {
            case notWhole
            /// More than 40 digits: beyond every fixed-width integer type up to 128 bits.
            case tooLarge
            /// The decimal digits of a whole value (no leading zeros), and its sign.
            case digits(String, negative: Bool)
        }

        var integerDigits: IntegerDigits {
            let significant = mantissa.drop { $0 == UInt8(ascii: "0") }
            let trailingZeros = significant.reversed().prefix { $0 == UInt8(ascii: "0") }.count
            let digits = significant.dropLast(trailingZeros)
            if digits.isEmpty { return .digits("0", negative: false) }
            guard let exponent else { return exponentNegative ? .notWhole : .tooLarge }
            // The value is digits × 10^scale; |exponent| < 10⁹, so this cannot overflow.
            let scale = (exponentNegative ? -exponent : exponent) - fractionDigits + trailingZeros
            if scale < 0 { return .notWhole }
            if digits.count + scale > 40 { return .tooLarge }
            return .digits(
                String(decoding: digits, as: UTF8.self) + String(repeating: "0", count: scale),
                negative: negative
            )
        }
    }

    /// An object's members by key; the last of equal keys wins. A small object (what a
    /// configuration is made of) is searched in place; a large one (a dictionary of thousands
    /// of entries) through an index built once, so that decoding every key stays linear.
    struct Members {
        let members: [JSONValue.Member]
        let index: [String: JSONValue]?

        init(_ members: [JSONValue.Member]) {
            self.members = members
            if members.count > 16 {
                var index: [String: JSONValue] = [:]
                index.reserveCapacity(members.count)
                for member in members { index[member.key] = member.value }
                self.index = index
            } else {
                self.index = nil
            }
        }

        subscript(key: String) -> JSONValue? {
            if let index { return index[key] }
            return members.last { $0.key == key }?.value
        }

        var keys: [String] {
            if let index { return Array(index.keys) }
            var seen: [String] = []
            for member in members where !seen.contains(member.key) { seen.append(member.key) }
            return seen
        }
    }

    struct KeyedContainer<K: CodingKey>: KeyedDecodingContainerProtocol {
        let decoder: ValueDecoder
        let members: Members
        let asked: Tracker.AskedKeys
        var codingPath: [any CodingKey] { decoder.codingPath }
        var allKeys: [K] {
            asked.everything = true
            return members.keys.compactMap { K(stringValue: $0) }
        }

        func contains(_ key: K) -> Bool {
            asked.keys.append(key.stringValue)
            return members[key.stringValue] != nil
        }

        func member(_ key: K) throws -> JSONValue {
            asked.keys.append(key.stringValue)
            guard let value = members[key.stringValue] else {
                throw Failure(
                    path: decoder.path + [key.stringValue],
                    position: decoder.value.position,
                    message: "the required key \"\(key.stringValue)\" is missing"
                )
            }
            return value
        }

        func decodeNil(forKey key: K) throws -> Bool {
            asked.keys.append(key.stringValue)
            guard let value = members[key.stringValue] else { return true }
            return value.kind == .null
        }

        func decode<T: Decodable>(_ type: T.Type, forKey key: K) throws -> T {
            let value = try member(key)
            return try decoder.child(value, key.stringValue).unbox(type)
        }

        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: K) throws -> T? {
            asked.keys.append(key.stringValue)
            guard let value = members[key.stringValue], value.kind != .null else { return nil }
            return try decoder.child(value, key.stringValue).unbox(type)
        }

        func nestedContainer<N: CodingKey>(keyedBy type: N.Type, forKey key: K) throws -> KeyedDecodingContainer<N> {
            try decoder.child(try member(key), key.stringValue).container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: K) throws -> any UnkeyedDecodingContainer {
            try decoder.child(try member(key), key.stringValue).unkeyedContainer()
        }

        func superDecoder() throws -> any Decoder { decoder }
        func superDecoder(forKey key: K) throws -> any Decoder { decoder.child(try member(key), key.stringValue) }
    }

    struct UnkeyedContainer: UnkeyedDecodingContainer {
        let decoder: ValueDecoder
        let elements: [JSONValue]
        var currentIndex = 0
        var codingPath: [any CodingKey] { decoder.codingPath }
        var count: Int? { elements.count }
        var isAtEnd: Bool { currentIndex >= elements.count }

        mutating func next() throws -> ValueDecoder {
            guard !isAtEnd else { throw decoder.fail("the array has too few elements") }
            defer { currentIndex += 1 }
            return decoder.child(elements[currentIndex], "\(currentIndex)")
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd, elements[currentIndex].kind == .null else { return false }
            currentIndex += 1
            return true
        }

        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next().unbox(type) }

        mutating func nestedContainer<N: CodingKey>(keyedBy type: N.Type) throws -> KeyedDecodingContainer<N> {
            try next().container(keyedBy: type)
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }
        mutating func superDecoder() throws -> any Decoder { try next() }
    }

    struct SingleContainer: SingleValueDecodingContainer {
        let decoder: ValueDecoder
        var codingPath: [any CodingKey] { decoder.codingPath }
        func decodeNil() -> Bool { decoder.value.kind == .null }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.unbox(type) }
    }
}

/// A dictionary's key type, for ``JSONValueDecoder``'s message about a key an enum has no case for.
protocol DictionaryKeyedByAnyType {
    static var keyType: Any.Type { get }
}

extension Dictionary: DictionaryKeyedByAnyType {
    static var keyType: Any.Type { Key.self }
}

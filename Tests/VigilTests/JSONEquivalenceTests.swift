// FoundationEssentials in this test file only (issue 10, "Prove it"): the library stays free of
// Foundation; here its JSONDecoder is the reference that Vigil's decoding must agree with.
import FoundationEssentials
import Testing
import Vigil
import VigildCore

/// On valid input, Vigil's parser and decoder give the same values as FoundationEssentials'
/// `JSONDecoder`. The inputs are generated from fixed seeds (a failure names its seed and text):
/// random JSON documents (nesting, escapes, non-ASCII, surrogate pairs, numbers with signs,
/// fractions and exponents, random white space) and random valid vigild configurations.
@Suite struct JSONEquivalenceTests {
    @Test(arguments: 0..<8)
    func randomDocumentsDecodeAlike(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        for _ in 0..<250 {
            let document = Generated.random(depth: 0, using: &random)
            let text = document.text(using: &random)
            let foundation = try JSONDecoder().decode(Generated.self, from: Data(text.utf8))
            let vigil = try JSONValueDecoder.decode(
                Generated.self,
                from: try JSONParser.parse(Array(text.utf8)),
                rejectUnknownKeys: false
            )
            #expect(vigil == foundation, "seed \(seed): \(text)")
            #expect(vigil == document, "seed \(seed): \(text)")
        }
    }

    @Test(arguments: 0..<8)
    func randomNumbersDecodeAlikeForEveryType(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        for _ in 0..<250 {
            let text = Numbers.randomText(using: &random)
            let foundation: Numbers
            do {
                foundation = try JSONDecoder().decode(Numbers.self, from: Data(text.utf8))
            } catch {
                Issue.record("seed \(seed): JSONDecoder refuses \(text): \(error)")
                continue
            }
            let vigil = try JSONValueDecoder.decode(
                Numbers.self,
                from: try JSONParser.parse(Array(text.utf8)),
                rejectUnknownKeys: true
            )
            #expect(vigil == foundation, "seed \(seed): \(text)")
        }
    }

    @Test(arguments: 0..<4)
    func randomConfigurationsDecodeAlike(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        for _ in 0..<250 {
            let text = randomConfiguration(using: &random)
            let foundation = try JSONDecoder().decode(VigildConfiguration.self, from: Data(text.utf8))
            do {
                try foundation.validate()
            } catch {
                // Out of range for the validation in force: Vigil must refuse it as well.
                #expect(throws: ConfigurationError.self, "seed \(seed): \(text)") {
                    try ConfigurationLoader<VigildConfiguration>().decode(Array(text.utf8), file: "vigild.json")
                }
                continue
            }
            let vigil = try ConfigurationLoader<VigildConfiguration>().decode(Array(text.utf8), file: "vigild.json")
            #expect(vigil == foundation, "seed \(seed): \(text)")
        }
    }

    private func randomConfiguration(using random: inout SplitMix64) -> String {
        var members: [String] = []
        if Bool.random(using: &random) {
            members.append(#""logLevel": "\#(VigildConfiguration.levels.randomElement(using: &random) ?? "info")""#)
        }
        var heartbeat: [String] = []
        if Bool.random(using: &random) {
            heartbeat.append(
                #""interval": \#(numberText(Double.random(in: 0.5...3600, using: &random), using: &random))"#
            )
        }
        if Bool.random(using: &random) {
            heartbeat.append(
                #""message": \#(Generated.quoted(Generated.randomString(using: &random) + "x", using: &random))"#
            )
        }
        if Bool.random(using: &random) { members.append(#""heartbeat": {\#(heartbeat.joined(separator: ", "))}"#) }
        if Bool.random(using: &random) {
            let interval = numberText(Double.random(in: 1...86_400, using: &random), using: &random)
            members.append(#""persistence": {"checkpointInterval": \#(interval)}"#)
        }
        return "{" + members.shuffled(using: &random).joined(separator: ",\n") + "}"
    }

    /// `value` as a decimal, or with an exponent.
    private func numberText(_ value: Double, using random: inout SplitMix64) -> String {
        switch Int.random(in: 0..<3, using: &random) {
        case 0: "\(value)"
        case 1: "\(Int(value))"
        default: "\(Int(value * 1000))e-3"
        }
    }
}

/// Every number type at once, from plain integers and decimals within each type's range.
private struct Numbers: Codable, Equatable {
    var int: Int
    var int8: Int8
    var int32: Int32
    var uint: UInt
    var uint16: UInt16
    var double: Double
    var float: Float
    var doubles: [Double]

    static func randomText(using random: inout SplitMix64) -> String {
        let doubles = (0..<5).map { _ in Generated.randomNumberText(using: &random) }
        return """
            {"int": \(Int.random(in: .min ... .max, using: &random)), \
            "int8": \(Int8.random(in: .min ... .max, using: &random)), \
            "int32": \(Int32.random(in: .min ... .max, using: &random)), \
            "uint": \(UInt.random(in: .min ... .max, using: &random)), \
            "uint16": \(UInt16.random(in: .min ... .max, using: &random)), \
            "double": \(Generated.randomNumberText(using: &random)), \
            "float": \(Generated.randomNumberText(using: &random, maximumExponent: 28)), \
            "doubles": [\(doubles.joined(separator: ", "))]}
            """
    }
}

/// A JSON document as a Swift value, decodable by any `Decoder`.
private enum Generated: Decodable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([Generated])
    case object([String: Generated])

    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        if let object = try? decoder.container(keyedBy: Key.self) {
            var members: [String: Generated] = [:]
            for key in object.allKeys { members[key.stringValue] = try object.decode(Generated.self, forKey: key) }
            self = .object(members)
        } else if var array = try? decoder.unkeyedContainer() {
            var elements: [Generated] = []
            while !array.isAtEnd { elements.append(try array.decode(Generated.self)) }
            self = .array(elements)
        } else {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() {
                self = .null
            } else if let flag = try? single.decode(Bool.self) {
                self = .bool(flag)
            } else if let number = try? single.decode(Double.self) {
                self = .number(number)
            } else {
                self = .string(try single.decode(String.self))
            }
        }
    }

    /// Strings compare scalar by scalar (`==` on String equates canonically equivalent texts).
    static func == (a: Generated, b: Generated) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case (.bool(let x), .bool(let y)): x == y
        case (.number(let x), .number(let y)): x.bitPattern == y.bitPattern
        case (.string(let x), .string(let y)): x.unicodeScalars.elementsEqual(y.unicodeScalars)
        case (.array(let x), .array(let y)): x == y
        case (.object(let x), .object(let y)):
            x.count == y.count && x.allSatisfy { key, value in y[key].map { $0 == value } ?? false }
        default: false
        }
    }

    static func random(depth: Int, using random: inout SplitMix64) -> Generated {
        switch Int.random(in: 0..<(depth < 4 ? 7 : 5), using: &random) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &random))
        case 2: return .number(Double(randomNumberText(using: &random)) ?? 0)
        case 3, 4: return .string(randomString(using: &random))
        case 5:
            return .array(
                (0..<Int.random(in: 0..<5, using: &random)).map { _ in Self.random(depth: depth + 1, using: &random) }
            )
        default:
            var members: [String: Generated] = [:]
            for _ in 0..<Int.random(in: 0..<5, using: &random) {
                members[randomString(using: &random)] = Self.random(depth: depth + 1, using: &random)
            }
            return .object(members)
        }
    }

    /// Scalars from ASCII (quotes, backslashes and control characters included), Latin-1,
    /// CJK, and the supplementary planes (written as surrogate pairs when escaped).
    static func randomString(using random: inout SplitMix64) -> String {
        let ranges: [ClosedRange<UInt32>] = [
            0x00...0x7F, 0x20...0x7E, 0xA0...0x17F, 0x4E00...0x4FFF, 0x1F600...0x1F64F, 0x10000...0x10FFFF,
        ]
        var scalars = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0..<12, using: &random) {
            let range = ranges.randomElement(using: &random) ?? 0x20...0x7E
            if let scalar = Unicode.Scalar(UInt32.random(in: range, using: &random)) { scalars.append(scalar) }
        }
        return String(scalars)
    }

    /// A number's text: sign, integer digits, maybe a fraction, maybe an exponent (either case,
    /// either sign), always within `Double`'s range (or `Float`'s, with an exponent up to 28:
    /// nine integer digits, so below 10³⁸).
    static func randomNumberText(using random: inout SplitMix64, maximumExponent: Int = 280) -> String {
        var text = Bool.random(using: &random) ? "-" : ""
        let zero = Bool.random(using: &random)
        text += zero ? "0" : String(Int.random(in: 1...999_999_999, using: &random))
        // Always a fraction after a lone 0: FoundationEssentials (6.3.1) refuses "0e9" and "0E1",
        // which RFC 8259 allows and Vigil accepts (JSONParserTests checks that).
        if zero || Bool.random(using: &random) { text += "." + String(UInt64.random(in: 0 ... .max, using: &random)) }
        if Bool.random(using: &random) {
            text += Bool.random(using: &random) ? "e" : "E"
            text += ["", "+", "-"].randomElement(using: &random) ?? ""
            text += String(Int.random(in: 0...maximumExponent, using: &random))
        }
        return text
    }

    /// `text` as a JSON string literal, each character written plainly or escaped at random.
    static func quoted(_ text: String, using random: inout SplitMix64) -> String {
        var output = "\""
        for scalar in text.unicodeScalars {
            let escape =
                scalar.value < 0x20 || scalar == "\"" || scalar == "\\" || Int.random(in: 0..<4, using: &random) == 0
            guard escape else {
                output.unicodeScalars.append(scalar)
                continue
            }
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n" where Bool.random(using: &random): output += "\\n"
            case "/" where Bool.random(using: &random): output += "\\/"
            default:
                for unit in String(scalar).utf16 {
                    let hex = String(unit, radix: 16, uppercase: Bool.random(using: &random))
                    output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                }
            }
        }
        return output + "\""
    }

    /// The document's text, with random white space (and, since both parsers must agree, no
    /// comments or trailing commas: those are Vigil's extensions).
    func text(using random: inout SplitMix64) -> String {
        let space = [" ", "", "\n", "\t", "  ", "\r\n"].randomElement(using: &random) ?? ""
        switch self {
        case .null: return space + "null"
        case .bool(let flag): return space + (flag ? "true" : "false")
        case .number(let number):
            // Written the way Swift prints it: exponents as "e+20", "1e-07".
            return space + "\(number)"
        case .string(let text): return space + Self.quoted(text, using: &random)
        case .array(let elements):
            return "[" + elements.map { $0.text(using: &random) }.joined(separator: ",") + space + "]"
        case .object(let members):
            let parts = members.map { key, value in
                space + Self.quoted(key, using: &random) + space + ":" + value.text(using: &random)
            }
            return "{" + parts.joined(separator: ",") + space + "}"
        }
    }
}

/// A seeded generator, so that a failure can be reproduced from its seed.
private struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E4B9
        z = (z ^ (z >> 27)) &* 0x94D0_89BB_133E_EB11
        return z ^ (z >> 31)
    }
}

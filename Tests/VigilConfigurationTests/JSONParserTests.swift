import Testing
import VigilConfiguration
import VigilTesting

/// Hostile input for the parser, the decoder and the encoder (issue 10, items 2 and 7): each
/// input parses as JSON (with comments and trailing commas) says, or is an error with a line
/// and column — never a trap, a stack overflow or a quadratic hang.
@Suite struct JSONParserTests {
    private func syntaxError(_ bytes: [UInt8]) -> JSONParser.SyntaxError? {
        do {
            _ = try JSONParser.parse(bytes)
            return nil
        } catch {
            return error
        }
    }

    private func syntaxError(_ text: String) -> String? {
        syntaxError(Array(text.utf8)).map { "\($0.position.line):\($0.position.column): \($0.message)" }
    }

    private func elements(_ value: JSONValue) -> [JSONValue.Kind]? {
        guard case .array(let elements) = value.kind else { return nil }
        return elements.map(\.kind)
    }

    /// Issue 10, item 2: `"\uD800\u0041"` trapped with an arithmetic overflow.
    @Test func aHighSurrogateFollowedByAnythingButALowOneIsAnError() {
        #expect(
            syntaxError(#"{"logLevel":"\uD800\u0041"}"#)
                == "1:14: \\uD800 is the first half of a UTF-16 surrogate pair and must be followed by the second half "
                + "(\\uDC00 to \\uDFFF), not \\u0041"
        )
        #expect(
            syntaxError(#"["\uDBFF"]"#)
                == "1:3: \\uDBFF is the first half of a UTF-16 surrogate pair and must be followed by the second half "
                + "(\\uDC00 to \\uDFFF)"
        )
        #expect(
            syntaxError(#"["\uD800\n"]"#)
                == "1:3: \\uD800 is the first half of a UTF-16 surrogate pair and must be followed by the second half "
                + "(\\uDC00 to \\uDFFF)"
        )
        #expect(
            syntaxError(#"["x\uDC00"]"#)
                == "1:4: \\uDC00 is the second half of a UTF-16 surrogate pair without a first half "
                + "(\\uD800 to \\uDBFF) before it"
        )
        #expect(syntaxError(#"["\uD800\u12"]"#) == "1:9: \\u must be followed by four hexadecimal digits")
    }

    @Test func theSameReproductionThroughTheConfigurationLoader() {
        let error = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader<SampleConfiguration>().decode(
                Array(#"{"name":"\uD800\u0041"}"#.utf8),
                file: "/etc/sample.json"
            )
        }
        #expect(
            error?.description.hasPrefix("/etc/sample.json:1:10: not valid JSON: \\uD800 is the first half") == true
        )
    }

    @Test func escapesDecodeToTheirScalars() throws {
        let value = try JSONParser.parse(
            Array(#"["\" \\ \/ \b \f \n \r \t \u0000 \u00e9 \u20AC \uD83D\uDE00 \uDBFF\uDFFF"]"#.utf8)
        )
        #expect(elements(value) == [.string("\" \\ / \u{8} \u{C} \n \r \t \u{0} é € 😀 \u{10FFFF}")])
        // A sign is no hex digit ("\u+041" used to read as "A").
        #expect(syntaxError(#"["\u+041"]"#) == "1:3: \\u must be followed by four hexadecimal digits")
        #expect(syntaxError(#"["\u-000"]"#) == "1:3: \\u must be followed by four hexadecimal digits")
        #expect(
            syntaxError(#"["ab\x41"]"#)
                == "1:5: unknown escape sequence: \\ followed by 'x'; the escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t "
                + "and \\u followed by four hex digits"
        )
    }

    @Test func invalidUTF8InAStringIsAnErrorAtItsByte() {
        let cases: [([UInt8], String)] = [
            (Array(#"["a"#.utf8) + [0xFF] + Array(#""]"#.utf8), "1:4: invalid UTF-8 (byte 0xFF)"),
            // an overlong "/"
            (Array(#"["é"#.utf8) + [0xC0, 0xAF] + Array(#""]"#.utf8), "1:4: invalid UTF-8 (byte 0xC0)"),
            ([0x5B, 0x22, 0xED, 0xA0, 0x80, 0x22, 0x5D], "1:3: invalid UTF-8 (byte 0xED)"),  // an encoded surrogate
            ([0x5B, 0x22, 0xF4, 0x90, 0x80, 0x80, 0x22, 0x5D], "1:3: invalid UTF-8 (byte 0xF4)"),  // over U+10FFFF
            ([0x5B, 0x22, 0x80, 0x22, 0x5D], "1:3: invalid UTF-8 (byte 0x80)"),  // a stray continuation byte
            ([0x5B, 0x22, 0xE2, 0x82], "1:3: invalid UTF-8 (byte 0xE2)"),  // cut off by the end of the file
        ]
        for (bytes, expected) in cases {
            let error = syntaxError(bytes)
            #expect(
                error.map { "\($0.position.line):\($0.position.column): \($0.message)" }
                    == expected + " inside a string; save the file as UTF-8"
            )
        }
        // Well-formed multi-byte characters are kept, and count as one column each.
        #expect(
            syntaxError(#"{"ééé": "漢字😀", "x": ?}"#)
                == "1:21: expected a value (object, array, string, number, true, false or null), found '?'"
        )
    }

    @Test func controlCharactersAndNULBytes() throws {
        #expect(
            syntaxError([0x5B, 0x22, 0x61, 0x00, 0x22, 0x5D])
                .map { "\($0.position.line):\($0.position.column): \($0.message)" }
                == "1:4: control character 0x00 inside a string; write it as \\u0000 (or \\t, \\n, \\r)"
        )
        #expect(
            syntaxError("[\"a\u{1}\"]")
                == "1:4: control character 0x01 inside a string; write it as \\u0001 (or \\t, \\n, \\r)"
        )
        #expect(
            syntaxError([0x5B, 0x31, 0x2C, 0x00, 0x5D])
                .map { "\($0.position.line):\($0.position.column): \($0.message)" }
                == "1:4: expected a value (object, array, string, number, true, false or null), found character 0x00"
        )
        // An escaped NUL is a character like any other.
        #expect(try JSONParser.parse(Array(#""a\u0000b""#.utf8)).kind == .string("a\u{0}b"))
    }

    @Test func numbersFollowJSONsGrammarAndKeepTheirText() throws {
        // "0e9" is RFC 8259 JSON (FoundationEssentials 6.3.1's JSONDecoder refuses it; Vigil does not).
        let value = try JSONParser.parse(Array("[0, -0, -0.0, 0e9, 1e999999, 1e-999999, -1.5E+3, 2e-07, 10]".utf8))
        #expect(
            elements(value)
                == ["0", "-0", "-0.0", "0e9", "1e999999", "1e-999999", "-1.5E+3", "2e-07", "10"].map { .number($0) }
        )
        let huge = String(repeating: "9", count: 100_000)
        #expect(try JSONParser.parse(Array(huge.utf8)).kind == .number(huge))
        #expect(
            syntaxError("[007]")
                == "1:2: a number must not start with 0 followed by more digits (leading zeros are not JSON)"
        )
        #expect(
            syntaxError("[-01]")
                == "1:3: a number must not start with 0 followed by more digits (leading zeros are not JSON)"
        )
        #expect(syntaxError("[-]") == "1:3: a number needs digits after '-'")
        #expect(syntaxError("[1.]") == "1:4: a number needs digits after the decimal point")
        #expect(syntaxError("[1e+]") == "1:5: a number needs digits in its exponent")
        #expect(syntaxError("[.5]")?.hasPrefix("1:2: expected a value") == true)
        #expect(syntaxError("[+1]")?.hasPrefix("1:2: expected a value") == true)
        #expect(syntaxError("[NaN]")?.hasPrefix("1:2: expected a value") == true)
        #expect(syntaxError("[tru]")?.hasPrefix("1:2: expected a value") == true)
    }

    /// `[[[[…` a million deep: an error at the first level too deep, not a stack overflow.
    @Test func deepNestingIsASyntaxErrorNotAStackOverflow() throws {
        let depth = JSONParser.maximumDepth
        let message = "arrays and objects are nested more than \(depth) levels deep here; flatten the document"
        #expect(syntaxError(String(repeating: "[", count: 1_000_000)) == "1:\(depth + 1): \(message)")
        #expect(
            syntaxError(String(repeating: #"{"a":"#, count: 1_000_000)) == "1:\(5 * depth + 1): \(message)"
        )
        let deepest = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        #expect(throws: Never.self) { try JSONParser.parse(Array(deepest.utf8)) }
        #expect(syntaxError("\n " + "[" + deepest + "]") == "2:\(depth + 2): \(message)")
    }

    /// Issue 10, item 7: a one-line 400 KB array took 28 s, because every value's column was
    /// counted from the start of its line (and every key was checked against all earlier keys
    /// of its object). This parses a 4 MB one-line array and a one-line object of 200,000 keys.
    /// Linear parsing takes well under 2 s here even in a debug build on a busy machine; the
    /// quadratic parser needed about an hour for the array (16 s for 400 KB, × 10² for × 10 the
    /// length) and minutes for the object. The 60 s bound is not a benchmark: it sits more than
    /// an order of magnitude above linear and two below quadratic, so it cannot flake either way.
    @Test func parsingALongLineIsLinear() throws {
        var array: [UInt8] = [UInt8(ascii: "[")]
        var count = 0
        while array.count < 4 << 20 {
            if count > 0 { array.append(UInt8(ascii: ",")) }
            array += "\(count)".utf8
            count += 1
        }
        array.append(UInt8(ascii: "]"))
        var object: [UInt8] = [UInt8(ascii: "{")]
        for key in 0..<200_000 { object += #""k\#(key)":\#(key),"#.utf8 }
        object.append(UInt8(ascii: "}"))

        let clock = ContinuousClock()
        let elapsed = try clock.measure {
            let parsedArray = try JSONParser.parse(array)
            guard case .array(let elements) = parsedArray.kind else {
                Issue.record("not an array")
                return
            }
            #expect(elements.count == count)
            #expect(elements.last?.position == JSONValue.Position(line: 1, column: array.count - "\(count - 1)".count))
            let parsedObject = try JSONParser.parse(object)
            guard case .object(let members) = parsedObject.kind else {
                Issue.record("not an object")
                return
            }
            #expect(members.count == 200_000)
            // A 4 MB unknown key: "did you mean" compares it with no known key (too different in length).
            let error = #expect(throws: ConfigurationError.self) {
                try ConfigurationLoader<SampleConfiguration>().decode(
                    Array("{\"\(String(repeating: "x", count: 4 << 20))\": 1}".utf8),
                    file: "/etc/sample.json"
                )
            }
            #expect(
                error?.description.hasSuffix(
                    "at the top level; known keys: \"name\", \"ratio\", \"server\", \"tags\", \"verbose\""
                ) == true
            )
        }
        #expect(elapsed < .seconds(60), "parsing 4 MB on one line took \(elapsed)")
    }

    @Test func positionsCountCharactersAcrossLinesAndComments() throws {
        let text = "// é\n/* ü\n */ {\"é\": [1, \"漢\", {\"x\": true}]}"
        let value = try JSONParser.parse(Array(text.utf8))
        #expect(value.position == JSONValue.Position(line: 3, column: 5))
        guard case .object(let members) = value.kind, case .array(let elements) = members[0].value.kind else {
            Issue.record("unexpected shape")
            return
        }
        #expect(members[0].keyPosition == JSONValue.Position(line: 3, column: 6))
        #expect(elements.map(\.position.column) == [12, 15, 20])
        #expect(
            syntaxError("\u{FEFF}{\"a\": x}")
                == "1:7: expected a value (object, array, string, number, true, false or null), found 'x'"
        )
    }

    @Test func errorsAbbreviateWhatTheyEcho() {
        let key = String(repeating: "k", count: 10_000)
        #expect(
            syntaxError(#"{"\#(key)": 1 2}"#)
                == "1:\(key.count + 8): expected ',' or '}' after the value of \"\(String(repeating: "k", count: 40))…\", found '2'"
        )
    }

    /// Duplicate keys are found wherever they stand: among an object's first members (compared
    /// in place) and past them (through a set), with the second occurrence's position.
    @Test(arguments: [(3, 1), (16, 5), (17, 16), (40, 2), (40, 30), (2_000, 1_999)])
    func aDuplicateKeyIsFoundAtAnyPosition(count: Int, repeated: Int) {
        let members = (0..<count).map { "\"k\($0)\": \($0)" }.joined(separator: ",")
        let text = "{\(members),\"k\(repeated)\": 0}"
        let column = text.utf8.count - "\"k\(repeated)\": 0}".utf8.count + 1
        #expect(syntaxError(text) == "1:\(column): the key \"k\(repeated)\" appears twice in this object")
        #expect(syntaxError("{\(members)}") == nil)
    }

    /// A key with a run of combining marks longer than Unicode's stream-safe limit is refused,
    /// written or escaped: comparing or hashing such a key normalises it in quadratic time, so
    /// a 1 MiB key of them held the parsing thread for about a minute. Values are kept as they
    /// are (nothing compares them here; a state file keeps any text it was given).
    @Test func keysBeyondTheStreamSafeLimitAreRefused() throws {
        let marks = { (count: Int) in String(repeating: "\u{301}", count: count) }
        let limit = "the key starting here has more than 30 combining marks in a row"
        #expect(syntaxError(#"{"a\#(marks(30))": 1}"#) == nil)
        #expect(syntaxError(#"{"a\#(marks(31))": 1}"#)?.hasPrefix("1:2: \(limit)") == true)
        #expect(
            syntaxError(#"{"k": {"e\#(String(repeating: #"\u0301"#, count: 31))": 1}}"#)?.hasPrefix("1:8: \(limit)")
                == true
        )
        let value = try JSONParser.parse(Array(#"{"k": "x\#(marks(1_000))"}"#.utf8))
        #expect(value["k"]?.kind == .string("x" + marks(1_000)))
        // Runs broken by a starter are fine however long the key: 64 KiB of them.
        let long = String(repeating: "e" + marks(30), count: 1_000)
        let parsed = try JSONParser.parse(Array(#"{"\#(long)": 1}"#.utf8))
        guard case .object(let members) = parsed.kind else { Issue.record("not an object"); return }
        #expect(members.first?.key == long)
        // A hostile key of 2 MiB is refused at once, never hashed.
        #expect(syntaxError(#"{"a\#(marks(1 << 20))": 1}"#)?.hasPrefix("1:2: \(limit)") == true)
    }

    /// A configuration's values are compared by its `validate()`: with `.keysAndValues` they
    /// keep to the limit too, and the error points at the string.
    @Test func valuesBeyondTheStreamSafeLimitAreRefusedWhenAsked() throws {
        let marks = String(repeating: "\u{301}", count: 31)
        let text = Array("{\n  \"level\": \"i\(marks)\"\n}".utf8)
        #expect(throws: Never.self) { try JSONParser.parse(text) }
        let error = #expect(throws: JSONParser.SyntaxError.self) {
            try JSONParser.parse(text, streamSafety: .keysAndValues)
        }
        #expect(error?.description.hasPrefix("line 2, column 12: the string starting here has more than 30") == true)
        let fine = try JSONParser.parse(
            Array(#"["e\#(String(repeating: "\u{301}", count: 30))"]"#.utf8),
            streamSafety: .keysAndValues
        )
        #expect(elements(fine)?.count == 1)
    }

    /// Strings with escapes or non-ASCII text after a plain start keep every byte.
    @Test func stringsThatLeaveThePlainPathKeepTheirStart() throws {
        let value = try JSONParser.parse(Array(#"["plain", "ab\"cd", "ab\u00e9", "abé", "", "a\\"]"#.utf8))
        #expect(
            elements(value) == [
                .string("plain"), .string("ab\"cd"), .string("abé"), .string("abé"), .string(""), .string("a\\"),
            ]
        )
        #expect(
            syntaxError("[\"ab\u{01}c\"]")
                == "1:5: control character 0x01 inside a string; write it as \\u0001 (or \\t, \\n, \\r)"
        )
    }
}

/// Number conversions in ``JSONValueDecoder``: every out-of-range or inexact number is a failure
/// that names the key and the type's range, never a trap, an infinity or a silent zero.
@Suite struct JSONValueDecoderNumberTests {
    private func decode<T: Decodable>(_ type: T.Type, _ number: String) -> Result<T, JSONValueDecoder.Failure> {
        let root = JSONValue(
            .object([.init(key: "key", value: JSONValue(.number(number), position: .init(line: 1, column: 9)))])
        )
        do {
            let decoded = try JSONValueDecoder.decode([String: T].self, from: root, rejectUnknownKeys: false)
            guard let value = decoded["key"] else {
                throw JSONValueDecoder.Failure(path: [], position: .none, message: "no key")
            }
            return .success(value)
        } catch let failure as JSONValueDecoder.Failure {
            return .failure(failure)
        } catch {
            Issue.record("unexpected \(error)")
            return .failure(.init(path: [], position: .none, message: "\(error)"))
        }
    }

    private func message<T: Decodable>(_ type: T.Type, _ number: String) -> String? {
        guard case .failure(let failure) = decode(type, number) else { return nil }
        #expect(failure.path == ["key"])
        #expect(failure.position == .init(line: 1, column: 9))
        return failure.message
    }

    @Test func integersOutOfRange() {
        let int = "(-9223372036854775808 to 9223372036854775807)"
        #expect(message(Int.self, "9223372036854775808") == "9223372036854775808 is out of range \(int)")
        #expect(message(Int.self, "-9223372036854775809") == "-9223372036854775809 is out of range \(int)")
        #expect(message(Int.self, "1e400") == "1e400 is out of range \(int)")
        #expect(message(Int.self, "1e999999999999") == "1e999999999999 is out of range \(int)")
        #expect(message(Int64.self, "9.3e18") == "9.3e18 is out of range \(int)")
        #expect(message(UInt.self, "-1") == "-1 is out of range (0 to 18446744073709551615)")
        #expect(
            message(UInt64.self, "18446744073709551616")
                == "18446744073709551616 is out of range (0 to 18446744073709551615)"
        )
        #expect(message(Int32.self, "2147483648") == "2147483648 is out of range (-2147483648 to 2147483647)")
        #expect(message(Int16.self, "-32769") == "-32769 is out of range (-32768 to 32767)")
        #expect(message(Int8.self, "1.28e2") == "1.28e2 is out of range (-128 to 127)")
        #expect(message(UInt32.self, "4294967296") == "4294967296 is out of range (0 to 4294967295)")
        #expect(message(UInt16.self, "65536") == "65536 is out of range (0 to 65535)")
        #expect(message(UInt8.self, "-0.1e1") == "-0.1e1 is out of range (0 to 255)")
        let long = String(repeating: "9", count: 1000)
        #expect(message(Int.self, long) == String(repeating: "9", count: 40) + "… is out of range \(int)")
    }

    /// Issue 10, item 3: a failure printed with "\(error)" was a Swift debug dump.
    @Test func failuresReadAsTextInLogs() throws {
        let root = try JSONParser.parse(Array("{\n  \"heartbeat\": {\"count\": \"many\"}}".utf8))
        struct State: Decodable {
            struct Heartbeat: Decodable { var count: Int }
            var heartbeat: Heartbeat
        }
        let error = #expect(throws: JSONValueDecoder.Failure.self) {
            try JSONValueDecoder.decode(State.self, from: root, rejectUnknownKeys: false)
        }
        #expect(
            error.map { "\($0)" }
                == "line 2, column 26: heartbeat.count: expected a whole number, found the string \"many\""
        )
        #expect("\(JSONParser.SyntaxError(message: "m", position: .init(line: 1, column: 2)))" == "line 1, column 2: m")
    }

    @Test func integersThatAreNotWhole() {
        #expect(message(Int.self, "1.5") == "expected a whole number, found the number 1.5")
        #expect(message(Int.self, "1e-400") == "expected a whole number, found the number 1e-400")
        #expect(message(Int.self, "1e-9999999999") == "expected a whole number, found the number 1e-9999999999")
        // Double would round these to whole numbers.
        #expect(
            message(Int.self, "1.0000000000000000001")
                == "expected a whole number, found the number 1.0000000000000000001"
        )
        #expect(
            message(Int.self, "9007199254740993.5") == "expected a whole number, found the number 9007199254740993.5"
        )
    }

    @Test func wholeNumbersInAnyNotation() throws {
        #expect(try decode(Int.self, "1e2").get() == 100)
        #expect(try decode(Int.self, "100.000").get() == 100)
        #expect(try decode(Int.self, "-0").get() == 0)
        #expect(try decode(Int.self, "0e999999999999").get() == 0)
        #expect(try decode(Int.self, "1.5e1").get() == 15)
        #expect(try decode(Int.self, "12300e-2").get() == 123)
        #expect(try decode(Int.self, "9223372036854775807").get() == .max)
        #expect(try decode(Int.self, "-9.223372036854775808e18").get() == .min)
        #expect(try decode(UInt64.self, "1.8446744073709551615E19").get() == .max)
        #expect(try decode(Int.self, "9007199254740993.0").get() == 9_007_199_254_740_993)
        #expect(try decode(UInt8.self, "-0.0").get() == 0)
    }

    @Test func floatingPointOutOfRange() throws {
        let double = "is out of range (\(-Double.greatestFiniteMagnitude) to \(Double.greatestFiniteMagnitude))"
        let float = "is out of range (\(-Float.greatestFiniteMagnitude) to \(Float.greatestFiniteMagnitude))"
        let tooSmall = "is too close to zero to be represented: write 0, or a number of magnitude at least"
        #expect(message(Double.self, "1e400") == "1e400 \(double)")
        #expect(message(Double.self, "-1e400") == "-1e400 \(double)")
        #expect(message(Float.self, "1e39") == "1e39 \(float)")
        #expect(message(Double.self, "1e-400") == "1e-400 \(tooSmall) \(Double.leastNonzeroMagnitude)")
        #expect(message(Float.self, "1e-50") == "1e-50 \(tooSmall) \(Float.leastNonzeroMagnitude)")
        #expect(try decode(Double.self, "0e-400").get() == 0)
        #expect(try decode(Double.self, "-0").get().sign == .minus)
        #expect(try decode(Double.self, "4.9406564584124654e-324").get() == .leastNonzeroMagnitude)
        #expect(try decode(Double.self, "-1.5E+3").get() == -1500)
        #expect(try decode(Float.self, "0.1").get() == 0.1)
    }

    @Test func throughTheConfigurationLoader() {
        let error = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader<SampleConfiguration>().decode(
                Array(#"{"ratio": 1e400}"#.utf8),
                file: "/etc/sample.json"
            )
        }
        #expect(
            error?.description
                == "/etc/sample.json:1:11: ratio: 1e400 is out of range (\(-Double.greatestFiniteMagnitude) to \(Double.greatestFiniteMagnitude))"
        )
    }
}

@Suite struct JSONValueEncoderTests {
    struct Sample: Encodable {
        struct Inner: Encodable { var value: Double }
        var inner: Inner
    }

    @Test(arguments: [Double.infinity, -.infinity, .nan])
    func nonFiniteNumbersAreRefusedWithTheirKey(number: Double) {
        let error = #expect(throws: JSONValueEncoder.Failure.self) {
            try JSONValueEncoder.encode(Sample(inner: .init(value: number)))
        }
        #expect(error?.description == "cannot store \(number) at \"inner.value\": JSON has no infinity or NaN")
        #expect(throws: JSONValueEncoder.Failure.self) { try JSONValueEncoder.encode([Float.infinity]) }
        // In an array, the element's index names it; a value at the top level is "the top level".
        struct Listed: Encodable { var values: [[Double]] }
        let listed = #expect(throws: JSONValueEncoder.Failure.self) {
            try JSONValueEncoder.encode(Listed(values: [[1], [2, number]]))
        }
        #expect(listed?.description == "cannot store \(number) at \"values.1.1\": JSON has no infinity or NaN")
        let top = #expect(throws: JSONValueEncoder.Failure.self) { try JSONValueEncoder.encode(number) }
        #expect(top?.description == "cannot store \(number) at the top level: JSON has no infinity or NaN")
    }

    /// Every integer type is a JSON number with all its digits, its extremes included (each is
    /// named in the encoder, no longer found through a cast to `any FixedWidthInteger`).
    @Test func everyIntegerTypeIsANumber() throws {
        struct Integers: Encodable {
            var int = Int.min
            var int8 = Int8.min
            var int16 = Int16.max
            var int32 = Int32.min
            var int64 = Int64.max
            var uint = UInt.max
            var uint8 = UInt8.max
            var uint16 = UInt16.max
            var uint32 = UInt32.max
            var uint64 = UInt64.max
        }
        let text = JSONWriter.write(try JSONValueEncoder.encode(Integers()), pretty: false)
        let expected = [
            "\"int\":\(Int.min)", "\"int8\":-128", "\"int16\":32767", "\"int32\":-2147483648",
            "\"int64\":\(Int64.max)", "\"uint\":\(UInt.max)", "\"uint8\":255", "\"uint16\":65535",
            "\"uint32\":4294967295", "\"uint64\":\(UInt64.max)",
        ]
        #expect(text == "{" + expected.joined(separator: ",") + "}")
    }

    /// What a terminal would act on is escaped, not only what JSON requires: DEL, C1 (CSI
    /// U+009B), U+2028 and the bidirectional override; other text (é, 日本, an emoji, right-to-left
    /// letters) stays as it is, and the output reads back to the same string (a value planted in
    /// a status file came out of `status --json` raw: a helper's finding).
    @Test func whatATerminalWouldActOnIsEscapedAndReadsBack() throws {
        let text = "a\u{7f}b\u{9b}31mc\u{2028}d\u{202e}e\u{2066}f é日本😀 שלום \"\\\n"
        let written = JSONWriter.write(JSONValue(.string(text)), pretty: false)
        #expect(written == #""a\u007fb\u009b31mc\u2028d\u202ee\u2066f é日本😀 שלום \"\\\n""#)
        #expect(try JSONParser.parse(Array(written.utf8)).kind == .string(text))
        #expect(JSONWriter.write(JSONValue(.string("plain é 日本")), pretty: false) == "\"plain é 日本\"")
    }

    /// The state file's reader refuses a key beyond the stream-safe limit, so the encoder never
    /// writes one: a file it wrote always reads back.
    @Test func keysTheReaderWouldRefuseAreNotEncoded() {
        let key = "e" + String(repeating: "\u{301}", count: 31)
        let error = #expect(throws: JSONValueEncoder.Failure.self) {
            try JSONValueEncoder.encode(["clients": [key: 1]])
        }
        #expect(error?.description.contains("more than 30 combining marks in a row") == true)
        #expect(throws: Never.self) { try JSONValueEncoder.encode(["e" + String(repeating: "\u{301}", count: 30): 1]) }
    }

    /// Past 16 members a key is found through an index: a large dictionary encodes in linear
    /// time, every entry kept; a key encoded again replaces its value in place.
    @Test func largeObjectsKeepEveryMemberAndALaterWriteWins() throws {
        struct Repeating: Encodable {
            struct Key: CodingKey {
                var stringValue: String
                var intValue: Int? { nil }
                init(stringValue: String) { self.stringValue = stringValue }
                init?(intValue: Int) { nil }
            }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: Key.self)
                for index in 0..<40 { try container.encode(index, forKey: Key(stringValue: "k\(index)")) }
                try container.encode(-1, forKey: Key(stringValue: "k3"))
                try container.encode(-2, forKey: Key(stringValue: "k30"))
            }
        }
        let text = JSONWriter.write(try JSONValueEncoder.encode(Repeating()), pretty: false)
        var expected = (0..<40).map { #""k\#($0)":\#($0)"# }
        expected[3] = #""k3":-1"#
        expected[30] = #""k30":-2"#
        #expect(text == "{" + expected.joined(separator: ",") + "}")
        let large = Dictionary(uniqueKeysWithValues: (0..<20_000).map { ("key\($0)", $0) })
        guard case .object(let members) = try JSONValueEncoder.encode(large).kind else {
            Issue.record("not an object")
            return
        }
        #expect(members.count == 20_000)
        #expect(Set(members.map(\.key)) == Set(large.keys))
    }

    @Test func finiteNumbersRoundTrip() throws {
        let numbers: [Double] = [
            0, -0.0, 1, -1.5, 1e-7, 1e20, 1e300, .greatestFiniteMagnitude, .leastNonzeroMagnitude, 123456789.125,
        ]
        let text = JSONWriter.write(try JSONValueEncoder.encode(numbers), pretty: false)
        let decoded = try JSONValueDecoder.decode(
            [Double].self,
            from: try JSONParser.parse(Array(text.utf8)),
            rejectUnknownKeys: false
        )
        #expect(decoded == numbers)
    }
}

/// How ``JSONValueDecoder`` finds keys: small objects are searched in place, large ones through
/// an index; either way every entry is found and a key the type never asked for is an unknown
/// key.
@Suite struct JSONValueDecoderKeyTests {
    struct Settings: Decodable, Equatable {
        var name: String
        var limits: [String: Int]
    }

    /// Asks for the keys `a0` … `a(count − 1)`, each optional.
    struct Wide: Decodable {
        static let count = 20
        struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }
        var values: [Int?]

        init(from decoder: any Decoder) throws {
            let keys = try decoder.container(keyedBy: Key.self)
            values = try (0..<Self.count).map { try keys.decodeIfPresent(Int.self, forKey: Key(stringValue: "a\($0)")) }
        }
    }

    private func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        try JSONValueDecoder.decode(type, from: try JSONParser.parse(Array(text.utf8)), rejectUnknownKeys: true)
    }

    @Test(arguments: [3, 16, 17, 20_000])
    func everyEntryOfADictionary(count: Int) throws {
        let entries = (0..<count).map { "\"k\($0)\": \($0)" }.joined(separator: ", ")
        let settings = try decode(Settings.self, #"{"limits": {\#(entries)}, "name": "b"}"#)
        #expect(
            settings
                == Settings(name: "b", limits: Dictionary(uniqueKeysWithValues: (0..<count).map { ("k\($0)", $0) }))
        )
    }

    @Test(arguments: [2, Wide.count])
    func anUnknownKeyAmongKnownOnesIsNamed(known: Int) throws {
        let members = (0..<known).map { "\"a\($0)\": \($0)" }.joined(separator: ", ")
        let wide = try decode(Wide.self, "{\(members)}")
        #expect(wide.values == (0..<Wide.count).map { $0 < known ? $0 : nil })
        #expect {
            _ = try decode(Wide.self, #"{\#(members), "a\#(Wide.count)x": 1}"#)
        } throws: { error in
            (error as? JSONValueDecoder.Failure)?.message.hasPrefix(#"unknown key "a\#(Wide.count)x" at the top level"#)
                == true
        }
    }

    struct Item: Decodable { var name: String }

    /// An unknown key is named in every element of a long array of objects: the asked-keys
    /// records past the first ones are kept in a dictionary.
    @Test(arguments: [0, 15, 16, 17, 299])
    func anUnknownKeyInAnyElementOfALongArray(at bad: Int) throws {
        let items = (0..<300).map { $0 == bad ? #"{"name": "x", "nmae": 1}"# : #"{"name": "x"}"# }
        #expect {
            _ = try decode([Item].self, "[\(items.joined(separator: ","))]")
        } throws: { error in
            (error as? JSONValueDecoder.Failure)?.path == ["\(bad)", "nmae"]
        }
        #expect(
            try decode([Item].self, "[\(Array(repeating: #"{"name": "x"}"#, count: 300).joined(separator: ","))]").count
                == 300
        )
    }
}

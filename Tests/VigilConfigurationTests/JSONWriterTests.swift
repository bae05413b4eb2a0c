import Testing
import VigilConfiguration

/// The pretty text's size against the compact text's, whatever the nesting. Before, every level
/// was indented: arrays nested 250 deep, 100 KB of them, came out as 25 MB (a state file at its
/// checkpoint; a status file through `status --json`).
@Suite struct JSONWriterTests {
    private func parse(_ text: String) throws -> JSONValue { try JSONParser.parse(Array(text.utf8)) }

    /// Nested `depth` arrays deep around `inner`: `[[…inner…]]`.
    private func nested(_ depth: Int, _ inner: String = "") -> String {
        String(repeating: "[", count: depth) + inner + String(repeating: "]", count: depth)
    }

    /// The first eight levels are indented, a container deeper than that goes on its line,
    /// compactly (no space after a colon there either).
    @Test func theFirstEightLevelsAreIndentedAndDeeperOnesWrittenOnOneLine() throws {
        let value = try parse(#"{"a": [1, {"b": "# + nested(5, #"{"c": [2, 3]}"#) + "}, []]}")
        #expect(
            JSONWriter.write(value) == """
                {
                  "a": [
                    1,
                    {
                      "b": [
                        [
                          [
                            [
                              [
                                {"c":[2,3]}
                              ]
                            ]
                          ]
                        ]
                      ]
                    },
                    []
                  ]
                }

                """
        )
        #expect(JSONWriter.write(value, pretty: false) == #"{"a":[1,{"b":[[[[[{"c":[2,3]}]]]]]},[]]}"#)
    }

    /// Pretty text is at most `2 × indentedDepth + 3` times the compact text for shapes that
    /// make the most of indentation; `compact(_:limit:)` tells its exact size in the same pass;
    /// both read back as the same document.
    @Test(arguments: [
        // The review's file: arrays nested 250 deep (25 MB from 100 KB before).
        Array(repeating: String(repeating: "[", count: 250) + String(repeating: "]", count: 250), count: 50)
            .joined(separator: ","),
        // A one-element array at each of the indented levels, side by side.
        Array(repeating: String(repeating: "[", count: 7) + "[1]" + String(repeating: "]", count: 7), count: 500)
            .joined(separator: ","),
        // Short members at the deepest indented level.
        String(repeating: "[", count: 7) + Array(repeating: #"{"":1}"#, count: 500).joined(separator: ",")
            + String(repeating: "]", count: 7),
        // A long flat list of small numbers.
        Array(repeating: "1", count: 5000).joined(separator: ","),
    ])
    func prettyTextStaysWithinAConstantFactorOfTheCompactText(elements: String) throws {
        let value = try parse("{\"o\": [" + elements + "]}")
        let compact = JSONWriter.bytes(value, pretty: false)
        let pretty = JSONWriter.bytes(value)
        #expect(pretty.count <= (2 * JSONWriter.indentedDepth + 3) * compact.count)
        let measured = try #require(JSONWriter.compact(value, limit: .max))
        #expect(measured.bytes == compact)
        #expect(measured.prettyCount == pretty.count)
        #expect(JSONWriter.bytes(try JSONParser.parse(pretty), pretty: false) == compact, "reads back the same")
    }

    /// With a limit, writing stops once the text is longer: `nil`, whichever the string, member
    /// or element that crossed it; the text itself when it fits to the byte.
    @Test func aLimitStopsTheWriterPastIt() throws {
        let value = try parse(#"{"key": ["a long string of text", 12345, {"inner": true}]}"#)
        for pretty in [false, true] {
            let full = JSONWriter.bytes(value, pretty: pretty)
            #expect(JSONWriter.bytes(value, pretty: pretty, limit: full.count) == full)
            for limit in [0, 1, 8, 20, full.count / 2, full.count - 1] {
                #expect(JSONWriter.bytes(value, pretty: pretty, limit: limit) == nil, "limit \(limit)")
            }
        }
        let compact = JSONWriter.bytes(value, pretty: false)
        #expect(JSONWriter.compact(value, limit: compact.count)?.bytes == compact)
        #expect(JSONWriter.compact(value, limit: compact.count - 1) == nil)
        let huge = JSONValue(.array([JSONValue(.string(String(repeating: "x", count: 1 << 20)))]))
        #expect(JSONWriter.bytes(huge, pretty: true, limit: 1000) == nil)
    }
}

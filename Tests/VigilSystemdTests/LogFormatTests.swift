import Logging
import Testing
import VigilPlatform
import VigilSystemd

@Suite struct JournalFieldNameTests {
    @Test(arguments: [
        ("sl-service", "SL_SERVICE"), ("http.status", "HTTP_STATUS"), ("requestID", "REQUESTID"),
        ("_private", "PRIVATE"), ("__x", "X"), ("2fa", "F_2FA"), ("", "FIELD"), ("---", "FIELD"),
        ("MESSAGE_ID", "MESSAGE_ID"), ("größe", "GR__E"), ("a b", "A_B"),
        (String(repeating: "k", count: 80), String(repeating: "K", count: 64)),
    ])
    func sanitises(key: String, field: String) {
        #expect(JournalFieldName.sanitize(key) == field)
    }
}

@Suite struct StderrFormatTests {
    @Test(arguments: [
        (Logger.Level.trace, "<7>"), (.debug, "<7>"), (.info, "<6>"), (.notice, "<5>"), (.warning, "<4>"),
        (.error, "<3>"), (.critical, "<2>"),
    ])
    func prefixesThePriority(level: Logger.Level, prefix: String) {
        let line = StderrLogHandler.line(
            format: .syslogPrefixed,
            label: "vigild",
            level: level,
            message: "hi",
            metadata: [:],
            time: ""
        )
        #expect(line == prefix + "hi")
    }

    @Test func prefixedLinesKeepOneEntryPerLine() {
        let line = StderrLogHandler.line(
            format: .syslogPrefixed,
            label: "vigild",
            level: .error,
            message: "first\nsecond",
            metadata: ["b": "2", "a": "1"],
            time: ""
        )
        #expect(line == "<3>first\\nsecond a=1 b=2")
    }

    @Test func terminalLinesAreReadable() {
        let plain = StderrLogHandler.line(
            format: .terminal(colors: false),
            label: "vigild",
            level: .warning,
            message: "disk almost full",
            metadata: ["path": "/var"],
            time: "2026-11-21 10:00:00.000"
        )
        #expect(plain == "2026-11-21 10:00:00.000 warning vigild: disk almost full path=/var")
        let coloured = StderrLogHandler.line(
            format: .terminal(colors: true),
            label: "vigild",
            level: .error,
            message: "x",
            metadata: [:],
            time: "T"
        )
        #expect(coloured == "T \u{1B}[31merror\u{1B}[0m vigild: x")
    }

    @Test func terminalTimeIsLocalTimeToTheMillisecond() {
        var now = time(nil)
        var parts = tm()
        localtime_r(&now, &parts)
        let time = Array(StderrLogHandler.localTime().utf8)
        let shape = Array("0000-00-00 00:00:00.000".utf8)
        #expect(time.count == shape.count)
        for (byte, expected) in zip(time, shape) {
            if expected == UInt8(ascii: "0") {
                #expect((UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte))
            } else {
                #expect(byte == expected)
            }
        }
        let year = Int(String(decoding: time.prefix(4), as: UTF8.self)) ?? 0
        #expect(
            year - Int(parts.tm_year + 1900) <= 1 && year >= Int(parts.tm_year + 1900),
            "a new year may begin in between"
        )
    }

    @Test func theLevelIsSharedAndAdjustableAtRunTime() {
        let control = LogLevelControl(.info)
        let handler = StderrLogHandler(label: "a", format: .syslogPrefixed, levelControl: control)
        let journal = JournalLogHandler(label: "b", identifier: "vigild", levelControl: control)
        control.level = .debug
        #expect(handler.logLevel == .debug && journal.logLevel == .debug)
        var copy = handler
        copy.logLevel = .error
        #expect(journal.logLevel == .error)
    }
}

@Suite struct MessageIDTests {
    @Test func idsAreDistinct128BitHex() {
        let ids = LifecycleMessageID.allCases.map(\.rawValue)
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { $0.count == 32 && $0.allSatisfy(\.isHexDigit) && $0 == $0.lowercased() })
    }
}

@Suite struct JournalEntryTests {
    private func fields(
        _ metadata: Logger.Metadata,
        message: Logger.Message = "hello",
        error: (any Error)? = nil
    ) -> [String] {
        var event = LogEvent(
            level: .warning,
            message: message,
            metadata: nil,
            source: "VigilTests",
            file: "Vigil/Thing.swift",
            function: "run()",
            line: 42
        )
        event.error = error
        return JournalEntry.fields(event: event, label: "vigild.worker", identifier: "vigild", metadata: metadata)
    }

    @Test func carriesTheStandardFields() {
        #expect(
            fields([:], message: "line one\nline two") == [
                "MESSAGE=line one\nline two", "PRIORITY=4", "SYSLOG_IDENTIFIER=vigild", "CODE_FILE=Vigil/Thing.swift",
                "CODE_LINE=42", "CODE_FUNC=run()", "SWIFT_LOG_LABEL=vigild.worker", "SWIFT_LOG_SOURCE=VigilTests",
            ]
        )
    }

    @Test func sanitisesFlattensAndResolvesCollisions() {
        let extra = fields([
            "sl-service": "http",
            "request": ["id": "7", "peer": ["addr": "::1"]],
            "tags": ["a", "b"],
            "message": "would overwrite MESSAGE",
            "MESSAGE_ID": "61ece635e54942e1b9c1dd26c92678c0",
            "sl_service": "second",
        ]).dropFirst(8)
        #expect(
            Array(extra) == [
                "MESSAGE_ID=61ece635e54942e1b9c1dd26c92678c0",
                "MESSAGE_2=would overwrite MESSAGE",
                "REQUEST_ID=7",
                "REQUEST_PEER_ADDR=::1",
                "SL_SERVICE=http",
                "SL_SERVICE_2=second",
                "TAGS_0=a",
                "TAGS_1=b",
            ]
        )
    }

    @Test func multiLineValuesLongNamesAndCollisionsSurviveTheNativeFraming() {
        let long = String(repeating: "k", count: 70)
        let extra = fields([
            long: "first",
            long.uppercased(): "second\nline",
            "x": [String(repeating: "n", count: 70): "nested"],
        ]).dropFirst(8)
        #expect(
            Array(extra) == [
                String(repeating: "K", count: 64) + "=second\nline",
                String(repeating: "K", count: 61) + "_2=first",
                "X_" + String(repeating: "N", count: 62) + "=nested",
            ]
        )
    }

    @Test func attachesTheError() {
        struct Boom: Error, CustomStringConvertible { var description = "boom" }
        #expect(fields([:], error: Boom()).last == "SWIFT_LOG_ERROR=boom")
    }
}

@Suite struct StderrEscapingRulesTests {
    /// The rule as Unicode states it: general category Cc, the line and paragraph separators,
    /// the bidirectional embeddings, overrides and isolates (UAX #9), and the backslash.
    private func reference(_ scalar: Unicode.Scalar) -> String {
        switch scalar {
        case "\\": return "\\\\"
        case "\n": return "\\n"
        case "\r": return "\\r"
        case "\t": return "\\t"
        default:
            let bidirectional =
                (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
            guard
                scalar.properties.generalCategory == .control || scalar.value == 0x2028 || scalar.value == 0x2029
                    || bidirectional
            else { return String(scalar) }
            let hex = String(scalar.value, radix: 16, uppercase: true)
            return scalar.value < 0x80 ? "\\x" + (hex.count < 2 ? "0" + hex : hex) : "\\u{\(hex)}"
        }
    }

    @Test func everyScalarIsEscapedExactlyWhenItIsAControlCharacter() {
        let scalars = (0..<0x3100).compactMap(Unicode.Scalar.init) + ["\u{FEFF}", "\u{1F600}", "\u{10FFFF}"]
        // Before, inside and after the 8-byte words the scan skips over.
        for scalar in scalars {
            for (before, after) in [("a", "b"), ("sixteen bytes…", "and a tail past a word")] {
                let text = before + String(scalar) + after
                #expect(StderrLogHandler.escaped(text) == before + reference(scalar) + after, "U+\(scalar.value)")
            }
        }
    }

    @Test func cleanTextComesBackUnchanged() {
        for text in [
            "", "plain", "größe ✓ 日本語", "\u{A0}\u{2027}\u{202F}\u{20AC}\u{600}\u{2065}\u{200F}\u{61C}",
            "<6>not a prefix mid-line",
        ] {
            #expect(StderrLogHandler.escaped(text) == text)
        }
    }

    @Test func metadataKeysValuesAndErrorsAreEscapedToo() {
        struct Forged: Error, CustomStringConvertible { var description = "x\n<0>y" }
        let line = StderrLogHandler.line(
            format: .terminal(colors: false),
            label: "a\u{1B}b",
            level: .info,
            message: "m",
            metadata: ["k\te": .stringConvertible(7), "list": ["1\r", "2"]],
            error: Forged(),
            time: "T"
        )
        #expect(line == #"T info a\x1Bb: m k\te=7 list=["1\\r", "2"] error=x\n<0>y"#)
    }
}

@Suite struct LogMetadataTests {
    @Test func laterSourcesWinAndASingleSourceIsPassedThrough() {
        let provider = Logger.MetadataProvider { ["provided": "p", "shared": "provider"] }
        let merged = LogMetadata.merged(
            handler: ["handler": "h", "shared": "handler"],
            provider: provider,
            explicit: ["shared": "explicit"]
        )
        #expect(merged == ["handler": "h", "provided": "p", "shared": "explicit"])
        #expect(LogMetadata.merged(handler: [:], provider: provider, explicit: nil) == provider.get())
        #expect(LogMetadata.merged(handler: ["a": "1"], provider: nil, explicit: [:]) == ["a": "1"])
        #expect(LogMetadata.merged(handler: [:], provider: nil, explicit: ["b": "2"]) == ["b": "2"])
        #expect(LogMetadata.merged(handler: ["a": "1"], provider: nil, explicit: ["a": "2"]) == ["a": "2"])
    }

    @Test func entriesAreVisitedInKeyOrder() {
        var keys: [String] = []
        LogMetadata.forEachSorted(["b": "2", "c": "3", "a": "1"]) { key, _ in keys.append(key) }
        #expect(keys == ["a", "b", "c"])
    }
}

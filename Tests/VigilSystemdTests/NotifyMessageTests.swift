import Testing
import VigilLifecycle
import VigilSystemd

/// Every notification fits in one systemd datagram, whatever text a reason carries (issue 10,
/// item 5: a 5,000-character rejection reason made `STATUS=`+`READY=1` too big, systemd dropped
/// it and `systemctl reload` hung).
@Suite struct NotifyMessageTests {
    /// Texts a rejection reason or a listener could put into `STATUS=`.
    static let hostileTexts: [String] = [
        String(repeating: "x", count: 5_000),
        "logLevel: " + String(repeating: "x", count: 5_000) + " is not a log level",
        String(repeating: "\u{1}", count: 5_000),
        String(repeating: "é", count: 3_000),
        String(repeating: "😀", count: 3_000),
        "e" + String(repeating: "\u{301}", count: 5_000),
        String(repeating: "a\u{1B}[31m\r\n\u{85}\u{2028}\t", count: 1_000),
        String(repeating: "x", count: 1_023) + "é",
        String(repeating: "x", count: NotifyMessage.maximumStatusBytes),
        "",
    ]

    /// Every message kind, with the widest value it can carry.
    static func widest(status: String) -> [NotifyMessage] {
        [
            .ready, .reloading(monotonicMicroseconds: .max), .stopping, .status(status), .errno(.min),
            .extendTimeout(microseconds: .max), .watchdog, .watchdogTrigger,
        ]
    }

    @Test(arguments: hostileTexts) func statusIsBoundedOnACharacterBoundary(text: String) {
        let wire = NotifyMessage.status(text).wireText
        #expect(wire.hasPrefix("STATUS="))
        let value = wire.dropFirst("STATUS=".count)
        #expect(value.utf8.count <= NotifyMessage.maximumStatusBytes)
        #expect(!value.contains { $0.isNewline }, "one line")
        #expect(!value.unicodeScalars.contains { $0.properties.generalCategory == .control })
        #expect(String(validating: Array(value.utf8), as: UTF8.self) != nil)
        if text.utf8.count > NotifyMessage.maximumStatusBytes { #expect(value.hasSuffix("…")) }
    }

    /// The byte scan that lets a clean status line through untouched finds exactly the scalars
    /// that are escaped: every scalar of the first planes, alone and between other text.
    @Test func theByteScanFindsExactlyTheControls() {
        for value in UInt32(0)..<0x3000 {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let bidirectional =
                (0x202A...0x202E).contains(value) || (0x2066...0x2069).contains(value)
            let control =
                scalar.properties.generalCategory == .control || value == 0x2028 || value == 0x2029 || bidirectional
            let alone = String(Character(scalar))
            #expect(NotifyMessage.containsControl(alone.utf8) == control, "U+\(String(value, radix: 16))")
            #expect(NotifyMessage.containsControl(("é…" + alone + "x").utf8) == control)
        }
        #expect(NotifyMessage.status("Reloading…").wireText == "STATUS=Reloading…")
        #expect(NotifyMessage.status("a\u{2028}b\u{85}c\u{9B}").wireText == #"STATUS=a b c\u{9b}"#)
        // A right-to-left override would show the text after it reversed in `systemctl status`.
        #expect(NotifyMessage.status("ok \u{202E}gnp.exe").wireText == #"STATUS=ok \u{202e}gnp.exe"#)
    }

    @Test func shortTextIsKeptAndControlsAreEscaped() {
        #expect(NotifyMessage.status("Running (generation 2)").wireText == "STATUS=Running (generation 2)")
        #expect(NotifyMessage.status("a\nb\tc").wireText == "STATUS=a b c")
        #expect(NotifyMessage.status("x\u{1B}[31m\u{0}<0>y").wireText == #"STATUS=x\u{1b}[31m\u{0}<0>y"#)
        #expect(NotifyMessage.status("x\u{9B}y").wireText == #"STATUS=x\u{9b}y"#)
        let cut = NotifyMessage.status(String(repeating: "x", count: 5_000)).wireText
        #expect(cut == "STATUS=" + String(repeating: "x", count: NotifyMessage.maximumStatusBytes - 3) + "…")
    }

    /// Every combination the mediator sends (and any other subset of the message kinds, in any
    /// order, with the widest values) is one datagram under systemd's limit.
    @Test(arguments: hostileTexts) func everyCombinationFitsOneDatagram(text: String) {
        let kinds = Self.widest(status: text)
        for mask in 1..<(1 << kinds.count) {
            let messages = kinds.indices.filter { mask & (1 << $0) != 0 }.map { kinds[$0] }
            for order in [messages, messages.reversed()] {
                let datagrams = NotifyMessage.datagrams(order)
                #expect(datagrams == [NotifyMessage.datagram(order)])
                #expect(datagrams[0].utf8.count <= NotifyMessage.maximumDatagramBytes)
            }
        }
    }

    /// Even a list that cannot fit in one datagram is split between messages, in order, and
    /// never into a datagram systemd would drop.
    @Test func manyStatusesSplitBetweenMessages() {
        let long = String(repeating: "x", count: 5_000)
        let messages: [NotifyMessage] = Array(repeating: .status(long), count: 9) + [.ready]
        let datagrams = NotifyMessage.datagrams(messages)
        #expect(datagrams.count > 1)
        #expect(datagrams.allSatisfy { $0.utf8.count <= NotifyMessage.maximumDatagramBytes })
        #expect(datagrams.joined(separator: "\n") == NotifyMessage.datagram(messages))
        #expect(datagrams.last?.hasSuffix("\nREADY=1") == true)
    }

    @Test func notifyMessagesSpellSdNotify() {
        #expect(
            NotifyMessage.datagram([.reloading(monotonicMicroseconds: 42), .status("a\nb")])
                == "RELOADING=1\nMONOTONIC_USEC=42\nSTATUS=a b"
        )
        #expect(
            NotifyMessage.datagram([.stopping, .errno(2), .extendTimeout(microseconds: 5)])
                == "STOPPING=1\nERRNO=2\nEXTEND_TIMEOUT_USEC=5"
        )
        #expect(
            NotifyMessage.datagram([.watchdog, .watchdogTrigger, .ready]) == "WATCHDOG=1\nWATCHDOG=trigger\nREADY=1"
        )
    }
}

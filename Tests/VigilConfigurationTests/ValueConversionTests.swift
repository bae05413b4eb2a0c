import Testing
import VigilConfiguration
import VigilPOSIX

@Suite struct DisplayTextTests {
    @Test func quotedEscapesControlCharactersAndCutsLongValues() {
        #expect(DisplayText.quoted("info") == "\"info\"")
        #expect(
            DisplayText.quoted("x\n<0>sshd[1]: FORGED\u{1b}[31m\t\"\\") == #""x\n<0>sshd[1]: FORGED\u{1b}[31m\t\"\\""#
        )
        let long = String(repeating: "x", count: 5000)
        #expect(DisplayText.quoted(long) == "\"" + String(repeating: "x", count: 64) + "\"… (5000 bytes)")
        #expect(DisplayText.escapingControlCharacters("a\u{85}b\u{2028}") == #"a\u{85}b\u{2028}"#)
    }

    @Test func aConfigurationErrorIsOneLineWhateverItsParts() {
        let error = ConfigurationError(file: "/etc/x\n.json", keyPath: "a\rb", reason: "bad\u{7f}")
        #expect(error.description == #"/etc/x\n.json: a\rb: bad\u{7f}"#)
    }
}

import Testing
import Vigil
import VigildCore

/// vigild's ranges, as `check-config` and a reload apply them.
@Suite struct VigildConfigurationTests {
    private func reason(_ text: String) -> String? {
        do {
            _ = try ConfigurationLoader<VigildConfiguration>().decode(Array(text.utf8), file: "vigild.json")
            return nil
        } catch {
            return "\(error.keyPath): \(error.reason)"
        }
    }

    @Test(arguments: [
        "0", "0.1", "0.2", "0.3", "5", "86400",
    ])
    func intervalsInRangeAreAccepted(value: String) {
        #expect(
            reason(#"{"heartbeat": {"interval": \#(value)}, "persistence": {"checkpointInterval": \#(value)}}"#) == nil
        )
    }

    @Test(arguments: [
        ("9999999999999999999", "1e+19"), ("9223372036855", "9223372036855.0"), ("86400.001", "86400.001"),
        ("-1", "-1.0"), ("-0", "-0, which is not 0"), ("1e-9", "1e-09"), ("1e-6", "1e-06"), ("0.09", "0.09"),
    ])
    func intervalsOutOfRangeNameTheKeyTheRangeAndTheValue(value: String, found: String) {
        #expect(
            reason(#"{"persistence": {"checkpointInterval": \#(value)}}"#)
                == "persistence.checkpointInterval: must be 0 (checkpoints only on SIGUSR1 and at stop) "
                + "or a number of seconds from 0.1 to 86400 (found \(found))"
        )
        #expect(
            reason(#"{"heartbeat": {"interval": \#(value)}}"#)
                == "heartbeat.interval: must be 0 (no heartbeat) or a number of seconds from 0.1 to 86400 (found \(found))"
        )
    }

    /// A number beyond Double's range never becomes `inf`: the decoder refuses it, naming the key.
    @Test func aNumberBeyondDoubleIsRefusedByTheDecoder() {
        #expect(
            reason(#"{"heartbeat": {"interval": 1e400}}"#)
                == "heartbeat.interval: 1e400 is out of range (-1.7976931348623157e+308 to 1.7976931348623157e+308)"
        )
    }

    @Test func theHeartbeatMessageIsOneToA1024BytesWithoutControlCharacters() {
        #expect(reason(#"{"heartbeat": {"message": "\#(String(repeating: "é", count: 512))"}}"#) == nil)
        #expect(
            reason(#"{"heartbeat": {"message": "\#(String(repeating: "x", count: 1025))"}}"#)
                == "heartbeat.message: must be 1 to 1024 bytes of UTF-8 (found 1025 bytes: \"\(String(repeating: "x", count: 64))\"… (1025 bytes))"
        )
        #expect(
            reason(#"{"heartbeat": {"message": ""}}"#)
                == "heartbeat.message: must be 1 to 1024 bytes of UTF-8 (found 0 bytes: \"\")"
        )
        #expect(
            reason(#"{"heartbeat": {"message": "a\nPRIORITY=0"}}"#)
                == #"heartbeat.message: must not contain control characters such as line breaks, tabs or escapes, nor bidirectional overrides (U+202A–U+202E, U+2066–U+2069) (found "a\nPRIORITY=0")"#
        )
        // Nothing visible: a heartbeat that logs an empty-looking line (helper 51).
        for invisible in [" ", #"\u200B"#, #"\uFEFF\u200E"#, #"\u061C \u200F"#] {
            #expect(
                reason(#"{"heartbeat": {"message": "\#(invisible)"}}"#)?.hasPrefix(
                    "heartbeat.message: must hold a visible character"
                ) == true,
                "\(invisible)"
            )
        }
        #expect(reason(#"{"heartbeat": {"message": "\u200Balive"}}"#) == nil)
        #expect(reason(#"{"heartbeat": {"message": "ok ✓"}}"#) == nil)
    }

    @Test func aLongLogLevelGivesAShortEscapedError() {
        let error = reason(#"{"logLevel": "\#(String(repeating: "x", count: 5000))"}"#)
        #expect(
            error
                == "logLevel: must be one of trace, debug, info, notice, warning, error, critical (found \"\(String(repeating: "x", count: 64))\"… (5000 bytes))"
        )
        #expect(
            reason(#"{"logLevel": "x\n<0>sshd[1]: FORGED"}"#)
                == #"logLevel: must be one of trace, debug, info, notice, warning, error, critical (found "x\n<0>sshd[1]: FORGED")"#
        )
    }

    @Test func fractionalSecondsNeverTrap() {
        #expect(Duration.seconds(fractional: 0.3) == .milliseconds(300))
        #expect(Duration.seconds(fractional: 9_999_999_999_999_999_999) == .microseconds(Int64.max))
        #expect(Duration.seconds(fractional: -.infinity) == .microseconds(Int64.min))
        #expect(Duration.seconds(fractional: .nan) == .zero)
    }
}

import Testing
import VigilTesting

/// systemd/vigild.service is exactly what `vigild systemd-unit` prints (from the declarations in
/// Sources/vigild/Vigild.swift): the shipped unit and the library's generator cannot drift apart.
/// To change the unit, change the generator (Sources/Vigil/SystemdUnit.swift) or vigild's
/// declarations, then `vigild systemd-unit > systemd/vigild.service`.
@Suite struct ShippedUnitTests {
    @Test func theShippedUnitIsTheGeneratorsOutputByteForByte() async throws {
        let (status, printed) = try await ManualTests.vigild(["systemd-unit"])
        #expect(status == 0)
        let shipped = try #require(TextFile.read(ManualTests.project + "/systemd/vigild.service"))
        #expect(
            printed == shipped,
            "systemd/vigild.service differs from `vigild systemd-unit`; regenerate it with `vigild systemd-unit > systemd/vigild.service`"
        )
    }

    @Test func theSocketUnitListensWhereItIsTold() async throws {
        let (status, printed) = try await ManualTests.vigild(["systemd-unit", "--socket", "/run/vigild/vigild.sock"])
        #expect(status == 0)
        #expect(printed.contains("\n[Socket]\nListenStream=/run/vigild/vigild.sock\nFileDescriptorName=vigild\n"))
    }
}

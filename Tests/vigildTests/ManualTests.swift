import Glibc
import Testing
import VigilTesting

/// The manual pages (man/vigild.8, man/vigild.json.5) and the bash completion
/// (packaging/vigild.bash-completion) describe the vigild that is built: every option of every
/// command's `--help`, and every configuration key the binary knows, must appear in them.
@Suite struct ManualTests {
    static let project: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path
    }()

    /// Runs vigild with `arguments`; returns its exit status and everything it printed.
    static func vigild(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        let directory = VigildBinary.temporaryDirectory()
        let process = try DaemonProcess(
            executable: VigildBinary.path,
            arguments: arguments,
            outputPath: directory + "/output.log"
        )
        let status = try await process.waitForExit()
        return (status, TextFile.read(directory + "/output.log") ?? "")
    }

    /// `--name` tokens in a text.
    static func options(in text: String) -> Set<String> {
        var found: Set<String> = []
        var rest = Substring(text)
        while let range = rest.firstRange(of: "--") {
            let name = rest[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" }
            if let first = name.first, first.isLetter { found.insert("--" + name) }
            rest = rest[range.upperBound...]
        }
        return found
    }

    /// The manual page's text with roff's escaped hyphens (`\-`) as plain ones.
    static func page(_ name: String) throws -> String {
        try #require(TextFile.read(project + "/man/" + name), "man/\(name) is missing")
            .replacing("\\-", with: "-")
    }

    @Test(arguments: [[], ["run"], ["check-config"], ["reload"], ["status"], ["systemd-unit"]])
    func everyOptionInTheHelpIsInTheManualAndTheCompletion(command: [String]) async throws {
        let (status, help) = try await Self.vigild(command + ["--help"])
        #expect(status == 0)
        let options = Self.options(in: help)
        #expect(options.contains("--help"))
        let manual = try Self.page("vigild.8")
        let completion = try #require(TextFile.read(Self.project + "/packaging/vigild.bash-completion"))
        for option in options.sorted() {
            #expect(manual.contains(option), "\(option) of `vigild \(command.joined()) --help` is not in man/vigild.8")
            #expect(completion.contains(option), "\(option) is not in packaging/vigild.bash-completion")
        }
        for command in command where !command.isEmpty {
            #expect(manual.contains(".B \(command)") || manual.contains(".BI \"\(command)"), "\(command) has no entry")
        }
    }

    /// Every key the binary knows, found by asking `check-config` about an unknown key at each
    /// level (its error lists the known keys), must be documented in vigild.json(5).
    @Test func everyConfigurationKeyIsInTheManual() async throws {
        let manual = try Self.page("vigild.json.5")
        let directory = VigildBinary.temporaryDirectory()
        var pending: [[String]] = [[]]
        var leaves: [String] = []
        while let path = pending.popLast() {
            // {"a": {"b": {"vigil-unknown-key": 1}}}
            var document = "{\"vigil-unknown-key\": 1}"
            for key in path.reversed() { document = "{\"\(key)\": \(document)}" }
            TextFile.write(directory + "/probe.json", document)
            let (_, output) = try await Self.vigild(["check-config", directory + "/probe.json"])
            guard let known = output.firstRange(of: "known keys: ") else {
                leaves.append(path.joined(separator: "."))  // not an object: a value
                continue
            }
            let names = output[known.upperBound...].prefix { $0 != "\n" }
                .split(separator: ",").map { String($0.filter { $0 != " " && $0 != "\"" }) }
            #expect(!names.isEmpty)
            pending += names.map { path + [$0] }
        }
        #expect(leaves.count >= 4, "found \(leaves)")
        for key in leaves {
            #expect(manual.contains(".BR \(key) "), "\(key) is not documented in man/vigild.json.5")
        }
    }
}

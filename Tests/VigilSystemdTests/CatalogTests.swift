import Glibc
import Testing
import VigilSystemd
import VigilTesting

/// systemd/vigil.catalog, the journal message catalog every Vigil daemon can install: one entry
/// per ``LifecycleMessageID``, each with the headers `journalctl -x` shows, and a file that
/// journalctl itself accepts.
@Suite struct CatalogTests {
    static let path: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<path.lastIndex(of: "/")!]) }
        return path + "/systemd/vigil.catalog"
    }()

    /// The entries: id → text (headers and body).
    static func entries() throws -> [String: String] {
        let text = try #require(TextFile.read(path), "\(path) is missing")
        var entries: [String: String] = [:]
        var current: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("-- ") {
                current = String(line.dropFirst(3))
                entries[current!] = ""
            } else if let id = current {
                entries[id, default: ""] += line + "\n"
            }
        }
        return entries
    }

    @Test func everyMessageIDHasAnEntryWithSubjectDefinedByAndDocumentation() throws {
        let entries = try Self.entries()
        #expect(Set(entries.keys) == Set(LifecycleMessageID.allCases.map(\.rawValue)))
        for id in LifecycleMessageID.allCases {
            let entry = entries[id.rawValue] ?? ""
            #expect(entry.hasPrefix("Subject: "), "\(id): no Subject")
            #expect(entry.contains("\nDefined-By: vigil\n"), "\(id): no Defined-By")
            #expect(entry.contains("\nDocumentation: man:@SYSLOG_IDENTIFIER@(8)"), "\(id): no Documentation")
            #expect(entry.split(separator: "\n").count >= 5, "\(id): says too little")
        }
    }

    /// `journalctl --update-catalog` compiles it into a root of its own, and lists every id.
    @Test(.enabled(if: access("/bin/journalctl", X_OK) == 0, "needs journalctl (systemd)"))
    func journalctlCompilesIt() async throws {
        let root = temporaryDirectory("vigil-catalog")
        let script = """
            set -e
            mkdir -p '\(root)/usr/lib/systemd/catalog' '\(root)/var/lib/systemd/catalog'
            cp '\(Self.path)' '\(root)/usr/lib/systemd/catalog/vigil.catalog'
            journalctl --root='\(root)' --update-catalog
            journalctl --root='\(root)' --list-catalog
            """
        let process = try DaemonProcess(executable: "/bin/sh", arguments: ["-c", script], outputPath: root + "/out")
        #expect(try await process.waitForExit() == 0)
        let listed = TextFile.read(root + "/out") ?? ""
        for id in LifecycleMessageID.allCases {
            #expect(listed.contains("\(id.rawValue) vigil: "), "\(id) not listed:\n\(listed)")
        }
    }
}

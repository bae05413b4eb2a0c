import Glibc
import Testing
import VigilSystemd
import VigilTesting

/// Credentials read from a real directory standing in for `$CREDENTIALS_DIRECTORY`, under the
/// configuration's file rules; `CREDENTIALS_DIRECTORY` itself is read in a child (the probe).
@Suite struct CredentialsTests {
    @Test func readsTheBytesAndTheTextOfACredential() throws {
        let directory = temporaryDirectory()
        writeFile(directory + "/api-token", "s3cret\n")
        let credentials = Credentials(directory: directory)
        #expect(try credentials.read("api-token") == Array("s3cret\n".utf8))
        #expect(try credentials.readString("api-token") == "s3cret")
        writeFile(directory + "/two-lines", "a\n\n")
        #expect(try credentials.readString("two-lines") == "a\n", "only one trailing newline goes")
    }

    @Test func aMissingCredentialNamesTheUnitLinesThatSupplyIt() throws {
        let directory = temporaryDirectory()
        let error = try #require(throws: SystemdError.self) {
            try Credentials(directory: directory).read("api-token")
        }
        #expect(error.code == .missing)
        #expect(error.name == "api-token")
        #expect(error.message.hasPrefix("credential 'api-token' is missing: \(directory)/api-token does not exist; "))
        for line in ["LoadCredential=api-token:", "LoadCredentialEncrypted=api-token:", "SetCredential=api-token:"] {
            #expect(error.message.contains(line), "\(error.message)")
        }
        let unset = try #require(throws: SystemdError.self) { try Credentials(directory: nil).read("api-token") }
        #expect(unset.code == .missing)
        #expect(unset.message.contains("CREDENTIALS_DIRECTORY is not set"), "\(unset.message)")
        #expect(unset.message.contains("LoadCredential=api-token:"), "\(unset.message)")
    }

    /// The configuration's rules: a FIFO is refused at once (an open without O_NONBLOCK would
    /// wait for a writer for ever), as are a directory and a file over 1 MiB.
    @Test func aCredentialMustBeASmallRegularFile() throws {
        let directory = temporaryDirectory()
        let credentials = Credentials(directory: directory)
        #expect(mkfifo(directory + "/fifo", 0o600) == 0)
        let fifo = try #require(throws: SystemdError.self) { try credentials.read("fifo") }
        #expect(fifo.code == .unreadable)
        #expect(fifo.message.contains("it is a FIFO (named pipe), not a regular file"), "\(fifo.message)")
        #expect(mkdir(directory + "/folder", 0o700) == 0)
        #expect(throws: SystemdError.self) { try credentials.read("folder") }
        writeFile(directory + "/big", String(repeating: "x", count: Credentials.sizeLimit + 1))
        let big = try #require(throws: SystemdError.self) { try credentials.read("big") }
        #expect(big.code == .unreadable)
        #expect(big.errno == EFBIG)
        writeFile(directory + "/exact", String(repeating: "x", count: Credentials.sizeLimit))
        #expect(try credentials.read("exact").count == Credentials.sizeLimit)
    }

    @Test(arguments: ["", ".", "..", "../etc/passwd", "a/b", "a\u{0}b", String(repeating: "n", count: 256)])
    func aNameSystemdCannotGiveIsRefused(name: String) throws {
        let directory = temporaryDirectory()
        let error = try #require(throws: SystemdError.self) { try Credentials(directory: directory).read(name) }
        #expect(error.code == .invalidName)
    }

    @Test func aRelativeDirectoryIsRefusedAndBytesThatAreNotTextSaySo() throws {
        let relative = try #require(throws: SystemdError.self) { try Credentials(directory: "run/creds").read("x") }
        #expect(relative.code == .unreadable)
        #expect(relative.message.contains("not an absolute path"), "\(relative.message)")
        let directory = temporaryDirectory()
        let descriptor = open(directory + "/binary", O_WRONLY | O_CREAT, 0o600)
        let bytes: [UInt8] = [0xFF, 0xFE]
        #expect(write(descriptor, bytes, 2) == 2)
        close(descriptor)
        #expect(try Credentials(directory: directory).read("binary") == [0xFF, 0xFE])
        let text = try #require(throws: SystemdError.self) {
            try Credentials(directory: directory).readString("binary")
        }
        #expect(text.code == .notUTF8)
    }

    /// `Credentials.readString(_:)` reads `CREDENTIALS_DIRECTORY` of the process (the probe's).
    @Test func theProcessEnvironmentNamesTheDirectory() async throws {
        let directory = temporaryDirectory()
        writeFile(directory + "/token", "abc\n")
        #expect(
            try await NotifyProbe.run(
                ["credential=token", "credential=other"],
                environment: ["CREDENTIALS_DIRECTORY": directory]
            )
                == [
                    "credential token=abc",
                    "error code=missing: credential 'other' is missing: \(directory)/other does not exist; supply it in the "
                        + "service's unit with LoadCredential=other:/path/to/file, LoadCredentialEncrypted=other:/path/to/"
                        + "file.cred (made by systemd-creds encrypt) or SetCredential=other:VALUE",
                ]
        )
    }
}

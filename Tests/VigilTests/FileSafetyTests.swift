import Glibc
import Logging
import Synchronization
import Testing
import Vigil
import VigilTesting

/// Makes a FIFO at `path`; `body` runs against it. Should `body` block in `open` (the defect
/// these tests guard against), a writer opens the FIFO after a few seconds so that the test
/// fails on its assertions instead of hanging the suite.
private func withFIFO<T>(at path: String, _ body: () throws -> T) rethrows -> T {
    #expect(mkfifo(path, 0o600) == 0)
    let rescued = Mutex(false)
    DetachedThread.run {
        sleep(5)
        let writer = open(path, O_WRONLY | O_NONBLOCK)
        if writer >= 0 {
            rescued.withLock { $0 = true }
            close(writer)
        }
    }
    let result = try body()
    #expect(!rescued.withLock { $0 }, "the call blocked on the FIFO until a writer came")
    return result
}

private func monotonicNow() -> ContinuousClock.Instant { ContinuousClock.now }

@Suite struct FileSafetyTests {
    /// A `readdir` entry is only as long as its name: it is read up to its NUL, not copied as
    /// the whole 256-byte `d_name`, which ran past the end of `readdir`'s buffer into an unmapped
    /// page and crashed the test process in CI (the clean-up of test directories; the same code
    /// read `/proc/PID/fdinfo` for `reload` and `status`). Here the entry ends where a page that
    /// may not be read begins.
    @Test func aDirectoryEntryIsReadOnlyUpToItsName() throws {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let memory = try #require(mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
        try #require(memory != MAP_FAILED)
        defer { munmap(memory, 2 * page) }
        try #require(mprotect(memory.advanced(by: page), page, PROT_NONE) == 0)
        let offset = try #require(MemoryLayout<dirent>.offset(of: \dirent.d_name))
        let length = (offset + 3 + 7) & ~7  // "ab", its NUL, 8-byte aligned as the kernel lays entries
        let entry = memory.advanced(by: page - length)
        memset(entry, 0, length)
        entry.storeBytes(of: UInt8(ascii: "a"), toByteOffset: offset, as: UInt8.self)
        entry.storeBytes(of: UInt8(ascii: "b"), toByteOffset: offset + 1, as: UInt8.self)
        #expect(FileSystem.entryName(UnsafePointer(entry.assumingMemoryBound(to: dirent.self))) == "ab")
    }

    @Test func aFIFOIsRefusedWithoutBlockingNamingItsKind() throws {
        let path = temporaryDirectory() + "/fifo"
        let started = monotonicNow()
        let error = withFIFO(at: path) {
            #expect(throws: SystemError.self) { try FileSystem.read(path) }
        }
        // Before the rescuing writer (5 s): a loaded machine may take more than a second.
        #expect(ContinuousClock.now - started < .seconds(4))
        #expect(error?.description == "cannot read \(path): it is a FIFO (named pipe), not a regular file")
    }

    @Test func aDirectoryAndADeviceAreRefusedNamingTheirKind() throws {
        let directory = temporaryDirectory()
        #expect(
            "\((#expect(throws: SystemError.self) { try FileSystem.read(directory) })!)"
                == "cannot read \(directory): it is a directory, not a regular file"
        )
        #expect(
            "\((#expect(throws: SystemError.self) { try FileSystem.read("/dev/null") })!)"
                == "cannot read /dev/null: it is a character device, not a regular file"
        )
    }

    @Test func aFileOverTheCapIsRefusedNamingTheCap() throws {
        let path = temporaryDirectory() + "/big.json"
        writeFile(path, String(repeating: " ", count: (1 << 20) + 1))
        let error = #expect(throws: SystemError.self) {
            try FileSystem.read(path, limit: FileSystem.configurationLimit)
        }
        #expect(error?.reason == "it is larger than the limit of 1 MiB for this file")
        #expect(try FileSystem.read(path).count == (1 << 20) + 1, "under the state cap of 16 MiB")
    }

    @Test func aSymbolicLinkIsFollowedOnlyWhenAsked() throws {
        let directory = temporaryDirectory()
        writeFile(directory + "/target", "{}")
        #expect(symlink(directory + "/target", directory + "/link") == 0)
        #expect(try FileSystem.read(directory + "/link") == Array("{}".utf8))
        let error = #expect(throws: SystemError.self) {
            try FileSystem.read(directory + "/link", followSymlinks: false)
        }
        #expect(error?.reason == "it is a symbolic link; this file must be a regular file, not a link")
    }

    @Test func writeAtomicallyNeverWritesThroughALinkPlantedAtTheTemporaryName() throws {
        let directory = temporaryDirectory()
        let victim = directory + "/victim"
        writeFile(victim, "precious")
        #expect(symlink(victim, directory + "/status.json.tmp") == 0)
        try FileSystem.writeAtomically(Array("new".utf8), to: directory + "/status.json", durable: false)
        #expect(readFile(victim) == "precious")
        #expect(readFile(directory + "/status.json") == "new")
        #expect(!FileSystem.isSymbolicLink(directory + "/status.json"))
    }
}

@Suite struct ConfigurationFileSafetyTests {
    @Test func aFIFOAsTheConfigurationIsRefusedPromptly() throws {
        let path = temporaryDirectory() + "/sample.json"
        let error = withFIFO(at: path) {
            #expect(throws: ConfigurationError.self) {
                try ConfigurationLoader<SampleConfiguration>().load(path: path)
            }
        }
        #expect(error?.description == "\(path): cannot read the file: it is a FIFO (named pipe), not a regular file")
    }

    @Test func aConfigurationOverOneMebibyteIsRefused() throws {
        let path = temporaryDirectory() + "/sample.json"
        writeFile(path, "{}" + String(repeating: " ", count: 1 << 20))
        let error = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader<SampleConfiguration>().load(path: path)
        }
        #expect(error?.reason == "cannot read the file: it is larger than the limit of 1 MiB for this file")
    }

    @Test func aSymbolicLinkToARegularFileIsFine() throws {
        let directory = temporaryDirectory()
        writeFile(directory + "/real.json", #"{ "name": "linked" }"#)
        #expect(symlink(directory + "/real.json", directory + "/sample.json") == 0)
        let listener = ConfigurationListener<SampleConfiguration>(
            source: .file(directory + "/sample.json", required: false)
        )
        #expect(try listener.load().name == "linked")
    }

    /// Only "nothing at the optional path" means the embedded default.
    @Test(arguments: ["dangling", "loop", "directory"])
    func anOptionalFileThatCannotBeReadIsAnErrorNotTheDefault(kind: String) throws {
        let directory = temporaryDirectory()
        let path = directory + "/sample.json"
        switch kind {
        case "dangling": #expect(symlink(directory + "/gone.json", path) == 0)
        case "loop": #expect(symlink(path, path) == 0)
        default: #expect(mkdir(path, 0o700) == 0)
        }
        let listener = ConfigurationListener<SampleConfiguration>(source: .file(path, required: false))
        let error = #expect(throws: ConfigurationError.self) { try listener.load() }
        let expected =
            switch kind {
            case "dangling": "cannot read the file: it is a symbolic link whose target does not exist"
            case "loop": "cannot read the file: Too many levels of symbolic links"
            default: "cannot read the file: it is a directory, not a regular file"
            }
        #expect(error?.reason == expected)
    }

    @Test func anOptionalFileInAMissingDirectoryIsAnError() throws {
        let path = temporaryDirectory() + "/absent/sample.json"
        let listener = ConfigurationListener<SampleConfiguration>(source: .file(path, required: false))
        #expect(throws: ConfigurationError.self) { try listener.load() }
    }

    @Test func aFileInForceThatIsDeletedRejectsTheReloadAndAnAbsentOneStaysTheDefault() async throws {
        let directory = temporaryDirectory()
        let path = directory + "/sample.json"
        writeFile(path, #"{ "name": "from the file" }"#)
        let configuration = ConfigurationListener<SampleConfiguration>(source: .file(path, required: false))
        try await withRunningDaemon(listeners: [configuration]) { daemon in
            let current = { daemon.group.context.values[CurrentConfiguration<SampleConfiguration>.self]?.name }
            #expect(current() == "from the file")
            unlink(path)
            daemon.group.requestReload()
            let records = try await daemon.observer.kinds.wait {
                $0.contains { if case .reloadRejected = $0 { true } else { false } }
            }
            guard case .reloadRejected(let rejection, 1, _) = records.last else {
                Issue.record("expected a rejection, got \(records)")
                return
            }
            #expect(
                rejection.reason
                    == "\(path): the file no longer exists; the running configuration stays in force; write {} to run on the defaults"
            )
            #expect(current() == "from the file")

            writeFile(path, "{}")
            daemon.group.requestReload()
            try await daemon.observer.kinds.wait {
                $0.contains { if case .reloadApplied(2, _) = $0 { true } else { false } }
            }
            #expect(current() == "sample", "{} runs on the defaults")
        }

        // Started without a file: a reload without one keeps the default and is no error.
        unlink(path)
        let optional = ConfigurationListener<SampleConfiguration>(source: .file(path, required: false))
        try await withRunningDaemon(listeners: [optional]) { daemon in
            daemon.group.requestReload()
            try await daemon.observer.kinds.wait {
                $0.contains { if case .reloadApplied(2, _) = $0 { true } else { false } }
            }
        }
    }
}

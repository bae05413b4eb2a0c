import Glibc
import Testing
import VigilConfiguration
import VigilPOSIX
import VigilPersistence
import VigilTesting

/// A listener's value with a range: `count` from 0 to 2^53 − 1.
private func validCount(_ counter: Counter) throws(InvalidValue) {
    guard (0...(1 << 53) - 1).contains(counter.count) else {
        throw InvalidValue(["count"], "expected a whole number from 0 to 9007199254740991, found \(counter.count)")
    }
}

@Suite struct StateSafetyTests {
    /// Before: a state directory anyone could write in (or another user's) was used as it
    /// was: a planted state.json was restored, a planted state.json.tmp/ made every checkpoint
    /// fail. Now the listener's start fails naming the directory and what is wrong.
    @Test func aStateDirectoryOthersCanWriteInIsRefused() throws {
        let directory = temporaryDirectory()
        chmod(directory, 0o777)
        let error = #expect(throws: SystemError.self) { try StateStore.checkOwnership(of: directory) }
        #expect(
            error?.description.contains("anyone may write in it (mode 777); chmod go-w it") == true,
            "\(String(describing: error))"
        )
        // Group-writable: a group member could plant state.json as well (a helper's attack).
        chmod(directory, 0o770)
        let group = #expect(throws: SystemError.self) { try StateStore.checkOwnership(of: directory) }
        #expect(group?.description.contains("its group (gid ") == true, "\(String(describing: group))")
        #expect(group?.description.contains("may write in it (mode 770); chmod go-w it") == true)
        chmod(directory, 0o700)
        #expect(throws: Never.self) { try StateStore.checkOwnership(of: directory) }
        if geteuid() == 0 {
            chown(directory, 65_534, 65_534)
            let foreign = #expect(throws: SystemError.self) { try StateStore.checkOwnership(of: directory) }
            #expect(
                foreign?.description.contains("it is owned by uid 65534, not by this process (uid 0) or root") == true
            )
            chown(directory, 0, 0)
            // A link another user made, in a directory anyone may write: refused, whatever it
            // leads to (here the caller's own good directory); the caller's own link is followed.
            let shared = temporaryDirectory("vigil-shared")
            chmod(shared, 0o1777)
            let planted = shared + "/state"
            symlink(directory, planted)
            lchown(planted, 65_534, 65_534)
            let linked = #expect(throws: SystemError.self) { try StateStore.checkOwnership(of: planted) }
            #expect(
                linked?.description.contains("it is a symbolic link made by uid 65534, not by this process (uid 0)")
                    == true,
                "\(String(describing: linked))"
            )
            // The same link above the directory: refused as well (a reviewer's case).
            let above = shared + "/theirs"
            symlink(FileSystem.parent(of: directory), above)
            lchown(above, 65_534, 65_534)
            let through = above + "/" + String(directory.split(separator: "/").last ?? "")
            let far = #expect(throws: SystemError.self) { try StateStore.checkOwnership(of: through) }
            #expect(
                far?.description.contains("\(above), on its path, is a symbolic link made by uid 65534") == true,
                "\(String(describing: far))"
            )
            lchown(planted, 0, 0)
            lchown(above, 0, 0)
            #expect(throws: Never.self) { try StateStore.checkOwnership(of: planted) }
            #expect(throws: Never.self) { try StateStore.checkOwnership(of: through) }
        }
    }

    /// A directory above the state directory that another user owns, or that others may write
    /// in without the sticky bit, is refused: that user could rename the state directory away
    /// and put their own in its place after the check (its files are opened by path: a
    /// reviewer's point). A sticky directory (`/tmp`) is fine.
    @Test func aParentOthersCanChangeIsRefused() throws {
        let parent = temporaryDirectory() + "/parent"
        let directory = parent + "/state"
        mkdir(parent, 0o755)
        mkdir(directory, 0o700)
        #expect(throws: Never.self) { try StateStore.checkOwnership(of: directory) }
        chmod(parent, 0o777)
        let open = #expect(throws: SystemError.self) { try StateStore.checkOwnership(of: directory) }
        #expect(
            open?.description
                == "cannot use as the state directory \(directory): \(parent), above it, may be written by anyone (mode 777, no sticky bit): that user could rename the state directory away and put their own in its place; use a directory whose parents only root or this user may change",
            "\(String(describing: open))"
        )
        chmod(parent, 0o775)
        let group = #expect(throws: SystemError.self) { try StateStore.checkOwnership(of: directory) }
        #expect(
            group?.description.contains("may be written by its group (gid ") == true,
            "\(String(describing: group))"
        )
        chmod(parent, 0o1777)
        #expect(throws: Never.self) { try StateStore.checkOwnership(of: directory) }
        chmod(parent, 0o755)
        if geteuid() == 0 {
            chown(parent, 65_534, 65_534)
            let foreign = #expect(throws: SystemError.self) { try StateStore.checkOwnership(of: directory) }
            #expect(
                foreign?.description.contains(
                    "\(parent), above it, is owned by uid 65534, not by this process (uid 0) or root"
                ) == true,
                "\(String(describing: foreign))"
            )
            // The same parent reached through the caller's own link: refused as well.
            let link = temporaryDirectory() + "/link"
            symlink(parent, link)
            let resolved = #expect(throws: SystemError.self) { try StateStore.checkOwnership(of: link + "/state") }
            #expect(resolved?.description.contains("\(link), above it, is owned by uid 65534") == true)
            // A link of the caller's to the state directory itself: the path it resolves to is checked.
            let direct = temporaryDirectory() + "/state"
            symlink(directory, direct)
            let through = #expect(throws: SystemError.self) { try StateStore.checkOwnership(of: direct) }
            #expect(through?.description.contains("\(parent), above it, is owned by uid 65534") == true)
            chown(parent, 0, 0)
        }
    }

    /// Before: a write lease another process held on state.json (the open fails with EAGAIN)
    /// counted as corruption: the file was moved aside and the daemon started from empty state.
    /// Now the open fails, the file stays, and a later open reads it.
    @Test func aFileThatCannotBeReadForNowIsLeftInPlace() async throws {
        let directory = temporaryDirectory()
        let path = directory + "/state.json"
        writeFile(path, #"{"formatVersion": 1, "heartbeat": {"count": 5000}}"#)
        let ready = directory + "/leased"
        // A real other process holds the lease (a lease is broken only by other processes).
        let holder = try DaemonProcess(
            executable: "/usr/bin/python3",
            arguments: [
                "-c",
                // F_SETLEASE (1024) with F_WRLCK: an open by anyone else is refused (EAGAIN) for
                // a non-blocking open, and held back otherwise.
                "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); "
                    + "fcntl.fcntl(fd, 1024, fcntl.F_WRLCK); open(sys.argv[2], 'w').close(); time.sleep(60)",
                path, ready,
            ]
        )
        try await poll(until: "the lease is held") { access(ready, F_OK) == 0 }
        let error = #expect(throws: StateStoreError.self) { try StateStore(path: path) }
        #expect(error?.code == .unreadable)
        #expect(
            error?.description.contains("another process holds a lease or lock on it") == true,
            "\(String(describing: error))"
        )
        #expect(access(path + ".corrupt-1", F_OK) != 0, "nothing was moved aside")
        holder.send(SIGKILL)
        _ = try await holder.waitForExit()
        let store = try StateStore(path: path)
        #expect(try store.value(Counter.self, forKey: "heartbeat") == Counter(count: 5000))
    }

    @Test func parseIsPureAndReportsWhereAndWhat() throws {
        #expect(try StateStore.parse(Array(#"{"formatVersion": 1, "a": 1, "b": [2]}"#.utf8)).keys == ["a", "b"])
        let cases: [(String, String)] = [
            ("[1]", "line 1, column 1: expected an object ({ … }) at the top level, found an array"),
            (#"{"a": 1}"#, "line 1, column 1: formatVersion: the key is missing (expected a whole number from 1 to 1)"),
            (
                #"{"formatVersion": "1"}"#,
                "line 1, column 19: formatVersion: expected a whole number from 1 to 1, found the string \"1\""
            ),
            (
                #"{"formatVersion": 99999999999999999999}"#,
                "line 1, column 19: formatVersion: expected a whole number from 1 to 1, found the number 99999999999999999999"
            ),
            (
                #"{"formatVersion": 0}"#,
                "line 1, column 19: formatVersion: expected a whole number from 1 to 1, found the number 0"
            ),
        ]
        for (text, expected) in cases {
            let error = #expect(throws: StateStoreError.self) { try StateStore.parse(Array(text.utf8)) }
            #expect(error?.code == .invalidFile)
            #expect(error?.description == expected, "\(text)")
        }
        #expect(throws: StateStoreError.self) { try StateStore.parse(Array(#"{"formatVersion": 2}"#.utf8)) }
    }

    @Test func aValueThatDoesNotDecodeIsMovedAsideWithTheOriginalBytesAndAReadableReason() throws {
        let path = temporaryDirectory() + "/state.json"
        let original = "{ \"formatVersion\": 1, \"heartbeat\": { \"count\": \"many\" }, \"other\": [1] }"
        writeFile(path, original)
        let store = try StateStore(path: path)
        #expect(store.restored.movedAside == nil, "the file parses")
        let error = #expect(throws: StateStoreError.self) { try store.value(Counter.self, forKey: "heartbeat") }
        #expect(error?.code == .invalidEntry)
        #expect(
            error?.description
                == "\(path):1:47: heartbeat.count: expected a whole number, found the string \"many\"; moved the file to \(path).corrupt-1"
        )
        #expect(readFile(path + ".corrupt-1") == original, "the original bytes are kept")
        #expect(access(path, F_OK) != 0)
        #expect(try store.value(Counter.self, forKey: "heartbeat") == nil, "the key starts from empty state")
        #expect(try store.value([Int].self, forKey: "other") == [1], "other keys are kept")
        #expect(try store.checkpoint())
        #expect(readFile(path) == "{\n  \"formatVersion\": 1,\n  \"other\": [\n    1\n  ]\n}\n")
    }

    @Test func aValueOutOfItsListenersRangeIsMovedAsideToo() throws {
        let path = temporaryDirectory() + "/state.json"
        let original = #"{"formatVersion":1,"heartbeat":{"count":9223372036854775807}}"#
        writeFile(path, original)
        let store = try StateStore(path: path)
        let error = #expect(throws: StateStoreError.self) {
            try store.value(Counter.self, forKey: "heartbeat", validate: validCount)
        }
        #expect(error?.keyPath == "heartbeat.count")
        #expect(error?.reason == "expected a whole number from 0 to 9007199254740991, found 9223372036854775807")
        #expect(error?.movedAside == path + ".corrupt-1")
        #expect(readFile(path + ".corrupt-1") == original)
    }

    @Test func aRejectedValueAfterACheckpointKeepsTheBytesReadAtOpen() throws {
        let path = temporaryDirectory() + "/state.json"
        let original = #"{"formatVersion":1,"heartbeat":{"count":-1}}"#
        writeFile(path, original)
        let store = try StateStore(path: path)
        try store.checkpoint(force: true)
        #expect(throws: StateStoreError.self) {
            try store.value(Counter.self, forKey: "heartbeat", validate: validCount)
        }
        #expect(readFile(path + ".corrupt-1") == original)
        try store.checkpoint()
        #expect(readFile(path) == "{\n  \"formatVersion\": 1\n}\n")
    }

    @Test func aFIFOAsTheStateFileIsMovedAsideWithoutBlocking() throws {
        let path = temporaryDirectory() + "/state.json"
        #expect(mkfifo(path, 0o600) == 0)
        // Were the open to block, this writer (after 5 s) would release it and the kind check fail.
        DetachedThread.run {
            sleep(5)
            let writer = open(path + ".corrupt-1", O_WRONLY | O_NONBLOCK)
            if writer >= 0 { close(writer) }
            let stuck = open(path, O_WRONLY | O_NONBLOCK)
            if stuck >= 0 { close(stuck) }
        }
        let started = ContinuousClock.now
        let store = try StateStore(path: path)
        // Before the rescuing writer (5 s): a loaded machine may take more than a second.
        #expect(ContinuousClock.now - started < .seconds(4))
        #expect(store.restored.movedAside == path + ".corrupt-1")
        #expect(store.restored.problem == "it is a FIFO (named pipe), not a regular file")
    }

    @Test func aSymbolicLinkAsTheStateFileIsMovedAsideNotFollowed() throws {
        let directory = temporaryDirectory()
        let path = directory + "/state.json"
        writeFile(directory + "/elsewhere.json", #"{"formatVersion": 1, "heartbeat": {"count": 5}}"#)
        #expect(symlink(directory + "/elsewhere.json", path) == 0)
        let store = try StateStore(path: path)
        #expect(store.restored.movedAside == path + ".corrupt-1")
        #expect(store.restored.problem == "it is a symbolic link; this file must be a regular file, not a link")
        #expect(FileSystem.isSymbolicLink(path + ".corrupt-1"))
        #expect(try store.value(Counter.self, forKey: "heartbeat") == nil)
    }

    @Test func aStateFileOverSixteenMebibytesIsMovedAside() throws {
        let path = temporaryDirectory() + "/state.json"
        let descriptor = open(path, O_WRONLY | O_CREAT, 0o600)
        #expect(ftruncate(descriptor, (16 << 20) + 1) == 0)
        close(descriptor)
        let store = try StateStore(path: path)
        #expect(store.restored.problem == "it is larger than the limit of 16 MiB for this file")
    }

    /// Before: a state file whose `<path>.corrupt-1` would be over PATH_MAX made the search for an
    /// unused aside name ask `lstat` for ever (`ENAMETOOLONG` each time: 5 s of CPU on a helper
    /// thread, then "the file system did not answer (a hung mount?)"). Now the open fails at once,
    /// naming the name it could not use and why; the file stays where it was.
    @Test func aStateFileThatCannotBeMovedAsideFailsAtOnceSayingWhy() throws {
        var directory = temporaryDirectory()
        let wanted = 4090 - "/state.json".utf8.count  // the aside name then has 4100 bytes
        while directory.utf8.count < wanted {
            directory += "/" + String(repeating: "d", count: min(200, wanted - directory.utf8.count - 1))
            try #require(mkdir(directory, 0o700) == 0, "mkdir: errno \(errno)")
        }
        let path = directory + "/state.json"
        try #require(path.utf8.count == 4090)
        writeFile(path, "not JSON")
        let error = #expect(throws: SystemError.self) { try StateStore(path: path) }
        #expect(error?.errno == ENAMETOOLONG)
        #expect(error?.path == path + ".corrupt-1")
        #expect(
            error?.description.hasPrefix("cannot move the unreadable state file aside as \(directory.prefix(200))")
                == true
        )
        #expect(readFile(path) == "not JSON", "the file stays")
    }
}

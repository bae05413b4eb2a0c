import Glibc
import Testing
import Vigil
import VigilTesting

/// Two real vigild processes on one set of directories (issue 21 item 3), and directories
/// made whatever the umask (item 11, issue 23 item 5).
@Suite(.serialized) struct InstanceProcessTests {
    static func run(
        _ directory: String,
        state: String? = nil,
        runtime: String? = nil,
        output: String
    ) throws
        -> DaemonProcess
    {
        try DaemonProcess(
            executable: VigildBinary.path,
            arguments: [
                "run", "--state-directory", state ?? directory + "/state", "--runtime-directory",
                runtime ?? directory + "/run",
            ],
            outputPath: directory + "/" + output
        )
    }

    /// The file's bytes and inode: "touched" is either changing.
    static func fingerprint(_ path: String) -> String {
        var info = stat()
        guard stat(path, &info) == 0 else { return "absent" }
        return "\(info.st_ino) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec) " + (TextFile.read(path) ?? "")
    }

    /// Before: the second started anyway (or failed late) and rewrote status.json first, so
    /// `reload` refused the live daemon and `status` said no vigild ran; two on one state
    /// directory both checkpointed and the saved count went back.
    @Test func aSecondVigildOnTheSameDirectoriesExitsNamingTheFirstAndTouchesNothing() async throws {
        let socket = try FakeNotifySocket()
        // No heartbeat: the live daemon's own heartbeat rewrites status.json every 5 s by default,
        // and the test (7.5 s in a loaded CI run) then saw a change the second daemon did not make;
        // nor periodic checkpoints.
        let directory = VigildBinary.temporaryDirectory()
        let configuration = directory + "/vigild.json"
        TextFile.write(
            configuration,
            "{ \"heartbeat\": { \"interval\": 0 }, \"persistence\": { \"checkpointInterval\": 0 } }\n"
        )
        let (first, _) = try await VigildBinary.start(
            socket: socket,
            arguments: ["--config", configuration],
            directory: directory
        )
        let status = directory + "/run/status.json"
        let state = directory + "/state/state.json.running"
        // The daemon writes "running" just after READY=1: the file settles then.
        try await poll(until: "the live daemon's status.json says running") {
            TextFile.read(status)?.contains("\"state\": \"running\"") == true
        }
        let before = (Self.fingerprint(status), Self.fingerprint(state))

        for (name, runtime) in [("same", directory + "/run"), ("state-only", directory + "/other-run")] {
            let second = try Self.run(directory, runtime: runtime, output: name + ".log")
            #expect(try await second.waitForExit() == 1, "\(name)")
            let output = TextFile.read(directory + "/" + name + ".log") ?? ""
            #expect(output.contains("pid \(first.pid) holds it: another daemon runs on"), "\(name): \(output)")
            #expect(Self.fingerprint(status) == before.0, "\(name): the live daemon's status.json was rewritten")
            #expect(Self.fingerprint(state) == before.1, "\(name): the live daemon's marker was rewritten")
        }
        #expect(!FileSystem.exists(directory + "/other-run/status.json"), "the refused daemon wrote a status")

        // The live daemon is still the one `status` and `reload` reach.
        let client = try DaemonProcess(
            executable: VigildBinary.path,
            arguments: ["reload", "--runtime-directory", directory + "/run"],
            outputPath: directory + "/reload.log"
        )
        #expect(try await client.waitForExit() == 0, "\(TextFile.read(directory + "/reload.log") ?? "")")

        first.send(SIGTERM)
        #expect(try await first.waitForExit() == 0)
        // The lock went with the process: the next one starts.
        let socket2 = try FakeNotifySocket()
        let (next, _) = try await VigildBinary.start(socket: socket2, directory: directory)
        next.send(SIGKILL)
        #expect(try await next.waitForExit() == 128 + SIGKILL)
        // …also after kill -9 (the kernel releases an flock with its last descriptor).
        let socket3 = try FakeNotifySocket()
        let (last, _) = try await VigildBinary.start(socket: socket3, directory: directory)
        last.send(SIGTERM)
        #expect(try await last.waitForExit() == 0)
    }

    /// Before: under `umask 0777` the directories were made mode 000 (a leftover then failed
    /// later starts as another user), and a state directory of a fresh path was never made for
    /// a daemon's own files (errno 2 at its first start).
    @Test func directoriesAreMadeWithTheirModesWhateverTheUmask() async throws {
        let directory = VigildBinary.temporaryDirectory()
        for round in 1...2 {
            let socket = try FakeNotifySocket()
            let daemon = try DaemonProcess(
                executable: "/bin/sh",
                arguments: [
                    "-c", #"umask 0777; exec "$0" "$@""#, VigildBinary.path, "run", "--state-directory",
                    directory + "/deep/state", "--runtime-directory", directory + "/deep/run",
                ],
                environment: ["NOTIFY_SOCKET": socket.path],
                outputPath: directory + "/output.log"
            )
            try await socket.datagrams.wait("READY=1 (round \(round))") { $0.contains { $0.lines.contains("READY=1") } }
            for path in ["/deep", "/deep/state", "/deep/run"] {
                var info = stat()
                #expect(stat(directory + path, &info) == 0)
                #expect(info.st_mode & 0o7777 == 0o700, "\(path): mode \(String(info.st_mode & 0o7777, radix: 8))")
            }
            for file in ["/deep/run/status.json", "/deep/state/instance.lock", "/deep/state/state.json.running"] {
                var info = stat()
                #expect(stat(directory + file, &info) == 0)
                #expect(info.st_mode & 0o7777 == 0o600, "\(file): mode \(String(info.st_mode & 0o7777, radix: 8))")
            }
            daemon.send(SIGTERM)
            #expect(try await daemon.waitForExit() == 0, "\(TextFile.read(directory + "/output.log") ?? "")")
        }
    }

    /// Issue 21 item 14: the message of a runtime directory refused at start read "create
    /// /run/jobd cannot use /run/jobd: …"; the step is the daemon now, and a link says why it
    /// is not one systemd made.
    @Test func aRefusedRuntimeDirectoryIsNamedOnceInTheStatus() async throws {
        let directory = VigildBinary.temporaryDirectory()
        mkdir(directory + "/elsewhere", 0o700)
        symlink(directory + "/elsewhere", directory + "/run")
        let socket = try FakeNotifySocket()
        let daemon = try DaemonProcess(
            executable: VigildBinary.path,
            arguments: ["run", "--state-directory", directory + "/state", "--runtime-directory", directory + "/run"],
            environment: ["NOTIFY_SOCKET": socket.path],
            outputPath: directory + "/output.log"
        )
        #expect(try await daemon.waitForExit() == 1)
        let status = try await socket.datagrams.wait("STATUS=Failed to start") {
            $0.contains { $0.value("STATUS")?.hasPrefix("Failed to start") == true }
        }
        .compactMap { $0.value("STATUS") }.last
        #expect(
            status?.hasPrefix(
                "Failed to start: vigild cannot use \(directory)/run: it is a symbolic link, and not one systemd made"
            ) == true,
            "\(status ?? "")"
        )
        #expect(!FileSystem.exists(directory + "/state"), "nothing made after the refusal")
        #expect(!FileSystem.exists(directory + "/elsewhere/status.json"))
    }

    /// Issue 21 item 12: a rejection reason is echoed by `reload` from the status file, cut as
    /// STATUS= is (at 1024 characters, with its length). A configuration path of 1.5 KB makes a
    /// reason longer than that.
    @Test func aLongRejectionReasonIsCutInReloadsMessage() async throws {
        var directory = VigildBinary.temporaryDirectory()
        let base = directory
        for _ in 0..<6 {
            directory += "/" + String(repeating: "d", count: 250)
            mkdir(directory, 0o700)
        }
        let config = directory + "/vigild.json"
        TextFile.write(config, #"{ "heartbeat": { "interval": 1 } }"#)
        let socket = try FakeNotifySocket()
        let (daemon, _) = try await VigildBinary.start(
            socket: socket,
            arguments: ["--config", config],
            directory: base
        )
        TextFile.write(config, #"{ "heartbeat": { "interval": -1 } }"#)
        let client = try DaemonProcess(
            executable: VigildBinary.path,
            arguments: ["reload", "--runtime-directory", base + "/run"],
            outputPath: base + "/reload.log"
        )
        #expect(try await client.waitForExit() == 1)
        let output = TextFile.read(base + "/reload.log") ?? ""
        #expect(output.contains("vigild: reload rejected: configuration: \(base)/ddd"), "\(output.prefix(200))")
        #expect(output.contains("… ("), "not cut: \(output.utf8.count) bytes")
        #expect(output.utf8.count < 1300, "\(output.utf8.count) bytes")
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
    }

    /// Before: a vigild in a PID namespace of its own (`unshare --pid`, systemd 257's
    /// `PrivatePIDs=`) records its own pid there, 1: from outside, `status` said it was not
    /// running (pid 1 here is another process), `reload` refused pid 1, and a second `run` said
    /// "pid 1 holds it". Now the one process that holds the runtime directory's
    /// `instance.lock` (its pid here, from `/proc/locks`) is the daemon when it started at the
    /// time the file records.
    @Test(.enabled(if: getuid() == 0, "unshare --pid needs root"))
    func aDaemonInAPIDNamespaceOfItsOwnIsFoundByItsLock() async throws {
        let socket = try FakeNotifySocket()
        let directory = VigildBinary.temporaryDirectory()
        let daemon = try DaemonProcess(
            executable: "/usr/bin/unshare",
            arguments: [
                "--pid", "--fork", "--mount-proc", "--kill-child", VigildBinary.path, "run", "--state-directory",
                directory + "/state", "--runtime-directory", directory + "/run",
            ],
            environment: ["NOTIFY_SOCKET": socket.path],
            outputPath: directory + "/output.log"
        )
        try await socket.datagrams.wait("READY=1") { $0.contains { $0.lines.contains("READY=1") } }
        let recorded = TextFile.read(directory + "/run/status.json") ?? ""
        #expect(recorded.contains("\"pid\": 1,"), "inside its namespace it is pid 1: \(recorded)")

        let status = try await ClientSafetyTests.client(["status", "--runtime-directory", directory + "/run"])
        #expect(status.status == 0, "\(status.output)")
        let prefix = "vigild pid "
        let here = status.output.split(separator: "\n").first { $0.hasPrefix(prefix) }
            .flatMap { Int32($0.dropFirst(prefix.count).prefix { $0.isNumber }) }
        let pid = try #require(here, "\(status.output)")
        #expect(pid > 1 && pid != daemon.pid, "the daemon's pid here: \(pid)")
        #expect(status.output.contains("vigild pid \(pid) (1 in its own PID namespace): running"), "\(status.output)")

        let reload = try await ClientSafetyTests.client(["reload", "--runtime-directory", directory + "/run"])
        #expect(reload.status == 0, "\(reload.output)")
        #expect(reload.output.contains("reload applied; configuration generation 2"), "\(reload.output)")
        let asked = try await ClientSafetyTests.client([
            "reload", "--runtime-directory", directory + "/run", "--pid", "\(pid)",
        ])
        #expect(asked.status == 0, "--pid with its pid here: \(asked.output)")

        let second = try Self.run(directory, output: "second.log")
        #expect(try await second.waitForExit() == 1)
        let refused = TextFile.read(directory + "/second.log") ?? ""
        #expect(refused.contains("pid \(pid) (pid 1 in its own PID namespace) holds it"), "\(refused)")

        kill(pid, SIGTERM)
        #expect(try await daemon.waitForExit() == 0, "\(TextFile.read(directory + "/output.log") ?? "")")
    }
}

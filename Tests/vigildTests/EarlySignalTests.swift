import Glibc
import Testing
import Vigil
import VigilTesting

/// A signal that arrives the moment the process exists (systemd's `kill -HUP $MAINPID` right
/// after `systemctl start --no-block`) is queued, never fatal: vigild blocks its signals from the
/// executable's preinit array, before any library constructor (the Swift runtime's) and before
/// `main` (issue 10, item 17).
///
/// To hit that early point every time rather than by luck, the signal is raised by a library
/// constructor (`LD_PRELOAD`), the first code the loader runs after the preinit array. Without
/// the early block, that signal kills the process before `main`, every time.
@Suite(.serialized) struct EarlySignalTests {
    static let rounds = 20

    /// A shared library whose constructor raises the signal named by `VIGIL_TEST_RAISE`, built
    /// with the toolchain's clang.
    static let raisingLibrary: String = {
        let directory = VigildBinary.temporaryDirectory()
        let source = directory + "/raise.c"
        TextFile.write(
            source,
            """
            #include <signal.h>
            #include <stdlib.h>
            __attribute__((constructor)) static void raise_early(void) {
                const char *number = getenv("VIGIL_TEST_RAISE");
                if (number) raise(atoi(number));
            }
            """
        )
        let library = directory + "/libraise.so"
        let compilers: [String] = ["/opt/swift/usr/bin/clang", "/usr/bin/cc"]
        let compiler = compilers.first { access($0, X_OK) == 0 } ?? "/usr/bin/cc"
        let process = try? DaemonProcess(
            executable: compiler,
            arguments: ["-shared", "-fPIC", "-o", library, source],
            outputPath: directory + "/cc.log"
        )
        let status = process.map { process in
            var status: Int32 = 0
            while waitpid(process.pid, &status, 0) < 0 && errno == EINTR {}
            return status
        }
        precondition(status == 0, "cannot build \(library): \(TextFile.read(directory + "/cc.log") ?? "")")
        return library
    }()

    /// Starts vigild with `signal` raised in the first library constructor.
    static func spawnRaising(_ signal: Int32, socket: FakeNotifySocket) throws -> (DaemonProcess, String) {
        let directory = VigildBinary.temporaryDirectory()
        let process = try DaemonProcess(
            executable: VigildBinary.path,
            arguments: ["run", "--state-directory", directory + "/state", "--runtime-directory", directory + "/run"],
            environment: [
                "NOTIFY_SOCKET": socket.path, "LD_PRELOAD": raisingLibrary, "VIGIL_TEST_RAISE": "\(signal)",
            ],
            outputPath: directory + "/output.log"
        )
        return (process, directory)
    }

    static func output(_ directory: String) -> String {
        TextFile.read(directory + "/output.log") ?? ""
    }

    @Test func anEarlyHangupIsAReloadNotADeath() async throws {
        for round in 0..<Self.rounds {
            let socket = try FakeNotifySocket()
            let (daemon, directory) = try Self.spawnRaising(SIGHUP, socket: socket)
            // The queued SIGHUP is taken once the daemon owns it: a reload after READY=1.
            try await socket.datagrams.wait("reload after the early SIGHUP (round \(round))") { datagrams in
                datagrams.contains { $0.text.hasSuffix("reload applied\nREADY=1") }
                    || daemon.exitStatus != nil
            }
            #expect(daemon.exitStatus == nil, "round \(round): \(Self.output(directory))")
            daemon.send(SIGTERM)
            #expect(try await daemon.waitForExit() == 0, "round \(round): \(Self.output(directory))")
        }
    }

    @Test func anEarlyUser2IsNotedNotFatal() async throws {
        for round in 0..<Self.rounds {
            let socket = try FakeNotifySocket()
            let (daemon, directory) = try Self.spawnRaising(SIGUSR2, socket: socket)
            try await socket.datagrams.wait("READY=1 (round \(round))") { datagrams in
                datagrams.contains { $0.lines.contains("READY=1") } || daemon.exitStatus != nil
            }
            // The SIGUSR2 was queued before this SIGUSR1; the SIGUSR1's status report follows it.
            daemon.send(SIGUSR1)
            do {
                try await socket.datagrams.wait("SIGUSR1 report (round \(round))") { datagrams in
                    datagrams.contains { $0.text.hasSuffix(" heartbeats") } || daemon.exitStatus != nil
                }
            } catch {
                // What the daemon said is the only clue on a CI machine (once: a checkpoint's
                // fsync on the daemon's thread, since moved to a helper thread).
                Issue.record("round \(round): \(error)\ndaemon output:\n\(Self.output(directory))")
                throw error
            }
            daemon.send(SIGTERM)
            #expect(try await daemon.waitForExit() == 0, "round \(round): \(Self.output(directory))")
            #expect(Self.output(directory).contains("Handled SIGUSR2"), "round \(round): the journal notes it")
        }
    }

    @Test func anEarlyTerminateIsACleanExit() async throws {
        for round in 0..<Self.rounds {
            let socket = try FakeNotifySocket()
            let (daemon, directory) = try Self.spawnRaising(SIGTERM, socket: socket)
            #expect(try await daemon.waitForExit() == 0, "round \(round): \(Self.output(directory))")
        }
    }

    /// The clients are not the daemon: they get their original signal state back, so an
    /// early SIGTERM still ends `vigild status` as it would any program.
    @Test func clientsKeepDefaultSignals() async throws {
        let socket = try FakeNotifySocket()
        let directory = VigildBinary.temporaryDirectory()
        let client = try DaemonProcess(
            executable: VigildBinary.path,
            arguments: ["check-config", "/dev/null"],
            environment: ["LD_PRELOAD": Self.raisingLibrary, "VIGIL_TEST_RAISE": "\(SIGTERM)"],
            outputPath: directory + "/output.log"
        )
        _ = socket
        #expect(try await client.waitForExit() == 128 + SIGTERM)
    }

    /// A vanished stderr reader must not kill the daemon with SIGPIPE.
    @Test func aClosedStderrPipeIsNotFatal() async throws {
        let socket = try FakeNotifySocket()
        let directory = VigildBinary.temporaryDirectory()
        var pipeEnds: [Int32] = [0, 0]
        #expect(pipe(&pipeEnds) == 0)
        close(pipeEnds[0])  // no reader: every write to stderr raises SIGPIPE
        let saved = dup(2)
        dup2(pipeEnds[1], 2)
        let spawned = Result {
            try DaemonProcess(
                executable: VigildBinary.path,
                arguments: [
                    "run", "--state-directory", directory + "/state", "--runtime-directory", directory + "/run",
                ],
                environment: ["NOTIFY_SOCKET": socket.path]
            )
        }
        dup2(saved, 2)
        close(saved)
        close(pipeEnds[1])
        let daemon = try spawned.get()
        try await socket.datagrams.wait("READY=1") { $0.contains { $0.lines.contains("READY=1") } }
        daemon.send(SIGHUP)
        try await socket.datagrams.wait("reload") { $0.contains { $0.text.hasSuffix("reload applied\nREADY=1") } }
        daemon.send(SIGTERM)
        #expect(try await daemon.waitForExit() == 0)
    }
}

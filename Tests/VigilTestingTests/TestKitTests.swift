import Glibc
import Synchronization
import Testing
import VigilTesting

@Suite struct TestKitTests {
    @Test func theFakeSocketSeesDatagramsAndTheirSender() async throws {
        let socket = try FakeNotifySocket()
        let text = "READY=1\nSTATUS=x"
        let sent = Self.send(text, to: socket.path)
        #expect(sent == text.utf8.count)
        let datagram = try await socket.datagrams.wait { !$0.isEmpty }[0]
        #expect(datagram.text == text)
        #expect(datagram.senderPID == getpid())
        #expect(datagram.value("STATUS") == "x")
    }

    /// A fake whose descriptor number now names another socket (someone closed it, the number
    /// was reused) leaves that socket alone when it goes. Before, its deinit shut it down, and
    /// the live fake's sender failed with EPIPE (a CI run's daemon: "Broken pipe"), and then
    /// waited for its own receiving thread, still blocked on the old socket, for ever.
    @Test func aFakeWhoseDescriptorNowNamesAnotherSocketLeavesItAlone() async throws {
        let survivor = try FakeNotifySocket()
        var stale: FakeNotifySocket? = try FakeNotifySocket()
        let number = try #require(stale?.descriptorForTests)
        // The stale fake's thread must be blocked in recvmsg on its own socket before the number
        // names another (it then stays on the old socket, which nobody sends to again); between
        // two calls it would read the survivor's datagrams.
        try await poll(until: "the stale fake's thread blocked in recvmsg on descriptor \(number)") {
            Self.someThreadIsInRecvmsg(on: number)
        }
        // What a stale close and a reuse of the number come to, without racing other tests.
        #expect(dup2(survivor.descriptorForTests, number) == number)
        stale = nil
        #expect(stale == nil)
        close(number)
        let text = "STATUS=still here"
        let sent = Self.send(text, to: survivor.path)
        #expect(sent == text.utf8.count, "errno \(errno)")
        #expect(try await survivor.datagrams.wait { !$0.isEmpty }.map(\.text) == [text])
    }

    /// Whether a thread of this process is in `recvmsg` (system call 47 on x86-64, 212 on
    /// arm64) on `descriptor`: `/proc/self/task/*/syscall` starts with the call and its first
    /// argument.
    private static func someThreadIsInRecvmsg(on descriptor: Int32) -> Bool {
        #if arch(x86_64)
            let call = "47"
        #else
            let call = "212"
        #endif
        guard let tasks = opendir("/proc/self/task") else { return false }
        defer { closedir(tasks) }
        let wanted = "\(call) 0x\(String(descriptor, radix: 16)) "
        while let entry = readdir(tasks) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.first?.isNumber == true, let text = TextFile.read("/proc/self/task/\(name)/syscall") else {
                continue
            }
            if text.hasPrefix(wanted) { return true }
        }
        return false
    }

    /// Sends `text` as one datagram to the socket at `path`; what `sendto` returned.
    private static func send(_ text: String, to path: String) -> Int {
        let sender = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(sender) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                sendto(sender, text, text.utf8.count, 0, address, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
    }

    @Test func aGateHoldsWaitersUntilOpened() async throws {
        let gate = Gate()
        let passed = AsyncRecorder<Int>()
        let waiter = Task {
            await gate.wait()
            passed.append(1)
        }
        // Observed, not slept on: the task is suspended at the closed gate (a `wait()` that
        // returned at once never arrives, and this throws) and has not passed it.
        try await gate.waitForWaiters(1)
        #expect(passed.values.isEmpty)
        gate.open()
        await waiter.value
        #expect(passed.values == [1])
        await gate.wait()  // open for good
    }

    @Test func aRecorderTimesOutWithWhatItSaw() async throws {
        let recorder = AsyncRecorder<String>()
        recorder.append("a")
        let error = await #expect(throws: AsyncRecorder<String>.TimedOut.self) {
            try await recorder.wait(timeout: .milliseconds(20), "b") { $0.contains("b") }
        }
        #expect(error?.description.contains("[\"a\"]") == true)
    }

    /// Before: the deadline's task started before the waiter was registered; when it ran first
    /// (a zero or short timeout on a busy runner), it found no waiter and the wait hung for
    /// good. Many waits whose deadline is already due, racing appends that satisfy some of
    /// them: each must end, by a result or by ``AsyncRecorder/TimedOut``.
    @Test func aWaitWhoseDeadlineWinsTheRaceStillEnds() async throws {
        let recorder = AsyncRecorder<Int>()
        let rounds = 500
        let counts = Counts()
        for round in 0..<rounds {
            Task {
                do {
                    try await recorder.wait(timeout: .zero, "\(round)") { $0.contains(round) }
                } catch {
                    counts.timedOut.add(1, ordering: .relaxed)
                }
                counts.ended.add(1, ordering: .releasing)
            }
            if round.isMultiple(of: 2) { recorder.append(round) }
        }
        // The waits themselves are under test, so their ends are counted, not awaited: a lost
        // waiter makes this fail after the deadline instead of hanging the runner.
        let deadline = ContinuousClock.now + .seconds(60)
        while counts.ended.load(ordering: .acquiring) < rounds, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(counts.ended.load(ordering: .acquiring) == rounds, "waits that never ended")
        #expect(counts.timedOut.load(ordering: .relaxed) >= rounds / 2, "the unsatisfied half must time out")
    }

    private final class Counts: Sendable {
        let ended = Atomic<Int>(0)
        let timedOut = Atomic<Int>(0)
    }

    @Test func aChildProcessReportsItsExitStatus() async throws {
        let child = try DaemonProcess(executable: "/bin/sh", arguments: ["-c", "exit 3"])
        #expect(try await child.waitForExit() == 3)
        let killed = try DaemonProcess(executable: "/bin/sleep", arguments: ["60"])
        killed.send(SIGKILL)
        #expect(try await killed.waitForExit() == 128 + SIGKILL)
    }

    /// A name without `/` is looked up in `PATH` (ChildProcess's spawn), and the environment
    /// given replaces this process's when `inheritEnvironment` is `false`.
    @Test func aChildNamedWithoutASlashIsFoundInPATH() async throws {
        let child = try DaemonProcess(
            executable: "sh",
            arguments: ["-c", #"[ "$PATH" = /usr/bin:/bin ] && [ -z "$HOME" ] && exit 4"#],
            environment: ["PATH": "/usr/bin:/bin"],
            inheritEnvironment: false
        )
        #expect(try await child.waitForExit() == 4)
    }

    /// A script's `kill -s SIG 0` (a pid read as 0 from a unit that is not running) signals its
    /// process group: in a group of its own, that is the script's alone. Before, the end-to-end
    /// suite shared the runner's group, and such a kill ended `swift test` with SIGUSR1 and
    /// SIGRTMIN+5 in CI.
    @Test func aChildInAProcessGroupOfItsOwnKeepsAKillZeroToItself() async throws {
        let grouped = try DaemonProcess(
            executable: "/bin/sh",
            arguments: ["-c", "kill -s USR2 0; sleep 60"],
            ownProcessGroup: true
        )
        #expect(try await grouped.waitForExit() == 128 + SIGUSR2, "the script's own kill 0 ended it")
        let plain = try DaemonProcess(executable: "/bin/sleep", arguments: ["60"])
        defer { plain.send(SIGKILL) }
        #expect(getpgid(plain.pid) == getpgrp(), "a plain child shares the runner's group")
    }
}

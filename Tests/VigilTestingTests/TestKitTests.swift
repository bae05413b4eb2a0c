import Glibc
import Testing
import VigilTesting

@Suite struct TestKitTests {
    @Test func theFakeSocketSeesDatagramsAndTheirSender() async throws {
        let socket = try FakeNotifySocket()
        let sender = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(sender) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in socket.path.utf8.enumerated() { raw[index] = byte }
        }
        let text = "READY=1\nSTATUS=x"
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                sendto(sender, text, text.utf8.count, 0, address, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(sent == text.utf8.count)
        let datagram = try await socket.datagrams.wait { !$0.isEmpty }[0]
        #expect(datagram.text == text)
        #expect(datagram.senderPID == getpid())
        #expect(datagram.value("STATUS") == "x")
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

    @Test func aChildProcessReportsItsExitStatus() async throws {
        let child = try DaemonProcess(executable: "/bin/sh", arguments: ["-c", "exit 3"])
        #expect(try await child.waitForExit() == 3)
        let killed = try DaemonProcess(executable: "/bin/sleep", arguments: ["60"])
        killed.send(SIGKILL)
        #expect(try await killed.waitForExit() == 128 + SIGKILL)
    }
}

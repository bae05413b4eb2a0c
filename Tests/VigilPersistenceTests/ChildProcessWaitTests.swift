import Synchronization
import Testing
import VigilEventLoop
import VigilPOSIX
import VigilPlatform
import VigilTesting

/// Issue 23: a job daemon's children. Before, `ChildProcess.wait()` was the only wait and it
/// blocks its thread (a job daemon ran one thread per job around it), and nothing started a job
/// in a process group of its own, so a stop reached the job but not the processes it started.
/// Real children, real signals.
@Suite(.serialized) struct ChildProcessWaitTests {
    /// Descriptors of this process that are pidfds (`anon_inode:[pidfd]`).
    private static func openProcessDescriptors() -> Int {
        (0..<4096).reduce(0) { count, fd in
            var target = [CChar](repeating: 0, count: 64)
            let length = readlink("/proc/self/fd/\(fd)", &target, target.count - 1)
            guard length > 0 else { return count }
            return count
                + (String(decoding: target[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                    .hasSuffix("[pidfd]") ? 1 : 0)
        }
    }

    /// Many children awaited at once hold no thread of Swift concurrency's pool: while more of
    /// them are awaited than the pool has threads, another child's end is still heard. (With a
    /// blocking `waitpid` per child the pool stalls: the watchdog thread then SIGKILLs the
    /// children after 30 s and the test fails on their `killed by 9`.)
    @Test func childrenAwaitedTogetherHoldNoThreadOfThePool() async throws {
        let count = max(8, 4 * Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        let children = try (0..<count).map { _ in try ChildProcess.spawn("/bin/sleep", arguments: ["600"]) }
        let watchdog = Watchdog { for child in children { kill(child.pid, SIGKILL) } }
        defer { watchdog.release() }
        try await withThrowingTaskGroup(of: ChildProcess.Termination.self) { group in
            for child in children { group.addTask { try await child.termination() } }
            // Every wait is under way at once, each on a pidfd of its own.
            try await poll(until: "\(count) children awaited at once") { Self.openProcessDescriptors() >= count }
            // A short job started meanwhile is heard to end.
            let quick = try ChildProcess.spawn("/bin/sh", arguments: ["-c", "exit 3"])
            #expect(try await quick.termination() == .exited(3))
            for child in children { try child.send(SIGTERM) }
            var ended: [ChildProcess.Termination] = []
            for try await termination in group { ended.append(termination) }
            #expect(ended == Array(repeating: .killed(by: SIGTERM), count: count))
        }
        #expect(Self.openProcessDescriptors() == 0, "every pidfd closed")
    }

    /// A job started in its own process group is stopped with the processes it started: a
    /// signal to the child alone leaves its grandchild running; one to its group ends both.
    @Test func aJobInItsOwnProcessGroupIsStoppedWithItsGrandchildren() async throws {
        let directory = temporaryDirectory()
        let script =
            "sleep 600 & echo $! > \(directory)/grandchild.tmp && mv \(directory)/grandchild.tmp \(directory)/grandchild; wait"
        let job = try ChildProcess.spawn("/bin/sh", arguments: ["-c", script], inOwnProcessGroup: true)
        let grandchild = try await poll(for: "the job's grandchild") {
            TextFile.read(directory + "/grandchild").flatMap { Int32($0.split(separator: "\n").first ?? "") }
        }
        // The safety net: a grandchild still running after 30 s is SIGKILLed, and the test fails.
        let watchdog = Watchdog { kill(grandchild, SIGKILL) }
        defer { watchdog.release() }
        #expect(getpgid(job.pid) == job.pid, "the job leads a group of its own")
        #expect(getpgid(grandchild) == job.pid, "its child joined it")
        let grandchildEnd = DescriptorWatch.openProcessDescriptor(grandchild)
        try #require(grandchildEnd >= 0)
        defer { close(grandchildEnd) }

        try job.send(SIGTERM)
        #expect(try await job.termination() == .killed(by: SIGTERM))
        var entry = pollfd(fd: grandchildEnd, events: Int16(POLLIN), revents: 0)
        #expect(Glibc.poll(&entry, 1, 0) == 0, "a signal to the job alone leaves its grandchild running")

        // The group outlives its leader while a member runs.
        try job.send(SIGTERM, toProcessGroup: true)
        #expect(try await DescriptorWatch.readable(grandchildEnd), "the grandchild ended")
        #expect(!watchdog.fired, "the group's signal reached it, not the safety net")

        let plain = try ChildProcess.spawn("/bin/sh", arguments: ["-c", "exit 0"])
        #expect(getpgid(plain.pid) == getpgid(0), "by default the child stays in ours")
        #expect(try await plain.termination() == .exited(0))
    }

    /// A cancelled wait throws and leaves the child running and unreaped: it can be signalled
    /// and awaited again.
    @Test func aCancelledWaitLeavesTheChildToAwaitAgain() async throws {
        let child = try ChildProcess.spawn("/bin/sleep", arguments: ["600"])
        let waiting = Task { try await child.termination() }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(kill(child.pid, 0) == 0, "still running")
        try child.send(SIGKILL)
        #expect(try await child.termination() == .killed(by: SIGKILL))
        #expect(try child.wait() == .killed(by: SIGKILL), "reaped once, answered again")
    }

    /// Awaited by two tasks at once, and again later: each hears how the child ended. Before,
    /// the child was reaped by one and the others got ECHILD, so a supervisor needed one owner
    /// for each child (helper 52); and a second `waitpid` on a pid the kernel may have given to
    /// another child since could have reaped that one.
    @Test func everyWaitHearsHowTheChildEnded() async throws {
        let child = try ChildProcess.spawn("/bin/sleep", arguments: ["600"])
        let copy = child
        async let first = child.termination()
        async let second = copy.termination()
        try child.send(SIGTERM)
        #expect(try await first == .killed(by: SIGTERM))
        #expect(try await second == .killed(by: SIGTERM))
        #expect(try await child.termination() == .killed(by: SIGTERM))
        #expect(try child.wait() == .killed(by: SIGTERM))
    }

    /// A blocking `wait()` racing `termination()`: the blocking one reaped outside the record's
    /// lock, and the other got ECHILD in between (a reviewer's test: 42 of 300 runs). It now
    /// waits without reaping (`waitid` with `WNOWAIT`) and reaps under the lock.
    @Test func aBlockingWaitRacingTerminationBothHearTheEnd() async throws {
        for _ in 0..<100 {
            let child = try ChildProcess.spawn("/bin/sh", arguments: ["-c", "exit 7"])
            let blocking = Task.detached { try child.wait() }
            #expect(try await child.termination() == .exited(7))
            #expect(try await blocking.value == .exited(7))
        }
    }

    /// A child that something else reaped (a `waitpid` of the daemon's own) is an error, as
    /// before: nothing here knows how it ended.
    @Test func aChildReapedElsewhereIsECHILD() throws {
        let child = try ChildProcess.spawn("/bin/sh", arguments: ["-c", "exit 3"])
        var status: Int32 = 0
        #expect(waitpid(child.pid, &status, 0) == child.pid)
        #expect(throws: SystemError(path: "pid \(child.pid)", operation: "wait for", errno: ECHILD)) {
            try child.wait()
        }
    }

    /// In a task that was cancelled (a part cut short at its terminate budget), the wait throws
    /// at once; the way the documentation gives, a task of its own, reaps the child there. A
    /// second call in the cancelled task itself left a zombie (a helper's job runner, 2026-11-27).
    @Test func aCancelledTaskReapsItsChildInATaskOfItsOwn() async throws {
        let child = try ChildProcess.spawn("/bin/sleep", arguments: ["600"])
        let (first, reaped) = await Task { () async -> (String, ChildProcess.Termination?) in
            withUnsafeCurrentTask { $0?.cancel() }
            let first: String
            do { first = "returned \(try await child.termination())" } catch { first = "\(error)" }
            try? child.send(SIGKILL)
            return (first, try? await Task { try await child.termination() }.value)
        }.value
        #expect(first == "CancellationError()")
        #expect(reaped == .killed(by: SIGKILL))
        #expect(try child.wait() == .killed(by: SIGKILL))
    }
}

/// Runs `action` on a thread of its own after 30 s unless released first: the end of a test
/// that would otherwise hang when the pool is stalled.
private final class Watchdog: Sendable {
    private let state = Mutex<(released: Bool, fired: Bool)>((false, false))

    init(_ action: @escaping @Sendable () -> Void) {
        DetachedThread.run { [self] in
            for _ in 0..<300 {
                if state.withLock({ $0.released }) { return }
                usleep(100_000)
            }
            state.withLock { $0.fired = true }
            action()
        }
    }

    var fired: Bool { state.withLock { $0.fired } }

    func release() { state.withLock { $0.released = true } }
}

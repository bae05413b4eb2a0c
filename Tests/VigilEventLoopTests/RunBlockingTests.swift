import Testing
import VigilEventLoop
import VigilPOSIX
import VigilPlatform
import VigilTesting

/// `EventLoopExecutor.runBlocking`: a daemon's own blocking call on the helper thread, with the
/// deadline the standard listeners' file work has.
@Suite(.serialized) struct RunBlockingTests {
    private struct Unreadable: Error, Equatable { let reason: String }

    /// A call that blocks until ``release(_:)``: a `read` of an empty pipe.
    private final class HungCall: Sendable {
        private let readEnd: Int32
        private let writeEnd: Int32

        init() throws {
            var ends: [Int32] = [-1, -1]
            try #require(pipe(&ends) == 0)
            (readEnd, writeEnd) = (ends[0], ends[1])
        }

        deinit {
            close(readEnd)
            close(writeEnd)
        }

        /// The call: returns once a byte was written. It holds this object, so the pipe is
        /// closed only once no call can still read it: closed while a helper thread had yet to
        /// begin its `read`, its number went to another suite's notify socket, whose datagram
        /// that `read` then took (a CI run lost a `RELOADING=1` so).
        var call: @Sendable () -> Int {
            { [self] in
                var byte: UInt8 = 0
                return read(readEnd, &byte, 1)
            }
        }

        /// Lets `count` calls return.
        func release(_ count: Int) -> Bool {
            let bytes = [UInt8](repeating: 1, count: count)
            return write(writeEnd, bytes, count) == count
        }
    }

    @Test func itReturnsWhatTheCallReturnedFromAnotherThread() async throws {
        let caller = pthread_self()
        let ranElsewhere = try await EventLoopExecutor.runBlocking(
            operation: "count the files in",
            path: "/srv",
            within: .seconds(10)
        ) { pthread_equal(pthread_self(), caller) == 0 }
        #expect(ranElsewhere)
    }

    @Test func itThrowsWhatTheCallThrew() async {
        let error = await #expect(throws: Unreadable.self) {
            try await EventLoopExecutor.runBlocking(operation: "read", path: "/srv/x", within: .seconds(10)) {
                throw Unreadable(reason: "garbled")
            }
        }
        #expect(error == Unreadable(reason: "garbled"))
    }

    /// A call that does not answer in time is abandoned: the caller hears `ETIMEDOUT` with the
    /// operation and path it named, and the call's thread ends once the call returns.
    @Test func aCallThatMissesItsDeadlineIsAbandonedWithAnErrorNamingIt() async throws {
        let hung = try HungCall()
        let start = ContinuousClock.now
        let error = await #expect(throws: SystemError.self) {
            try await EventLoopExecutor.runBlocking(
                operation: "count the files in",
                path: "/mnt/hung",
                within: .milliseconds(100),
                hung.call
            )
        }
        #expect(ContinuousClock.now - start >= .milliseconds(100))
        #expect(error?.errno == ETIMEDOUT)
        #expect(error?.path == "/mnt/hung")
        #expect(
            error?.description
                == "cannot count the files in /mnt/hung: no answer within 100 ms (a hung file system?); the call was abandoned on its helper thread"
        )
        #expect(hung.release(1), "the abandoned call returns and its thread ends")
        try await poll(until: "the stuck thread ends") { BlockingWorker.daemonCalls.stuckThreads == 0 }
    }

    /// The daemon's own calls have threads of their own: four stuck on a hung mount refuse a fifth
    /// at once (`EAGAIN`), and the standard listeners' worker still answers.
    @Test func stuckCallsOfTheDaemonNeverStarveTheListenersFileWork() async throws {
        let hung = try HungCall()
        for _ in 0..<4 {
            await #expect(throws: SystemError.self) {
                try await EventLoopExecutor.runBlocking(
                    operation: "read",
                    path: "/mnt/hung",
                    within: .milliseconds(20),
                    hung.call
                )
            }
        }
        let refused = await #expect(throws: SystemError.self) {
            try await EventLoopExecutor.runBlocking(operation: "read", path: "/mnt/hung", within: .seconds(10)) { 1 }
        }
        #expect(refused?.errno == EAGAIN)
        #expect(
            refused?.description.hasPrefix("cannot read /mnt/hung: it was not run: 4 helper threads are stuck") == true
        )
        guard case .finished(let answer) = await BlockingWorker.shared.run(deadline: .seconds(10), { 7 }) else {
            Issue.record("the listeners' worker did not answer")
            return
        }
        #expect(answer == 7)
        #expect(hung.release(4), "the four abandoned calls return")
        try await poll(until: "the stuck threads end") { BlockingWorker.daemonCalls.stuckThreads == 0 }
    }

    /// A call made with `cancellable: false` is waited for when its task is cancelled
    /// meanwhile (the final checkpoint under a second stop request); a cancellable one is not.
    @Test func aCallThatIsNotCancellableIsWaitedForThroughACancellation() async throws {
        let hung = try HungCall()
        let worker = BlockingWorker(maximumThreads: 4)
        let (kept, dropped) = (
            Task { await worker.run(deadline: .seconds(30), cancellable: false, hung.call) },
            Task { await worker.run(deadline: .seconds(30), hung.call) }
        )
        try await poll(until: "both calls run") { worker.threadCount == 2 }
        kept.cancel()
        dropped.cancel()
        guard case .cancelled = await dropped.value else {
            Issue.record("the cancellable call was not given up")
            return
        }
        #expect(hung.release(2))
        guard case .finished(let answer) = await kept.value else {
            Issue.record("the call that is not cancellable was given up")
            return
        }
        #expect(answer == 1)
    }

    /// Many calls at once get a thread each; once they have returned, four stay idle for the next
    /// calls and the others end (a daemon that once ran 12 calls at once keeps no 12 threads).
    /// A worker of the test's own: a `Daemon` stopping in another suite retires the idle threads
    /// of the process's workers.
    @Test func threadsMadeForCallsAtOnceEndOnceTheyAreIdle() async throws {
        let hung = try HungCall()
        let worker = BlockingWorker(maximumThreads: 4)
        await withTaskGroup(of: Int.self) { group in
            for _ in 0..<12 {
                group.addTask {
                    guard case .finished(let answer) = await worker.run(deadline: .seconds(30), hung.call) else {
                        return 0
                    }
                    return answer
                }
            }
            try? await poll(until: "12 calls run at once") { worker.threadCount == 12 }
            #expect(worker.threadCount == 12)
            #expect(hung.release(12))
            var answers = 0
            for await answer in group { answers += answer }
            #expect(answers == 12)
        }
        #expect(worker.threadCount == 4)
        worker.retireIdleThreads()
        #expect(worker.threadCount == 0)
    }
}

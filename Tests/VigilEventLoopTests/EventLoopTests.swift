import Testing
import VigilEventLoop
import VigilPOSIX
import VigilPlatform
import VigilTesting

/// The event loop takes over a whole process's executor, so each test runs one scenario of
/// `vigil-loop-probe` (Tests/EventLoopProbe) in a child and reads what it printed.
@Suite struct EventLoopTests {
    /// Runs `scenario` and expects exactly `expected` on its stdout and `status` as its exit status.
    private func expect(
        _ scenario: String,
        prints expected: [String],
        exitStatus: Int32 = 0,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let output = "/tmp/vigil-loop-probe-\(getpid())-\(scenario)"
        unlink(output)
        defer { unlink(output) }
        let probe = try DaemonProcess(
            executable: BuiltExecutable.path(of: "vigil-loop-probe"),
            arguments: [scenario],
            outputPath: output
        )
        let status = try await probe.waitForExit()
        let lines = (TextFile.read(output) ?? "").split(separator: "\n").map(String.init)
        #expect(lines == expected, sourceLocation: sourceLocation)
        #expect(status == exitStatus, sourceLocation: sourceLocation)
    }

    /// One scenario of the probe: what it shows, and exactly what it prints.
    struct Scenario: Sendable, CustomTestStringConvertible {
        let name: String
        let claim: String
        let lines: [String]
        var exitStatus: Int32 = 0
        var testDescription: String { "\(name): \(claim)" }
    }

    static let scenarios = [
        // Before: main-actor jobs went to Dispatch's main queue, which nothing drained: they hung.
        Scenario(
            name: "order",
            claim: "jobs run in order on the loop thread, main-actor jobs too, and no other thread starts",
            lines: [
                "task 1 on the loop thread", "task 2 on the loop thread", "task 3 on the loop thread",
                "main actor on the loop thread", "MainActor.run on the loop thread", "threads=1",
            ]
        ),
        Scenario(
            name: "timers",
            claim: "sleeps wake in deadline order, never early; equal deadlines fire in the order added",
            lines: [
                "slept 30 ms, early=false", "slept 60 ms, early=false", "slept 90 ms, early=false",
                "timer 1", "timer 2", "timer 3", "pending timers=0 threads=1",
            ]
        ),
        Scenario(
            name: "cancel",
            claim: "a cancelled sleep ends at once and leaves no timer behind",
            lines: [
                "pending timers=1", "CancellationError after less than a second: true", "pending timers=0",
                "cancelled before sleeping: CancellationError", "cancel=true again=false", "pending timers=0",
            ]
        ),
        Scenario(
            name: "stop",
            claim: "the loop returns the body's result after queued jobs, whatever timers still wait",
            lines: ["queued job ran", "returned 7"],
            exitStatus: 7
        ),
        Scenario(
            name: "signals",
            claim: "signals arrive from the signalfd on the loop thread, one sent while blocked too",
            lines: [
                "sent before watching: signal \(SIGHUP) on the loop thread",
                "signal \(SIGUSR2) on the loop thread", "signal \(SIGUSR1) on the loop thread",
                "after cancel: SIGUSR1 pending=true", "threads=1",
            ]
        ),
        // Before: the loop ran jobs back to back and asked epoll only when none was left, so a
        // task that yielded forever (or a watchdog behind its schedule) starved SIGTERM.
        Scenario(
            name: "busy",
            claim: "a task that never waits does not starve signals",
            lines: ["while a task spins: signal \(SIGUSR1) on the loop thread", "the spinner ran meanwhile: true"]
        ),
        // Before: a real-time signal nobody owned stayed pending for the life of the process,
        // charged to a user's RLIMIT_SIGPENDING (issue 21, item 9).
        Scenario(
            name: "drain",
            claim: "blocked real-time signals nobody owns are taken, counted and discarded",
            lines: [
                "1000 sent: unowned 1000 of 5", "watched \(SIGUSR1)",
                "pending=false discarded=1000",
            ]
        ),
        // Before: the loop's epoll became fd 0 (issue 21, item 10).
        Scenario(
            name: "standard-descriptors",
            claim: "a closed standard descriptor is /dev/null before the loop opens its own",
            lines: ["fd 0: /dev/null"]
        ),
        // Settles the delay/deadline hooks: in Swift 6.3 `Task.sleep` never reaches them (with
        // counting hooks installed, both stayed at 0), so the loop does not install them and
        // `EventLoopExecutor.sleep` is the way to sleep on the loop.
        Scenario(
            name: "task-sleep",
            claim: "Task.sleep goes to Dispatch: not on the loop's timers, and it starts threads",
            lines: [
                "EventLoopExecutor.sleep: threads=1", "during Task.sleep: pending timers=0",
                "Task.sleep: more threads=true, resumed on the loop thread",
            ]
        ),
        Scenario(
            name: "default-executor",
            claim: "without the takeover, the body runs on the default executor",
            lines: ["installed=false", "returned 3"]
        ),
        // The check and the store are one compare-and-swap, as SwiftNIO does it.
        Scenario(
            name: "refused",
            claim: "another executor's hook (SwiftNIO's takeover, say) is kept and the install fails",
            lines: [
                "install=false theirs kept=true installed=false",
                "after theirs is gone: install=true installed=true",
            ]
        ),
        // Issue 23: a job daemon waited for each child with a blocking waitpid.
        Scenario(
            name: "child-process",
            claim: "a child is awaited on its pidfd through the loop's epoll: the one thread runs a timer and the "
                + "task that signals the child meanwhile, and no other thread is started; past the loop's 64 watches, "
                + "children are awaited on poll threads",
            lines: [
                "a timer fired on the loop while the child ran",
                "killed by signal 15 (Terminated), resumed on the loop thread: true",
                "threads in the process: 1",
                "70 of 70 children heard to end",
            ]
        ),
        // A cached "the root is local" outlived a chroot: a read on FUSE then ran on the loop.
        Scenario(
            name: "local-file-chroot",
            claim: "LocalFile asks fstatfs on every call: after the root moved, procfs is not opened in place although "
                + "a file on the local root before the move was",
            lines: [
                "on a tmpfs root: /config.json opened",
                "after chroot into procfs: /self/status not opened",
            ]
        ),
        // Issue 21 #7: a read from a hung file system blocked the loop's only thread for good.
        Scenario(
            name: "blocking-worker",
            claim: "blocking calls run on one reused helper thread; a hung one is abandoned at its deadline while the "
                + "loop goes on; stuck threads are bounded and end once their call returns",
            lines: [
                "finished 42, finished 43 off the loop, threads=1",
                "a timer fired on the loop while the call hung",
                "timed out after 200 ms or more: true, stuck=1",
                "next call: finished 44, threads=2",
                "timed out; then unavailable: 2 helper threads are stuck in earlier calls that missed their "
                    + "deadline and have not returned (a hung file system?); no more are started within 10 ms: true",
                "released: stuck=0 threads=0 (threads in the process: 1)",
                "after: finished 46, threads=1",
            ]
        ),
    ]

    @Test(arguments: scenarios) func probe(_ scenario: Scenario) async throws {
        try await expect(scenario.name, prints: scenario.lines, exitStatus: scenario.exitStatus)
    }

    @Test func theClockIsMonotonicAndAgreesWithItself() {
        let first = MonotonicClock.nanoseconds()
        let micro = MonotonicClock.microseconds()
        let second = MonotonicClock.nanoseconds()
        #expect(first <= second)
        #expect(first / 1_000 <= micro && micro <= second / 1_000)
    }

    private func describe<Value>(_ outcome: BlockingWorker.Outcome<Value>) -> String {
        switch outcome {
        case .finished(let value): "finished \(value)"
        case .timedOut: "timed out"
        case .cancelled: "cancelled"
        case .unavailable(let reason): "unavailable: \(reason)"
        }
    }

    /// A read from a pipe nobody writes to: a call that blocks until the test writes.
    private func blockingRead(_ descriptor: Int32) -> @Sendable () -> Int {
        {
            var byte: UInt8 = 0
            return read(descriptor, &byte, 1)
        }
    }

    /// A call made while another runs in time gets a thread of its own: only stuck threads are
    /// bounded (tests run in parallel, and two listeners may read at once; all were refused once
    /// four calls were in flight).
    @Test func aCallWhileAnotherRunsInTimeIsNotRefused() async throws {
        let worker = BlockingWorker(maximumThreads: 1)
        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)
        defer {
            close(ends[0])
            close(ends[1])
        }
        let read = blockingRead(ends[0])
        async let busy = worker.run(deadline: .seconds(30), read)
        try await poll(until: "the first call runs") { worker.threadCount == 1 }
        #expect(describe(await worker.run(deadline: .seconds(10)) { 7 }) == "finished 7")
        var byte: UInt8 = 1
        #expect(write(ends[1], &byte, 1) == 1)
        #expect(describe(await busy) == "finished 1")
        #expect(worker.stuckThreads == 0)
    }

    /// The caller waits in place for a call that answers within `waitInPlace` and hears it
    /// without suspending (on the same thread), asleep after a short spin: a spin with
    /// `sched_yield()` for the whole wait burnt it and could hand the processor to any other
    /// runnable task. A call that answers after the wait in place is heard through the
    /// suspension.
    @Test func waitingInPlaceSleepsUntilTheAnswer() async throws {
        let worker = BlockingWorker(maximumThreads: 1)
        func threadCPU() -> Duration {
            var now = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
            return .seconds(now.tv_sec) + .nanoseconds(now.tv_nsec)
        }
        let thread = pthread_self()
        let cpu = threadCPU()
        let answer = await worker.run(deadline: .seconds(30), waitInPlace: .seconds(10)) { () -> Int in
            usleep(200_000)
            return 5
        }
        let spent = threadCPU() - cpu
        #expect(describe(answer) == "finished 5")
        try #require(pthread_equal(thread, pthread_self()) != 0, "the caller suspended: it was not answered in place")
        #expect(spent < .milliseconds(50), "the caller's thread spent \(spent) of CPU waiting 200 ms")

        let late = await worker.run(deadline: .seconds(30), waitInPlace: .milliseconds(1)) { () -> Int in
            usleep(100_000)
            return 6
        }
        #expect(describe(late) == "finished 6")
    }

    /// How long a caller spins for its call: while the call is on its way (bounded), while it
    /// runs on another processor (bounded from when it began), never while it runs on the
    /// caller's own processor, never past the caller's limit.
    @Test func theWaitInPlaceSpinsOnlyWhileTheCallIsOnItsWayOrRunsElsewhere() {
        let start = BlockingWorker.spinStartLimit
        let run = BlockingWorker.spinRunLimit
        let limit: UInt64 = 2_000_000
        func spins(_ elapsed: UInt64, began: UInt64? = nil, on: Int32? = nil, caller: Int32 = 0) -> Bool {
            BlockingWorker.spinsOn(elapsed: elapsed, began: began, on: on, caller: caller, limit: limit)
        }
        // Not begun: up to the start limit.
        #expect(spins(0))
        #expect(spins(start - 1))
        #expect(!spins(start))
        // Begun on another processor: up to the run limit after it began, past the start limit.
        let began = start - 10_000
        #expect(spins(start + 50_000, began: began, on: 1))
        #expect(spins(began + run - 1, began: began, on: 1))
        #expect(!spins(began + run, began: began, on: 1))
        // Begun on the caller's processor: asleep at once, so that it can run.
        #expect(!spins(10_000, began: 5_000, on: 0))
        // An unknown processor (sched_getcpu failed) counts as another one.
        #expect(spins(10_000, began: 5_000, on: -1))
        #expect(spins(10_000, began: 5_000, on: -1, caller: -1))
        // Never past the caller's limit.
        #expect(!BlockingWorker.spinsOn(elapsed: 50_000, began: nil, on: nil, caller: 0, limit: 50_000))
        #expect(!BlockingWorker.spinsOn(elapsed: 60_000, began: 10_000, on: 1, caller: 0, limit: 60_000))
    }

    /// A thread started ahead of the first call takes that call (no second thread), a second
    /// start while one is alive does nothing, and the thread blocks every signal but a crash's
    /// (and SIGPROF, which Swift's crash report uses) even when the thread that made it blocks
    /// none: a signal sent to the process never lands on it, a fault on it is still reported.
    @Test func aThreadStartedAheadTakesTheFirstCallAndBlocksEverySignal() async throws {
        let worker = BlockingWorker(maximumThreads: 1)
        worker.startThread()
        #expect(worker.threadCount == 1)
        worker.startThread()
        #expect(worker.threadCount == 1)
        // Made by a thread that blocks no signal.
        let blocked = await withCheckedContinuation { (continuation: CheckedContinuation<[Int32], Never>) in
            // Written on the creating thread before it ends, read after `pthread_join`.
            final class Flag: @unchecked Sendable { var value = false }
            let creatorStillBlocksNothing = Flag()
            let other = BlockingWorker(maximumThreads: 1)
            let body: @Sendable () -> Void = {
                var none = sigset_t()
                sigemptyset(&none)
                pthread_sigmask(SIG_SETMASK, &none, nil)
                other.startThread()
                var after = sigset_t()
                pthread_sigmask(SIG_BLOCK, nil, &after)
                creatorStillBlocksNothing.value = sigismember(&after, SIGTERM) == 0 && sigismember(&after, SIGHUP) == 0
            }
            guard let thread = try? SystemThread.start(body) else {
                continuation.resume(returning: [-1])
                return
            }
            pthread_join(thread, nil)
            #expect(creatorStillBlocksNothing.value, "the creating thread's own mask was restored")
            Task {
                let outcome = await other.run(deadline: .seconds(10)) { () -> [Int32] in
                    var mask = sigset_t()
                    pthread_sigmask(SIG_BLOCK, nil, &mask)
                    return [SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD, SIGSEGV, SIGBUS, SIGILL, SIGPROF].filter
                    {
                        sigismember(&mask, $0) == 1
                    }
                }
                guard case .finished(let list) = outcome else { return continuation.resume(returning: [-2]) }
                #expect(other.threadCount == 1, "the call ran on the thread started ahead")
                continuation.resume(returning: list)
            }
        }
        #expect(blocked == [SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD])
        #expect(describe(await worker.run(deadline: .seconds(10)) { 3 }) == "finished 3")
        #expect(worker.threadCount == 1)
    }

    /// A stopped daemon retires the idle helper threads: the thread itself ends (so the exit
    /// need not wake it on another CPU), a thread stuck in a call is left alone, and a later call
    /// gets a new thread.
    @Test func retiringEndsTheIdleThreadsOnly() async throws {
        let worker = BlockingWorker(maximumThreads: 2)
        // The calling thread's /proc/self/task entry (gettid is not in Swift's Glibc module).
        @Sendable func task() -> String {
            var buffer = [CChar](repeating: 0, count: 64)
            let count = readlink("/proc/thread-self", &buffer, buffer.count - 1)
            let link = count > 0 ? String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
            return "/proc/self/task/" + (link.split(separator: "/").last.map(String.init) ?? "")
        }
        let first = await worker.run(deadline: .seconds(10)) { task() }
        guard case .finished(let tid) = first else {
            Issue.record("the call did not finish: \(describe(first))")
            return
        }
        #expect(worker.threadCount == 1)
        #expect(access(tid, F_OK) == 0, "the helper thread \(tid) runs before it is retired")
        worker.retireIdleThreads()
        #expect(worker.threadCount == 0)
        try await poll(until: "helper thread \(tid) ends") { access(tid, F_OK) != 0 }
        let second = await worker.run(deadline: .seconds(10)) { task() }
        guard case .finished(let next) = second else {
            Issue.record("the call after retiring did not finish: \(describe(second))")
            return
        }
        #expect(next != tid)
        #expect(worker.threadCount == 1)

        // The last call's thread ends once it has answered, without being retired.
        let last = await worker.run(deadline: .seconds(10), last: true) { task() }
        guard case .finished(let lastThread) = last else {
            Issue.record("the last call did not finish: \(describe(last))")
            return
        }
        #expect(lastThread == next, "the idle thread took the last call")
        #expect(worker.threadCount == 0)
        try await poll(until: "helper thread \(lastThread) ends after the last call") {
            access(lastThread, F_OK) != 0
        }
        #expect(describe(await worker.run(deadline: .seconds(10)) { 3 }) == "finished 3")
    }

    /// Without the event loop (this test runner's default executor) the deadline is a sleeping
    /// task; a cancelled caller hears so at once; the one thread, stuck, refuses the next call.
    @Test func theHelperThreadKeepsItsDeadlineOnTheDefaultExecutor() async throws {
        let worker = BlockingWorker(maximumThreads: 1)
        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)
        defer {
            close(ends[0])
            close(ends[1])
        }
        let start = ContinuousClock.now
        let hung = await worker.run(deadline: .milliseconds(100), blockingRead(ends[0]))
        #expect(describe(hung) == "timed out")
        #expect(ContinuousClock.now - start >= .milliseconds(100))
        #expect(worker.stuckThreads == 1)
        #expect(
            describe(await worker.run(deadline: .seconds(10)) { 1 }).hasPrefix(
                "unavailable: 1 helper threads are stuck in earlier calls"
            )
        )
        var byte: UInt8 = 1
        #expect(write(ends[1], &byte, 1) == 1)
        try await poll(until: "the stuck thread ends") { worker.threadCount == 0 }
        #expect(describe(await worker.run(deadline: .seconds(10)) { 2 }) == "finished 2")

        // The call says it began through a second pipe, then blocks.
        var began: [Int32] = [-1, -1]
        try #require(pipe(&began) == 0)
        _ = fcntl(began[0], F_SETFL, O_NONBLOCK)
        defer {
            close(began[0])
            close(began[1])
        }
        let (readEnd, beganEnd) = (ends[0], began[1])
        let waiter = Task {
            await worker.run(deadline: .seconds(30)) { () -> Int in
                var byte: UInt8 = 1
                _ = write(beganEnd, &byte, 1)
                return read(readEnd, &byte, 1)
            }
        }
        try await poll(until: "the call is on its thread") { read(began[0], &byte, 1) == 1 }
        // Cancelled, the caller hears so long before the call's 30 s deadline (measured from the
        // cancel: the whole test took 12 s once, pinned to a CPU a busy loop shared).
        let cancelled = ContinuousClock.now
        waiter.cancel()
        #expect(describe(await waiter.value) == "cancelled")
        #expect(ContinuousClock.now - cancelled < .seconds(10))
        #expect(write(ends[1], &byte, 1) == 1)
        try await poll(until: "the abandoned thread ends") { worker.threadCount == 0 }
    }
}

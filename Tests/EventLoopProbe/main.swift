// vigil-loop-probe: the child of Tests/VigilEventLoopTests. The event loop takes over the whole
// process's executor, so each scenario runs in a process of its own.
//
// Usage: vigil-loop-probe SCENARIO, one of order, timers, cancel, stop, signals, busy,
// task-sleep, default-executor, refused, blocking-worker, drain, standard-descriptors,
// child-process, local-file-chroot. Each prints one line per step on stdout; the tests compare them.
// Exit status 0 (stop: 7, the body's result), 2 for an unknown scenario.
import CVigilEventLoop
import Synchronization
import VigilEventLoop
import VigilPOSIX
import VigilPlatform

let loopThread = pthread_self()

/// One line of the report.
/// One line of the report, written at once (unbuffered: a scenario may end in exit).
func line(_ text: String) {
    var bytes = Array((text + "\n").utf8)
    _ = write(1, &bytes, bytes.count)
}

/// A `SignalWatch`, or the reason it failed on stdout and exit status 3.
func watching(
    _ signals: [Int32],
    unowned: (@Sendable (Int32) -> Void)? = nil,
    handler: @escaping @Sendable (Int32) -> Void
) -> SignalWatch {
    do {
        return try SignalWatch(signals: signals, unowned: unowned, handler: handler)
    } catch {
        line("watch failed: \(error)")
        exit(3)
    }
}

/// Where the calling job runs.
func whereAmI() -> String {
    pthread_equal(pthread_self(), loopThread) != 0 ? "on the loop thread" : "on another thread"
}

/// The process's threads (the loop alone is 1).
func threads() -> Int {
    guard let directory = opendir("/proc/self/task") else { return -1 }
    defer { closedir(directory) }
    var count = 0
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name != "." && name != ".." { count += 1 }
    }
    return count
}

func milliseconds(since start: UInt64) -> UInt64 { (MonotonicClock.nanoseconds() - start) / 1_000_000 }

/// Jobs run on the loop thread in the order they were enqueued; main-actor jobs (Dispatch's
/// main queue, drained by the loop) run on the loop thread too.
func order() async {
    let first = Task { line("task 1 \(whereAmI())") }
    let second = Task { line("task 2 \(whereAmI())") }
    let third = Task { line("task 3 \(whereAmI())") }
    _ = await (first.value, second.value, third.value)
    await Task { @MainActor in line("main actor \(whereAmI())") }.value
    await MainActor.run { line("MainActor.run \(whereAmI())") }
    line("threads=\(threads())")
}

/// Sleeps wake in deadline order, never early; equal deadlines fire in the order added.
/// Each sleep ends `wait` after the same start (the rest of it is slept), so a loaded machine
/// that starts the tasks late cannot reorder deadlines the scenario means to be 30 ms apart.
func timers() async {
    let start = MonotonicClock.nanoseconds()
    await withTaskGroup(of: Void.self) { group in
        for wait in [90, 30, 60] {
            group.addTask {
                let deadline = start + UInt64(wait) * 1_000_000
                let now = MonotonicClock.nanoseconds()
                let rest = deadline > now ? deadline - now : 0
                try? await EventLoopExecutor.sleep(for: .nanoseconds(rest))
                line("slept \(wait) ms, early=\(milliseconds(since: start) < UInt64(wait))")
            }
        }
    }
    let deadline = MonotonicClock.nanoseconds() + 5_000_000
    for id in 1...3 {
        _ = cvigil_loop_add_timer(
            deadline,
            { context in line("timer \(Int(bitPattern: context))") },
            UnsafeMutableRawPointer(bitPattern: id)
        )
    }
    try? await EventLoopExecutor.sleep(for: .milliseconds(10))
    line("pending timers=\(EventLoopExecutor.pendingTimers) threads=\(threads())")
}

/// A cancelled sleep ends at once and leaves no timer behind.
func cancel() async {
    let start = MonotonicClock.nanoseconds()
    let sleeper = Task {
        do {
            try await EventLoopExecutor.sleep(for: .seconds(3600))
            line("woke")
        } catch {
            line("\(type(of: error)) after less than a second: \(milliseconds(since: start) < 1000)")
        }
    }
    try? await EventLoopExecutor.sleep(for: .milliseconds(10))
    line("pending timers=\(EventLoopExecutor.pendingTimers)")
    sleeper.cancel()
    await sleeper.value
    line("pending timers=\(EventLoopExecutor.pendingTimers)")
    let cancelledFirst = Task {
        withUnsafeCurrentTask { $0?.cancel() }
        do {
            try await EventLoopExecutor.sleep(for: .seconds(3600))
        } catch {
            line("cancelled before sleeping: \(type(of: error))")
        }
    }
    await cancelledFirst.value
    let id = cvigil_loop_add_timer(MonotonicClock.nanoseconds() + 3_600_000_000_000, { _ in line("fired") }, nil)
    line("cancel=\(cvigil_loop_cancel_timer(id)) again=\(cvigil_loop_cancel_timer(id))")
    line("pending timers=\(EventLoopExecutor.pendingTimers)")
}

/// The loop returns the body's result once the body returns: jobs already queued run first,
/// timers still waiting do not hold it.
func stop() async -> Int32 {
    Task.detached { try? await EventLoopExecutor.sleep(for: .seconds(3600)) }
    Task { line("queued job ran") }
    return 7
}

/// Signals arrive from the signalfd on the loop thread, one per kill, including one sent while
/// it was blocked before anyone watched; after cancel, a signal stays blocked and pending.
func signals() async {
    var hangup = sigset_t()
    sigemptyset(&hangup)
    sigaddset(&hangup, SIGHUP)
    sigprocmask(SIG_BLOCK, &hangup, nil)
    kill(getpid(), SIGHUP)
    let (stream, delivered) = AsyncStream<String>.makeStream()
    let watch = watching([SIGHUP, SIGUSR1, SIGUSR2]) { signal in
        delivered.yield("signal \(signal) \(whereAmI())")
    }
    var deliveries = stream.makeAsyncIterator()
    line("sent before watching: \(await deliveries.next() ?? "none")")
    for signal in [SIGUSR2, SIGUSR1] {
        kill(getpid(), signal)
        line(await deliveries.next() ?? "none")
    }
    watch.cancel()
    kill(getpid(), SIGUSR1)
    var pending = sigset_t()
    sigpending(&pending)
    line("after cancel: SIGUSR1 pending=\(sigismember(&pending, SIGUSR1) == 1)")
    line("threads=\(threads())")
}

/// A task that keeps the loop busy (it sleeps for no time, as a watchdog behind its schedule
/// did: a timer due at once, so the loop always has a job) does not starve the signalfd: a
/// signal sent while it spins is delivered. (`Task.yield()` would not do: it goes to Dispatch.)
func busy() async {
    let spinning = Atomic(true)
    let spinner = Task {
        var rounds = 0
        while spinning.load(ordering: .relaxed) {
            rounds += 1
            try? await EventLoopExecutor.sleep(for: .zero)
        }
        return rounds
    }
    let (stream, delivered) = AsyncStream<String>.makeStream()
    let watch = watching([SIGUSR1]) { signal in delivered.yield("signal \(signal) \(whereAmI())") }
    var deliveries = stream.makeAsyncIterator()
    kill(getpid(), SIGUSR1)
    line("while a task spins: \(await deliveries.next() ?? "none")")
    spinning.store(false, ordering: .relaxed)
    line("the spinner ran meanwhile: \(await spinner.value > 0)")
    watch.cancel()
}

/// A real-time signal blocked when the loop starts (as VigilEarlySignals blocks them all) and
/// owned by nobody is taken from the loop's signalfd and discarded: none stays pending (each
/// would be charged to a user's RLIMIT_SIGPENDING), each is counted and handed to the
/// unowned callback; a watched one is still delivered.
func drain() async {
    let signal = __libc_current_sigrtmin() + 5
    let (stream, heard) = AsyncStream<String>.makeStream()
    let unowned = Atomic(0)
    let watch = watching(
        [SIGUSR1],
        unowned: { number in
            if unowned.add(1, ordering: .relaxed).newValue == 1000 {
                heard.yield("unowned 1000 of \(number - signal + 5)")
            }
        }
    ) { number in heard.yield("watched \(number)") }
    var events = stream.makeAsyncIterator()
    for _ in 0..<1000 { kill(getpid(), signal) }
    line("1000 sent: \(await events.next() ?? "none")")
    kill(getpid(), SIGUSR1)
    line(await events.next() ?? "none")
    var pending = sigset_t()
    sigpending(&pending)
    line("pending=\(sigismember(&pending, signal) == 1) discarded=\(EventLoopExecutor.discardedSignals)")
    watch.cancel()
}

/// Started with stdin closed, the loop's first descriptor (epoll) would become fd 0; the loop
/// opens /dev/null there first.
func standardDescriptors() async {
    var buffer = [CChar](repeating: 0, count: 256)
    let length = readlink("/proc/self/fd/0", &buffer, buffer.count - 1)
    let target =
        length > 0 ? String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "closed"
    line("fd 0: \(target)")
}

/// Task.sleep does not reach the loop: it is not on the loop's timer heap while it waits, and
/// it starts Dispatch's threads. EventLoopExecutor.sleep stays on the loop's one thread.
func taskSleep() async {
    try? await EventLoopExecutor.sleep(for: .milliseconds(5))
    line("EventLoopExecutor.sleep: threads=\(threads())")
    let sleeper = Task { try? await Task.sleep(for: .milliseconds(50)) }
    // The sleeper's first job runs before this one resumes (one FIFO queue).
    await Task.yield()
    line("during Task.sleep: pending timers=\(EventLoopExecutor.pendingTimers)")
    await sleeper.value
    line("Task.sleep: more threads=\(threads() > 1), resumed \(whereAmI())")
}

/// Without the takeover, `run` runs the body on the default executor and returns its result.
func defaultExecutor() -> Int32 {
    EventLoopExecutor.run(takingOver: false) { () async -> Int32 in
        try? await EventLoopExecutor.sleep(for: .milliseconds(5))
        line("installed=\(EventLoopExecutor.isInstalled)")
        return 3
    }
}

/// The loop claims the runtime hook only when no one else has: a hook already set stays, and
/// the install reports failure.
func refused() {
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "swift_task_enqueueGlobal_hook") else {
        line("no swift_task_enqueueGlobal_hook")
        return
    }
    let hook = symbol.assumingMemoryBound(to: UnsafeRawPointer?.self)
    let theirs = UnsafeRawPointer(bitPattern: 0x1000)
    hook.pointee = theirs
    line(
        "install=\(cvigil_loop_install()) theirs kept=\(hook.pointee == theirs) installed=\(EventLoopExecutor.isInstalled)"
    )
    hook.pointee = nil
    line("after theirs is gone: install=\(cvigil_loop_install()) installed=\(EventLoopExecutor.isInstalled)")
}

/// `finished 42`, `timed out`, …: an outcome for a line of the report.
func describe<Value>(_ outcome: BlockingWorker.Outcome<Value>) -> String {
    switch outcome {
    case .finished(let value): "finished \(value)"
    case .timedOut: "timed out"
    case .cancelled: "cancelled"
    case .unavailable(let reason): "unavailable: \(reason)"
    }
}

/// A blocking call runs on a helper thread, reused; one that misses its deadline is abandoned
/// while the loop goes on (a timer fires meanwhile), and the next call gets a new thread; with
/// every thread stuck a call is refused at once; a stuck thread ends once its call returns.
/// `ChildProcess.termination()` on the loop: the child's pidfd is watched by the loop's epoll,
/// so the one thread goes on (a timer fires, another task signals the child) while it waits.
func childProcess() async {
    let child: ChildProcess
    do {
        child = try ChildProcess.spawn("/bin/sleep", arguments: ["600"])
    } catch {
        line("spawn failed: \(error)")
        return
    }
    let waiter = Task { () -> String in
        do {
            let ended = try await child.termination()
            return "\(ended), resumed on the loop thread: \(pthread_equal(pthread_self(), loopThread) != 0)"
        } catch {
            return "failed: \(error)"
        }
    }
    try? await EventLoopExecutor.sleep(for: .milliseconds(50))
    line("a timer fired on the loop while the child ran")
    try? child.send(SIGTERM)
    line(await waiter.value)
    var threads = 0
    if let status = try? FileSystem.read("/proc/self/status", limit: 8192) {
        let text = String(decoding: status, as: UTF8.self)
        threads =
            text.split(separator: "\n").first { $0.hasPrefix("Threads:") }.flatMap {
                Int($0.dropFirst(8).trimmingPrefix { $0 == "\t" || $0 == " " })
            } ?? 0
    }
    line("threads in the process: \(threads)")
    // More children than the loop's epoll takes watches (64): the others wait on poll threads.
    do {
        let children = try (0..<70).map { _ in try ChildProcess.spawn("/bin/sleep", arguments: ["600"]) }
        let ended = await withTaskGroup(of: String.self) { group in
            for child in children {
                group.addTask { (try? await child.termination()).map { "\($0)" } ?? "failed" }
            }
            try? await EventLoopExecutor.sleep(for: .milliseconds(100))
            for child in children { try? child.send(SIGTERM) }
            var all: [String] = []
            for await one in group { all.append(one) }
            return all
        }
        line("\(ended.filter { $0 == "killed by signal 15 (Terminated)" }.count) of 70 children heard to end")
    } catch {
        line("spawn failed: \(error)")
    }
}

func blockingWorker() async {
    let worker = BlockingWorker(maximumThreads: 2)
    let first = await worker.run(deadline: .seconds(10)) { pthread_equal(pthread_self(), loopThread) == 0 ? 42 : -1 }
    let second = await worker.run(deadline: .seconds(10)) { 43 }
    line("\(describe(first)), \(describe(second)) off the loop, threads=\(worker.threadCount)")
    var pipes: [[Int32]] = []
    for _ in 0..<2 {
        var ends: [Int32] = [0, 0]
        _ = pipe(&ends)
        pipes.append(ends)
    }
    let start = MonotonicClock.nanoseconds()
    let ticker = Task {
        try? await EventLoopExecutor.sleep(for: .milliseconds(20))
        line("a timer fired on the loop while the call hung")
    }
    let readEnd = pipes[0][0]
    let hung = await worker.run(deadline: .milliseconds(200)) { () -> Int in
        var byte: UInt8 = 0
        return read(readEnd, &byte, 1)
    }
    await ticker.value
    line("\(describe(hung)) after 200 ms or more: \(milliseconds(since: start) >= 200), stuck=\(worker.stuckThreads)")
    let next = await worker.run(deadline: .seconds(10)) { 44 }
    line("next call: \(describe(next)), threads=\(worker.threadCount)")
    let otherEnd = pipes[1][0]
    let again = await worker.run(deadline: .milliseconds(50)) { () -> Int in
        var byte: UInt8 = 0
        return read(otherEnd, &byte, 1)
    }
    let refusedAt = MonotonicClock.nanoseconds()
    let refused = await worker.run(deadline: .seconds(10)) { 45 }
    line("\(describe(again)); then \(describe(refused)) within 10 ms: \(milliseconds(since: refusedAt) < 10)")
    var byte: UInt8 = 1
    for ends in pipes { _ = write(ends[1], &byte, 1) }
    let released = MonotonicClock.nanoseconds()
    while worker.stuckThreads > 0 || threads() > 1, milliseconds(since: released) < 10_000 {
        try? await EventLoopExecutor.sleep(for: .milliseconds(5))
    }
    line("released: stuck=\(worker.stuckThreads) threads=\(worker.threadCount) (threads in the process: \(threads()))")
    let last = await worker.run(deadline: .seconds(10)) { 46 }
    line("after: \(describe(last)), threads=\(worker.threadCount)")
}

/// `LocalFile` asks `fstatfs` on every call: once the process's root moved (chroot), a path on a
/// file system it must not read in place is not opened in place, although a call before the move
/// opened a file on a local root. Runs in a mount namespace of its own (root), so that its
/// mounts end with it: a tmpfs as the first root, procfs inside it as the second.
func localFileAfterChroot() {
    func opens(_ path: String) -> String {
        guard let opened = LocalFile.open(path, flags: FileSystem.readFlags()) else { return "not opened" }
        _ = consume opened
        return "opened"
    }
    // Into a mount namespace of its own first (util-linux's unshare, then this scenario again in
    // a child): the root's directory is made here and removed once the child, and with it the
    // namespace and its mounts, is gone.
    guard CommandLine.arguments.dropFirst(2).first == "in-namespace", CommandLine.arguments.count > 3 else {
        var template = Array("/tmp/vigil-chroot-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            line("setup: errno \(errno)")
            exit(1)
        }
        let root = String(cString: made)
        let arguments = [
            "--mount", "--propagation", "private", CommandLine.arguments[0], "local-file-chroot", "in-namespace", root,
        ]
        let status: Int32
        do {
            let child = try ChildProcess.spawn("/usr/bin/unshare", arguments: arguments)
            status = try child.wait() == .exited(0) ? 0 : 1
        } catch {
            line("unshare: \(error)")
            status = 1
        }
        rmdir(root)
        exit(status)
    }
    let root = CommandLine.arguments[3]
    guard mount("tmpfs", root, "tmpfs", 0, "size=64k") == 0, mkdir(root + "/proc", 0o755) == 0,
        mount("proc", root + "/proc", "proc", 0, nil) == 0
    else {
        line("mounts: errno \(errno)")
        exit(1)
    }
    let file = open(root + "/config.json", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
    close(file)
    guard chroot(root) == 0, chdir("/") == 0 else {
        line("chroot: errno \(errno)")
        exit(1)
    }
    line("on a tmpfs root: /config.json \(opens("/config.json"))")
    guard chroot("/proc") == 0, chdir("/") == 0 else {
        line("chroot: errno \(errno)")
        exit(1)
    }
    line("after chroot into procfs: /self/status \(opens("/self/status"))")
}

let scenario = CommandLine.arguments.dropFirst().first ?? ""
switch scenario {
case "order": EventLoopExecutor.run { await order() }
case "timers": EventLoopExecutor.run { await timers() }
case "cancel": EventLoopExecutor.run { await cancel() }
case "stop":
    let status = EventLoopExecutor.run { await stop() }
    line("returned \(status)")
    exit(status)
case "signals": EventLoopExecutor.run { await signals() }
case "task-sleep": EventLoopExecutor.run { await taskSleep() }
case "busy": EventLoopExecutor.run { await busy() }
case "blocking-worker": EventLoopExecutor.run { await blockingWorker() }
case "child-process": EventLoopExecutor.run { await childProcess() }
case "drain":
    var realTime = sigset_t()
    sigemptyset(&realTime)
    for signal in __libc_current_sigrtmin()...__libc_current_sigrtmax() { sigaddset(&realTime, signal) }
    sigprocmask(SIG_BLOCK, &realTime, nil)
    EventLoopExecutor.run { await drain() }
case "standard-descriptors":
    close(0)
    EventLoopExecutor.run { await standardDescriptors() }
case "default-executor": line("returned \(defaultExecutor())")
case "refused": refused()
case "local-file-chroot": localFileAfterChroot()
default:
    line("unknown scenario '\(scenario)'")
    exit(2)
}

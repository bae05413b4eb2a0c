import Synchronization
import Testing
import VigilPOSIX
import VigilPlatform

/// Every helper thread the library makes (the notifier's sender, the accept poller, a
/// descriptor watch's poll thread, the blocking worker's threads) comes from `SystemThread`.
@Suite struct SystemThreadTests {
    /// Made by a thread that blocks nothing, the new thread still blocks the signals a daemon
    /// owns (a `SIGTERM` to the process never lands on a helper) and not the faults; the
    /// creator's mask is as it was.
    @Test func aThreadIsBornWithTheDaemonsSignalsBlockedAndItsCreatorsMaskKept() throws {
        let seen = Mutex<(helper: [Int32], creatorAfter: [Int32])?>(nil)
        let creator = try SystemThread.start {
            var none = sigset_t()
            sigemptyset(&none)
            pthread_sigmask(SIG_SETMASK, &none, nil)
            let helperBlocks = Mutex<[Int32]>([])
            guard
                let helper = try? SystemThread.start({
                    helperBlocks.withLock { $0 = Self.blocked() }
                })
            else { return }
            pthread_join(helper, nil)
            let after = Self.blocked()
            seen.withLock { $0 = (helperBlocks.withLock { $0 }, after) }
        }
        pthread_join(creator, nil)
        let result = try #require(seen.withLock { $0 })
        #expect(result.helper == [SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE])
        #expect(result.creatorAfter == [])
    }

    private static func blocked() -> [Int32] {
        var mask = sigset_t()
        pthread_sigmask(SIG_BLOCK, nil, &mask)
        return [SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGPROF]
            .filter { sigismember(&mask, $0) == 1 }
    }
}

import Vigil
import VigilEarlySignals
import VigilPlatform

// The daemon's signals have been blocked since before the Swift runtime started (linking
// VigilEarlySignals opts in); a client subcommand gets its original signal state back first thing.
EarlySignals.settle(arguments: CommandLine.arguments)

// vigild runs on one thread: Swift concurrency's executor is Vigil's event loop (epoll,
// timerfd, signalfd), so the idle daemon never wakes up and a signal reaches the mediator
// without a thread switch. The library parses the command line and exits with the status.
EventLoopExecutor.run { await Vigild.commandLine.main(Vigild.daemon) }

// vigil-notify-probe: the child of NotifierTests. `SystemdNotifier` and `Watchdog.fromEnvironment`
// read this process's real environment (NOTIFY_SOCKET, WATCHDOG_*), so the tests set it for a
// child instead of calling setenv in the test runner, where other suites spawn processes from
// `environ` at the same time.
//
// Usage: vigil-notify-probe ACTION…, each ACTION one of
//   enabled          reports "enabled=true|false" (`SystemdNotifier().isEnabled`)
//   send=TEXT        sends TEXT; reports "sent", or "error errno=N: DESCRIPTION"
//   store=NAME       adopts the socket passed under NAME (socket activation), stores it in the
//                    service manager, closes it; reports "stored=true|false open=true|false"
//                    (open: still usable after the store), or "error code=C errno=N: DESCRIPTION"
//   burst=N          sends STATUS=0 … STATUS=N-1; reports "burst backlog=B ms=M" (the
//                    notifier's queue afterwards, and how long the sends took)
//   drain            waits (at most 30 s) until the queue is empty; reports "drained" or
//                    "backlog=B after 30 s"
//   ping-drain       as drain, but sends WATCHDOG=1 every millisecond meanwhile (as a daemon's
//                    watchdog does), which is what moves the queue when no sender thread can run;
//                    also reports "dropped=D"
//   barrier=MS       BARRIER=1 with a wait of at most MS ms; reports "barrier=confirmed ms=M" or
//                    "barrier=timed-out ms=M" (M: how long it waited), or "error errno=N: DESCRIPTION"
//   barrier-ahead    sends BARRIER=1 without waiting (`sendBarrierAhead`); reports "ahead"
//   prepare          `prepareToSynchronize()` (a barrier ahead when the exit will need one);
//                    reports "prepared"
//   exit-sync=MS     what a daemon does at exit (`prepareToSynchronize`, then
//                    `synchronize(timeout:)`, which sends BARRIER=1 only when the exit needs one);
//                    reports "exit-sync=confirmed|timed-out needed=true|false ms=M"; with
//                    VIGIL_PROBE_REPORT_DECISION set, first "exit-sync deciding needed=true|false"
//                    (after a barrier went ahead, if one did, and before the wait)
//   credential=NAME  reads the credential NAME (`Credentials.readString`); reports
//                    "credential NAME=TEXT" or "error code=C: MESSAGE"
//   snapshot-store=NAME:TEXT   stores TEXT as snapshot NAME (`StoredSnapshot.store`); reports
//                    "stored=true|false" or "error code=C: MESSAGE"
//   snapshot-restore=NAME      reports "restored NAME=TEXT", "restored NAME none" or "error code=C: MESSAGE"
//   snapshot-bump=NAME         restores NAME as a number (none: 0), stores it plus one; reports
//                    "snapshot NAME=N" (the number stored) or "error code=C: MESSAGE"
//   wait             waits for a signal (SIGTERM ends the probe), to run as a service
//   watchdog         reports "watchdog=none" or "watchdog interval=D ping=D" (`fromEnvironment`)
//   env=NAME         reports "NAME=VALUE" or "NAME unset"
// With VIGIL_PROBE_EXEC_PID_SELF set, the probe first sets SYSTEMD_EXEC_PID to its own pid.
// Each report is one datagram to the Unix socket named by VIGIL_PROBE_REPORT (a FakeNotifySocket
// of the test), else one line on stdout. Exit status 0, or 2 for an unknown action.
import VigilPOSIX
import VigilPlatform
import VigilSystemd

/// Sends `text` as one datagram to VIGIL_PROBE_REPORT, or writes it as a line to stdout.
func report(_ text: String) {
    guard let pointer = getenv("VIGIL_PROBE_REPORT") else {
        _ = (text + "\n").utf8CString.withUnsafeBufferPointer { write(1, $0.baseAddress, $0.count - 1) }
        return
    }
    let path = Array(String(cString: pointer).utf8)
    let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard descriptor >= 0 else { exit(3) }
    defer { close(descriptor) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let fits = withUnsafeMutableBytes(of: &address.sun_path) { raw -> Bool in
        guard path.count < raw.count else { return false }
        for (index, byte) in path.enumerated() { raw[index] = byte }
        return true
    }
    guard fits else { exit(3) }
    let bytes = Array(text.utf8)
    let sent = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { target in
            bytes.withUnsafeBytes {
                sendto(descriptor, $0.baseAddress, $0.count, 0, target, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
    }
    if sent != bytes.count { exit(3) }
}

let clock = ContinuousClock()

/// Whole milliseconds from `start` to now.
func milliseconds(since start: ContinuousClock.Instant) -> Int64 {
    let elapsed = clock.now - start
    return elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
}
// VIGIL_PROBE_EXEC_PID_SELF: act as the process systemd started, which finds its own pid in
// SYSTEMD_EXEC_PID (systemd sets it in the child after fork; a test knows the pid only later).
if getenv("VIGIL_PROBE_EXEC_PID_SELF") != nil { setenv("SYSTEMD_EXEC_PID", "\(getpid())", 1) }
for action in CommandLine.arguments.dropFirst() {
    let (verb, argument): (Substring, String) =
        if let equals = action.firstIndex(of: "=") {
            (action[..<equals], String(action[action.index(after: equals)...]))
        } else {
            (action[...], "")
        }
    switch verb {
    case "enabled":
        report("enabled=\(SystemdNotifier().isEnabled)")
    case "send":
        do {
            try SystemdNotifier().send(argument)
            report("sent")
        } catch let error as SystemError {
            report("error errno=\(error.errno): \(error)")
        } catch {
            report("error: \(error)")
        }
    case "store":
        do throws(SystemdError) {
            let socket = try ListeningSocket(name: argument, orBind: .tcp(host: "127.0.0.1", port: 0))
            let stored = try socket.storeInServiceManager(name: argument)
            let open = fcntl(socket.fileDescriptor, F_GETFD) >= 0
            socket.close()  // a queued duplicate keeps the socket alive until it is sent
            report("stored=\(stored) open=\(open)")
        } catch {
            report("error code=\(error.code.name) errno=\(error.errno.map { "\($0)" } ?? "-"): \(error)")
        }
    case "burst":
        let start = clock.now
        for index in 0..<max(0, Int(argument) ?? 0) { try? SystemdNotifier().send("STATUS=\(index)") }
        report("burst backlog=\(SystemdNotifier.backlog) ms=\(milliseconds(since: start))")
    case "drain":
        let deadline = clock.now + .seconds(30)
        while SystemdNotifier.backlog > 0 && clock.now < deadline { usleep(1000) }
        let left = SystemdNotifier.backlog
        report(left == 0 ? "drained" : "backlog=\(left) after 30 s")
    case "ping-drain":
        let deadline = clock.now + .seconds(30)
        while SystemdNotifier.backlog > 0 && clock.now < deadline {
            try? SystemdNotifier().send("WATCHDOG=1")
            usleep(1000)
        }
        let left = SystemdNotifier.backlog
        report(left == 0 ? "drained" : "backlog=\(left) after 30 s")
        report("dropped=\(SystemdNotifier.dropped)")
    case "barrier":
        let start = clock.now
        do {
            let confirmed = try SystemdNotifier().barrier(timeout: .milliseconds(Int(argument) ?? 0))
            report("barrier=\(confirmed ? "confirmed" : "timed-out") ms=\(milliseconds(since: start))")
        } catch {
            report("error errno=\(error.errno): \(error)")
        }
    case "prepare":
        SystemdNotifier().prepareToSynchronize()
        report("prepared")
    case "exit-sync":
        let notifier = SystemdNotifier()
        let needed = notifier.exitNeedsBarrier
        let start = clock.now
        do {
            notifier.prepareToSynchronize()
            // For a test that must let the manager answer only after the decision was taken.
            if getenv("VIGIL_PROBE_REPORT_DECISION") != nil { report("exit-sync deciding needed=\(needed)") }
            let confirmed = try notifier.synchronize(timeout: .milliseconds(Int(argument) ?? 0))
            report(
                "exit-sync=\(confirmed ? "confirmed" : "timed-out") needed=\(needed) ms=\(milliseconds(since: start))"
            )
        } catch {
            report("error: \(error)")
        }
    case "barrier-ahead":
        SystemdNotifier().sendBarrierAhead()
        report("ahead")
    case "credential":
        do throws(SystemdError) {
            report("credential \(argument)=\(try Credentials.readString(argument))")
        } catch {
            report("error code=\(error.code.name): \(error)")
        }
    case "snapshot-store":
        let parts = argument.split(separator: ":", maxSplits: 1).map(String.init)
        do throws(SystemdError) {
            report("stored=\(try StoredSnapshot.store(Array((parts.count > 1 ? parts[1] : "").utf8), name: parts[0]))")
        } catch {
            report("error code=\(error.code.name): \(error)")
        }
    case "snapshot-restore":
        do throws(SystemdError) {
            let bytes = try StoredSnapshot.restore(name: argument)
            report("restored \(argument)" + (bytes.map { "=" + String(decoding: $0, as: UTF8.self) } ?? " none"))
        } catch {
            report("error code=\(error.code.name): \(error)")
        }
    case "snapshot-bump":
        do throws(SystemdError) {
            let previous = try StoredSnapshot.restore(name: argument).flatMap {
                Int(String(decoding: $0, as: UTF8.self))
            }
            let next = (previous ?? 0) + 1
            try StoredSnapshot.store(Array("\(next)".utf8), name: argument)
            report("snapshot \(argument)=\(next)")
        } catch {
            report("error code=\(error.code.name): \(error)")
        }
    case "wait":
        while true { pause() }
    case "watchdog":
        if let watchdog = Watchdog.fromEnvironment() {
            report("watchdog interval=\(watchdog.interval) ping=\(watchdog.pingInterval)")
        } else {
            report("watchdog=none")
        }
    case "env":
        report(getenv(argument).map { "\(argument)=\(String(cString: $0))" } ?? "\(argument) unset")
    default:
        report("unknown action '\(action)'")
        exit(2)
    }
}
exit(0)

// vigil-socket-probe: the socket-activated child of SocketActivationProcessTests.
//
// Usage: vigil-socket-probe [NAME [CONNECTIONS [--store PORT]]]
// Adopts the socket systemd (or the test) passed under NAME (default "http"), else binds
// 127.0.0.1:0 (127.0.0.1:PORT with --store); prints one line saying what it got and what is
// left of LISTEN_* and NOTIFY_SOCKET, and what a second request for NAME gives ("again="), then
// answers CONNECTIONS connections (default 1) with that line and exits 0. With --store it hands the socket to systemd's file-descriptor store under
// NAME and then sends READY=1 (for a Type=notify unit with FileDescriptorStoreMax=).
// With --lines (in place of --store PORT) it serves the socket through AcceptedConnections
// instead: each connection's lines are answered "<origin> <line>"; the line "stop" stops the
// sequence with a 5 s grace period, and the probe exits 0 once every connection has ended.
// With --emfile (in place of --store PORT) it serves lines as --lines does, with RLIMIT_NOFILE
// lowered so that exactly two connections can be open, and AcceptedConnections' log lines
// printed to stdout ("<level> <message>").
// A SystemdError is printed as "error: CODE: MESSAGE" with exit status 1.
import Logging
import VigilPlatform
import VigilSystemd

/// AcceptedConnections' log, one line per entry on stdout.
struct PrintingLogHandler: LogHandler {
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        say("\(event.level) \(event.message)\n")
    }
}

let arguments = CommandLine.arguments
let name = arguments.count > 1 ? arguments[1] : "http"
let connections = arguments.count > 2 ? max(0, Int(arguments[2]) ?? 1) : 1
let storePort: UInt16? = arguments.count > 4 && arguments[3] == "--store" ? UInt16(arguments[4]) : nil
let lowLimit = arguments.count > 3 && arguments[3] == "--emfile"
let servesLines = arguments.count > 3 && (arguments[3] == "--lines" || lowLimit)

/// `signalfd(2)`: Glibc's module does not import <sys/signalfd.h>.
@_silgen_name("signalfd")
func signalDescriptor(_ descriptor: Int32, _ mask: UnsafePointer<sigset_t>, _ flags: Int32) -> Int32

/// Writes `text` to stdout unbuffered, so the test reads it even if the probe is killed.
func say(_ text: String) {
    _ = text.utf8CString.withUnsafeBufferPointer { write(1, $0.baseAddress, $0.count - 1) }
}

func variable(_ name: String) -> String {
    getenv(name).map { String(cString: $0) } ?? "-"
}

let socket: ListeningSocket
do throws(SystemdError) {
    // --lines serves a Unix socket (an abstract one of its own when nothing was passed).
    let address: ListeningSocket.Address =
        servesLines ? .unix(path: "@vigil-socket-probe-\(getpid())") : .tcp(host: "127.0.0.1", port: storePort ?? 0)
    socket = try ListeningSocket(name: name, orBind: address)
    if storePort != nil {
        try socket.storeInServiceManager(name: name)
    }
} catch {
    say("error: \(error.code.name): \(error)\n")
    exit(1)
}
let origin =
    switch socket.origin {
    case .adopted(let name): "adopted:\(name)"
    case .bound: "bound"
    }
// A second request for the same name: adopted sockets are handed out once per process.
let again: String
do throws(SystemdError) {
    let second = try ListeningSocket(name: name, orBind: .tcp(host: "127.0.0.1", port: storePort ?? 0))
    again = second.origin == .bound ? "bound" : "adopted"
} catch {
    again = error.code.name
}
let cloexec = fcntl(socket.fileDescriptor, F_GETFD) & FD_CLOEXEC != 0 ? 1 : 0
let line =
    "origin=\(origin) fd=\(socket.fileDescriptor) address=\(socket.localAddress) cloexec=\(cloexec)"
    + " LISTEN_PID=\(variable("LISTEN_PID")) LISTEN_FDS=\(variable("LISTEN_FDS"))"
    + " LISTEN_FDNAMES=\(variable("LISTEN_FDNAMES")) NOTIFY_SOCKET=\(variable("NOTIFY_SOCKET")) again=\(again)\n"
say(line)
if storePort != nil { try? SystemdNotifier().send("READY=1") }

if servesLines {
    do {
        let connections = try socket.connections(logger: Logger(label: "probe") { _ in PrintingLogHandler() })
        if lowLimit {
            // Once suspended, the main thread has left for dispatch_main, whose exit opens an
            // eventfd of libdispatch's (which traps without one): before the limit, not after.
            try await Task.sleep(for: .milliseconds(10))
            // A limit below which exactly two descriptors are free: the third connection meets
            // EMFILE. The free ones need not be adjacent: descriptors the test runner opened
            // without close-on-exec (its other tests run in parallel) are inherited, and make
            // holes (requiring two adjacent free descriptors failed so in CI).
            var free = 0
            var bound: Int32 = 0
            while free < 2 {
                if fcntl(bound, F_GETFD) == -1 && errno == EBADF { free += 1 }
                bound += 1
            }
            var limit = rlimit(rlim_cur: rlim_t(bound), rlim_max: rlim_t(bound))
            guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else {
                say("error: setrlimit: \(String(cString: strerror(errno)))\n")
                exit(1)
            }
            say("limit \(bound)\n")
        }
        try await withThrowingDiscardingTaskGroup { group in
            for try await connection in connections {
                group.addTask {
                    defer { connection.close() }
                    while let request = try await connection.readLine() {
                        // The grace only bounds a test that fails: a half-sent request ends
                        // long before it. 5 s ran out once under a loaded machine (the test
                        // process starved for 12 s while two builds ran beside the suite).
                        if request == "stop" { connections.stop(gracePeriod: .seconds(30)) }
                        try await connection.write("\(origin) \(request)\n")
                    }
                }
            }
        }
    } catch {
        say("error: \(error)\n")
        exit(1)
    }
    exit(0)
}

// SIGTERM ends the loop between connections, never in the middle of an answer: a stop or
// restart drops no accepted connection (what the file-descriptor store check counts).
var terminate = sigset_t()
sigemptyset(&terminate)
sigaddset(&terminate, SIGTERM)
sigprocmask(SIG_BLOCK, &terminate, nil)
let signals = signalDescriptor(-1, &terminate, O_CLOEXEC)  // SFD_CLOEXEC is O_CLOEXEC
var answered = 0
while answered < connections {
    var watched = [
        pollfd(fd: socket.fileDescriptor, events: Int16(POLLIN), revents: 0),
        pollfd(fd: signals, events: Int16(POLLIN), revents: 0),
    ]
    if poll(&watched, 2, -1) < 0 {
        if errno == EINTR { continue }
        say("error: poll: \(String(cString: strerror(errno)))\n")
        exit(1)
    }
    if watched[1].revents != 0 { break }
    let connection = accept(socket.fileDescriptor, nil, nil)
    if connection < 0 {
        if errno == EINTR || errno == EAGAIN { continue }
        say("error: accept: \(String(cString: strerror(errno)))\n")
        exit(1)
    }
    _ = line.utf8CString.withUnsafeBufferPointer { write(connection, $0.baseAddress, $0.count - 1) }
    close(connection)
    answered += 1
}
socket.close()
exit(0)

// vigil-socket-probe: the socket-activated child of SocketActivationProcessTests.
//
// Usage: vigil-socket-probe [NAME [CONNECTIONS]]
// Adopts the socket systemd (or the test) passed under NAME (default "http"), else binds
// 127.0.0.1:0; prints one line saying what it got and what is left of LISTEN_* and
// NOTIFY_SOCKET, then answers CONNECTIONS connections (default 1) with that line and exits 0.
// A ListeningSocketError is printed as "error: CODE: MESSAGE" with exit status 1.
import VigilSystemd

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

let arguments = CommandLine.arguments
let name = arguments.count > 1 ? arguments[1] : "http"
let connections = arguments.count > 2 ? max(0, Int(arguments[2]) ?? 1) : 1

/// Writes `text` to stdout unbuffered, so the test reads it even if the probe is killed.
func say(_ text: String) {
    _ = text.utf8CString.withUnsafeBufferPointer { write(1, $0.baseAddress, $0.count - 1) }
}

func variable(_ name: String) -> String {
    getenv(name).map { String(cString: $0) } ?? "-"
}

let socket: ListeningSocket
do throws(ListeningSocketError) {
    socket = try ListeningSocket(name: name, orBind: .tcp(host: "127.0.0.1", port: 0))
} catch {
    say("error: \(error.code): \(error)\n")
    exit(1)
}
let origin =
    switch socket.origin {
    case .adopted(let name): "adopted:\(name)"
    case .bound: "bound"
    }
let cloexec = fcntl(socket.fileDescriptor, F_GETFD) & FD_CLOEXEC != 0 ? 1 : 0
let line =
    "origin=\(origin) fd=\(socket.fileDescriptor) address=\(socket.localAddress) cloexec=\(cloexec)"
    + " LISTEN_PID=\(variable("LISTEN_PID")) LISTEN_FDS=\(variable("LISTEN_FDS"))"
    + " LISTEN_FDNAMES=\(variable("LISTEN_FDNAMES")) NOTIFY_SOCKET=\(variable("NOTIFY_SOCKET"))\n"
say(line)

var answered = 0
while answered < connections {
    let connection = accept(socket.fileDescriptor, nil, nil)
    if connection < 0 {
        if errno == EINTR { continue }
        say("error: accept: \(String(cString: strerror(errno)))\n")
        exit(1)
    }
    _ = line.utf8CString.withUnsafeBufferPointer { write(connection, $0.baseAddress, $0.count - 1) }
    close(connection)
    answered += 1
}
socket.close()
exit(0)

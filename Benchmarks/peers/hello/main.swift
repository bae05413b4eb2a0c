// vigil-swift-hello: the language floor of Vigil's process benchmarks (Benchmarks/run.sh). The
// least a Swift program with the static standard library does under systemd: print a line,
// READY=1, answer SIGHUP with RELOADING=1 and READY=1, exit on SIGTERM. No configuration, no
// state, no checkpoint: its row shows what the Swift runtime alone costs to start, stop and keep
// resident, under which no Swift daemon can go. Built by run.sh with
// `swiftc -O -static-stdlib`; only Glibc, no package.
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// One datagram to NOTIFY_SOCKET (a path; the harness gives one), as sd_notify sends it.
func notify(_ text: String) {
    guard let path = getenv("NOTIFY_SOCKET") else { return }
    let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return }
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(String(cString: path).utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return }
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
    var message = Array(text.utf8)
    _ = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            sendto(fd, &message, message.count, 0, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
        }
    }
}

var signals = sigset_t()
sigemptyset(&signals)
for signal in [SIGHUP, SIGTERM, SIGINT] { sigaddset(&signals, signal) }
sigprocmask(SIG_BLOCK, &signals, nil)
print("hello")
notify("READY=1\nSTATUS=Running")
while true {
    var received: Int32 = 0
    guard sigwait(&signals, &received) == 0 else { continue }
    if received == SIGHUP {
        notify("RELOADING=1")
        notify("READY=1\nSTATUS=Running")
    } else {
        exit(0)
    }
}

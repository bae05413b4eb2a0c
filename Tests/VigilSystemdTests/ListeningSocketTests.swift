import Testing
import VigilPOSIX
import VigilPlatform
import VigilSystemd
import VigilTesting

/// Adopt-or-bind without a child process: binding, the checks on an adopted descriptor, the
/// choice by name, and the parsing of LISTEN_* through an injected environment (never setenv:
/// other suites spawn processes concurrently).
@Suite struct ListeningSocketTests {
    // MARK: Binding

    @Test func bindsTCPOnAnEphemeralPortWithReuseAddressAndCloseOnExec() throws {
        let socket = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { socket.close() }
        #expect(socket.origin == .bound)
        let port = try #require(socket.port)
        #expect(port != 0)
        #expect(socket.localAddress == .ipv4(host: "127.0.0.1", port: port))
        #expect(Self.option(SO_REUSEADDR, socket.fileDescriptor) == 1)
        #expect(Self.option(SO_ACCEPTCONN, socket.fileDescriptor) == 1)
        #expect(fcntl(socket.fileDescriptor, F_GETFD) & FD_CLOEXEC != 0)
        try Self.expectConnectable(socket)
    }

    @Test func bindsAUnixPathAndReplacesAStaleSocketFile() throws {
        let directory = Self.temporaryDirectory()
        let path = directory + "/app.sock"
        let first = try ListeningSocket.bind(.unix(path: path))
        #expect(first.localAddress == .unix(path: path))
        #expect(first.port == nil)
        try Self.expectConnectable(first)
        // While it listens, the path is taken.
        let taken = #expect(throws: SystemdError.self) { try ListeningSocket.bind(.unix(path: path)) }
        #expect(taken?.code == .bindFailed)
        #expect(taken?.errno == EADDRINUSE)
        #expect(taken?.cause == SystemError(path: path, operation: "bind", errno: EADDRINUSE))
        #expect(taken?.message.contains("cannot bind \(path)") == true)
        // Its process is gone (closed) but the file stays: the next bind replaces it.
        first.close()
        let second = try ListeningSocket.bind(.unix(path: path))
        defer { second.close() }
        try Self.expectConnectable(second)
    }

    @Test func aTakenTCPPortIsABindFailureNamingTheAddress() throws {
        let holder = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { holder.close() }
        let port = try #require(holder.port)
        let error = #expect(throws: SystemdError.self) {
            try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: port))
        }
        #expect(error?.code == .bindFailed)
        #expect(error?.errno == EADDRINUSE)
        #expect(error?.cause?.path == "127.0.0.1:\(port)")
        #expect(
            error?.description.hasSuffix(
                "cannot bind 127.0.0.1:\(port): another socket is bound there: stop the process that holds it, "
                    + "choose another address, or let a .socket unit pass it (\(SystemError.describe(EADDRINUSE)), errno \(EADDRINUSE))"
            ) == true,
            "\(String(describing: error))"
        )
    }

    /// A Unix socket's path taken by a directory or a file said "another socket is bound there:
    /// stop the process that holds it" (helper 54): it names what is there.
    @Test func aUnixPathThatIsNoSocketIsNamed() throws {
        let directory = Self.temporaryDirectory()
        let error = #expect(throws: SystemdError.self) { try ListeningSocket.bind(.unix(path: directory)) }
        #expect(error?.errno == EADDRINUSE)
        #expect(
            error?.message == "cannot bind \(directory): the path is a directory, not a socket: choose another path "
                + "(a file in the runtime directory)",
            "\(String(describing: error))"
        )
    }

    @Test(arguments: ["localhost", "", "127.0.0.1.5", "[::1"])
    func aHostThatIsNotANumericAddressIsRefused(host: String) {
        let error = #expect(throws: SystemdError.self) { try ListeningSocket.bind(.tcp(host: host, port: 0)) }
        #expect(error?.code == .invalidAddress)
        #expect(error?.message.contains("is not a numeric IPv4 or IPv6 address") == true)
    }

    @Test func aUnixPathTooLongForSunPathIsRefused() {
        let path = "/tmp/" + String(repeating: "x", count: 200)
        let error = #expect(throws: SystemdError.self) { try ListeningSocket.bind(.unix(path: path)) }
        #expect(error?.code == .invalidAddress)
        #expect(error?.message.contains("1 to 107 bytes") == true)
    }

    // MARK: Adopting

    @Test func adoptsAListeningTCPSocketByName() throws {
        let http = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { http.close() }
        let other = try ListeningSocket.bind(.unix(path: Self.temporaryDirectory() + "/metrics.sock"))
        defer { other.close() }
        let passed = [
            ListenedFileDescriptor(fileDescriptor: other.fileDescriptor, name: "metrics"),
            ListenedFileDescriptor(fileDescriptor: http.fileDescriptor, name: "http"),
        ]
        let adopted = try ListeningSocket(name: "http", from: passed, orBind: .tcp(host: "127.0.0.1", port: 8080))
        #expect(adopted.origin == .adopted(name: "http"))
        #expect(adopted.fileDescriptor == http.fileDescriptor)
        // The unit's address wins over the fallback's 8080.
        #expect(adopted.port == http.port)
        let metrics = try ListeningSocket(name: "metrics", from: passed, orBind: .unix(path: "/run/unused.sock"))
        #expect(metrics.localAddress == other.localAddress)
    }

    @Test func adoptingSetsCloseOnExec() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(bound == 0 && listen(fd, 1) == 0)
        #expect(fcntl(fd, F_GETFD) & FD_CLOEXEC == 0)
        _ = try ListeningSocket.adopt(
            ListenedFileDescriptor(fileDescriptor: fd, name: "http"),
            for: .tcp(host: "::", port: 80)
        )
        #expect(fcntl(fd, F_GETFD) & FD_CLOEXEC != 0)
    }

    @Test func refusesADatagramSocket() throws {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        let error = Self.adoptionError(fd, for: .tcp(host: "127.0.0.1", port: 8080))
        #expect(error?.code == .unusable)
        #expect(
            error?.message
                == "fd \(fd) 'http' is a datagram socket: use ListenStream=127.0.0.1:8080 (not ListenDatagram=) in the .socket unit"
        )
    }

    @Test func refusesAPipe() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { for end in ends { close(end) } }
        let error = Self.adoptionError(ends[0], for: .tcp(host: "127.0.0.1", port: 8080))
        #expect(error?.code == .unusable)
        #expect(
            error?.message
                == "fd \(ends[0]) 'http' is a FIFO (named pipe), not a socket: pass a socket with ListenStream=127.0.0.1:8080 in the .socket unit"
        )
    }

    @Test func refusesAStreamSocketThatIsNotListening() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(fd) }
        let error = Self.adoptionError(fd, for: .tcp(host: "127.0.0.1", port: 8080))
        #expect(error?.code == .unusable)
        #expect(error?.message.contains("is a stream socket that is not listening") == true)
        #expect(error?.message.contains("use Accept=no in the .socket unit") == true)
    }

    @Test func refusesAUnixSocketWhereTCPWasAskedForAndTheReverse() throws {
        let unix = try ListeningSocket.bind(.unix(path: Self.temporaryDirectory() + "/app.sock"))
        defer { unix.close() }
        let tcp = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { tcp.close() }
        let wantedTCP = Self.adoptionError(unix.fileDescriptor, for: .tcp(host: "127.0.0.1", port: 8080))
        #expect(wantedTCP?.code == .unusable)
        #expect(
            wantedTCP?.message
                == "fd \(unix.fileDescriptor) 'http' is a Unix socket but this daemon listens on TCP: use ListenStream=127.0.0.1:8080 in the .socket unit"
        )
        let wantedUnix = Self.adoptionError(tcp.fileDescriptor, for: .unix(path: "/run/app/app.sock"))
        #expect(wantedUnix?.code == .unusable)
        #expect(
            wantedUnix?.message
                == "fd \(tcp.fileDescriptor) 'http' is a TCP/IPv4 socket but this daemon listens on a Unix socket: use ListenStream=/run/app/app.sock in the .socket unit"
        )
    }

    @Test func refusesADescriptorThatIsNotOpen() throws {
        // Far above any RLIMIT_NOFILE: never open (a number just closed could be reused by a
        // concurrent test).
        let fd = Int32.max - 1
        let error = Self.adoptionError(fd, for: .tcp(host: "127.0.0.1", port: 8080))
        #expect(error?.code == .unusable)
        #expect(error?.errno == EBADF)
    }

    // MARK: Choosing by name

    @Test func nothingPassedMeansBind() throws {
        let socket = try ListeningSocket(name: "http", from: [], orBind: .tcp(host: "127.0.0.1", port: 0))
        defer { socket.close() }
        #expect(socket.origin == .bound)
    }

    @Test func aNameThatWasNotPassedWhileOthersWereIsAnError() {
        let passed = [ListenedFileDescriptor(fileDescriptor: 3, name: "hello-http.socket")]
        let error = #expect(throws: SystemdError.self) {
            try ListeningSocket(name: "http", from: passed, orBind: .tcp(host: "127.0.0.1", port: 0))
        }
        #expect(error?.code == .notPassed)
        #expect(
            error?.message
                == "systemd passed fd 3 'hello-http.socket' but none named 'http': set FileDescriptorName=http in the .socket unit (without it the name is the unit's name)"
        )
    }

    @Test func aConnectionFromAcceptYesIsNamedAsSuch() throws {
        // systemd 252-256 name an Accept=yes connection "connection" whatever FileDescriptorName= says.
        var pair: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0)
        defer { for end in pair { close(end) } }
        let passed = [ListenedFileDescriptor(fileDescriptor: pair[0], name: "connection")]
        let error = #expect(throws: SystemdError.self) {
            try ListeningSocket(name: "http", from: passed, orBind: .tcp(host: "127.0.0.1", port: 0))
        }
        #expect(error?.code == .unusable)
        #expect(
            error?.message
                == "systemd passed fd \(pair[0]) 'connection', a connection rather than a listening socket, as Accept=yes passes (systemd before 257 names it so whatever FileDescriptorName= says): use Accept=no in the .socket unit"
        )
    }

    @Test func severalDescriptorsUnderOneNameAreAnError() {
        let passed = [
            ListenedFileDescriptor(fileDescriptor: 3, name: "http"),
            ListenedFileDescriptor(fileDescriptor: 4, name: "http"),
        ]
        let error = #expect(throws: SystemdError.self) {
            try ListeningSocket(name: "http", from: passed, orBind: .tcp(host: "127.0.0.1", port: 0))
        }
        #expect(error?.code == .ambiguousName)
        #expect(error?.message.contains("systemd passed 2 descriptors named 'http' (fd 3 'http', fd 4 'http')") == true)
    }

    // MARK: LISTEN_* through an injected environment

    private static func parse(
        _ variables: [String: String],
        limit: Int32 = 1024
    ) throws(SystemdError)
        -> [ListenedFileDescriptor]
    {
        try ListenedFileDescriptor.parse(environment: { variables[$0] }, pid: 4242, descriptorLimit: limit)
    }

    @Test func namedDescriptorsFromThree() throws {
        let passed = try Self.parse(["LISTEN_PID": "4242", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "http:metrics"])
        #expect(
            passed == [
                ListenedFileDescriptor(fileDescriptor: 3, name: "http"),
                ListenedFileDescriptor(fileDescriptor: 4, name: "metrics"),
            ]
        )
        #expect(
            try Self.parse(["LISTEN_PID": "4242", "LISTEN_FDS": "1"]) == [.init(fileDescriptor: 3, name: "unknown")]
        )
        // Empty names and the longest (255) are systemd's too.
        let longest = String(repeating: "n", count: 255)
        #expect(
            try Self.parse(["LISTEN_PID": "4242", "LISTEN_FDS": "2", "LISTEN_FDNAMES": ":" + longest]).map(\.name)
                == ["", longest]
        )
    }

    @Test(arguments: [
        [:],
        ["LISTEN_FDS": "1", "LISTEN_FDNAMES": "http"],
        ["LISTEN_PID": "1", "LISTEN_FDS": "1", "LISTEN_FDNAMES": "http"],
        ["LISTEN_PID": "4242"],
        ["LISTEN_PID": "4242", "LISTEN_FDS": "0"],
    ])
    func nothingForThisProcess(variables: [String: String]) throws {
        #expect(try Self.parse(variables) == [])
    }

    @Test(arguments: [
        ["LISTEN_PID": "abc", "LISTEN_FDS": "1"],
        ["LISTEN_PID": "", "LISTEN_FDS": "1"],
        ["LISTEN_PID": "-4242", "LISTEN_FDS": "1"],
        ["LISTEN_PID": "0", "LISTEN_FDS": "1"],
        ["LISTEN_PID": "99999999999999999999999999", "LISTEN_FDS": "1"],
        ["LISTEN_PID": "4242 ", "LISTEN_FDS": "1"],
        ["LISTEN_PID": "4242", "LISTEN_FDS": "x"],
        ["LISTEN_PID": "4242", "LISTEN_FDS": ""],
        ["LISTEN_PID": "4242", "LISTEN_FDS": "-1"],
        ["LISTEN_PID": "4242", "LISTEN_FDS": "99999999999999999999999999"],
        ["LISTEN_PID": "4242", "LISTEN_FDS": "2147483647"],
        ["LISTEN_PID": "4242", "LISTEN_FDS": "1022"],
        ["LISTEN_PID": "4242", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "http"],
        ["LISTEN_PID": "4242", "LISTEN_FDS": "1", "LISTEN_FDNAMES": "http:metrics"],
        ["LISTEN_PID": "4242", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "http:met\nrics"],
        [
            "LISTEN_PID": "4242", "LISTEN_FDS": "1",
            "LISTEN_FDNAMES": "h" + String(repeating: "\u{301}", count: 1 << 16),
        ],
        ["LISTEN_PID": "4242", "LISTEN_FDS": "1", "LISTEN_FDNAMES": String(repeating: "n", count: 256)],
    ])
    func malformedVariablesAreAnErrorNamingTheVariable(variables: [String: String]) {
        let error = #expect(throws: SystemdError.self) { try Self.parse(variables) }
        #expect(error?.code == .malformedEnvironment)
        let named = ["LISTEN_PID=", "LISTEN_FDS=", "LISTEN_FDNAMES="].contains { error?.message.hasPrefix($0) == true }
        #expect(named, "\(String(describing: error))")
        #expect(error?.message.contains("unset LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES") == true)
    }

    @Test func countsAreBoundedByTheDescriptorLimitAndAnAbsoluteCap() throws {
        #expect(try Self.parse(["LISTEN_PID": "4242", "LISTEN_FDS": "1021"], limit: 1024).count == 1021)
        #expect(throws: SystemdError.self) { try Self.parse(["LISTEN_PID": "4242", "LISTEN_FDS": "1022"]) }
        #expect(throws: SystemdError.self) {
            try Self.parse(["LISTEN_PID": "4242", "LISTEN_FDS": "65537"], limit: .max)
        }
        // A negative limit (never from getrlimit) refuses everything instead of overflowing.
        #expect(throws: SystemdError.self) {
            try Self.parse(["LISTEN_PID": "4242", "LISTEN_FDS": "1"], limit: .min)
        }
    }

    // MARK: Helpers

    private static func adoptionError(_ fd: Int32, for address: ListeningSocket.Address) -> SystemdError? {
        #expect(throws: SystemdError.self) {
            try ListeningSocket.adopt(ListenedFileDescriptor(fileDescriptor: fd, name: "http"), for: address)
        }
    }

    private static func option(_ name: Int32, _ fd: Int32) -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(fd, SOL_SOCKET, name, &value, &length) == 0 ? value : -1
    }

    /// Connects a client to `socket`, accepts it on `socket`, and closes both.
    private static func expectConnectable(_ socket: ListeningSocket) throws {
        let client = try SocketClient.connect(to: socket.localAddress)
        defer { close(client) }
        let accepted = accept(socket.fileDescriptor, nil, nil)
        #expect(accepted >= 0)
        if accepted >= 0 { close(accepted) }
    }

    static func temporaryDirectory() -> String { VigilTesting.temporaryDirectory("vigil-socket") }
}

/// A blocking client for the socket tests.
enum SocketClient {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// A connected stream socket to `address` (IPv4 or a Unix path), with a 30 s receive timeout
    /// so a test whose peer never answers fails instead of hanging.
    static func connect(to address: ListeningSocket.LocalAddress) throws -> Int32 {
        let family: Int32
        switch address {
        case .ipv4: family = AF_INET
        case .unix: family = AF_UNIX
        default: throw Failure(description: "cannot connect to \(address) in this test")
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let status: Int32
        switch address {
        case .ipv4(let host, let port):
            var socketAddress = sockaddr_in()
            socketAddress.sin_family = sa_family_t(AF_INET)
            socketAddress.sin_port = port.bigEndian
            _ = inet_pton(AF_INET, host, &socketAddress.sin_addr)
            status = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        case .unix(let path):
            var socketAddress = sockaddr_un()
            socketAddress.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &socketAddress.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
            status = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
        default:
            status = -1
        }
        guard status == 0 else {
            let code = errno
            close(fd)
            throw Failure(description: "connect to \(address): errno \(code)")
        }
        return fd
    }

    /// Everything the peer sends until it closes (or the receive timeout).
    static func readAll(_ fd: Int32) -> String {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1024)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

@Suite struct FileDescriptorStoreTests {
    @Test(arguments: ["", "a:b", "tab\there", "new\nline", "é", String(repeating: "n", count: 256)])
    func anInvalidNameIsRefusedBeforeAnythingIsSent(name: String) throws {
        let socket = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: 0))
        defer { socket.close() }
        let error = #expect(throws: SystemdError.self) { try socket.storeInServiceManager(name: name) }
        #expect(error?.code == .storeFailed)
        #expect(error?.message.contains("a name is 1 to 255 printable ASCII characters without ':'") == true)
    }
}

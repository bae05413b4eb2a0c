import VigilPOSIX
import VigilPlatform

/// A listening stream socket: the one systemd passed by socket activation under a
/// `FileDescriptorName=`, or, without socket activation, one bound here.
///
/// Call it once per socket, in the start of the listener that serves it (a `ServiceListener`'s
/// part, before it says it is ready), so that a bind failure is a failed start:
///
/// ```swift
/// let http = try ListeningSocket(name: "http", orBind: .tcp(host: "127.0.0.1", port: 8080))
/// // Hand http.fileDescriptor to the server, e.g. SwiftNIO's ServerBootstrap.withBoundSocket(_:),
/// // or serve it without SwiftNIO: for try await connection in try http.connections() { … }
/// ```
///
/// An adopted descriptor is checked before use — a socket (`fstat`), a stream socket
/// (`SO_TYPE`), listening (`SO_ACCEPTCONN`), of the family the address asks for (`SO_DOMAIN`:
/// IPv4 or IPv6 for ``Address/tcp(host:port:)``, Unix for ``Address/unix(path:)``) — and any
/// mismatch is a ``SystemdError`` that names the descriptor and the line the `.socket`
/// unit needs. The address of an adopted socket is the unit's business: the address given here
/// is only what is bound when systemd passed nothing.
///
/// The socket is the caller's: ``close()`` it, or hand the descriptor to a server that owns it.
public struct ListeningSocket: Sendable, Hashable {
    /// Where to listen when systemd passed no socket.
    public enum Address: Sendable, Hashable {
        /// TCP on a numeric IPv4 or IPv6 address (`127.0.0.1`, `::1`, `0.0.0.0`, `::`; brackets
        /// allowed) and a port; port 0 picks a free one (read it from ``ListeningSocket/port``).
        case tcp(host: String, port: UInt16)
        /// A Unix stream socket at a path (at most 107 bytes); a leading `@` means Linux's
        /// abstract namespace. A stale socket file nobody listens on is replaced.
        case unix(path: String)

        /// As `ListenStream=` spells it: `127.0.0.1:8080`, `[::1]:8080`, `/run/app.sock`.
        package var spelled: String {
            switch self {
            case .tcp(let host, let port):
                host.contains(":") && !host.hasPrefix("[") ? "[\(host)]:\(port)" : "\(host):\(port)"
            case .unix(let path): path
            }
        }
    }

    /// Where the socket came from.
    public enum Origin: Sendable, Hashable {
        /// Passed by systemd under this `FileDescriptorName=`.
        case adopted(name: String)
        /// Bound by this process because systemd passed none.
        case bound
    }

    /// The address the socket is bound to (`getsockname`).
    public enum LocalAddress: Sendable, Hashable, CustomStringConvertible {
        case ipv4(host: String, port: UInt16)
        case ipv6(host: String, port: UInt16)
        /// A path, or `@name` in the abstract namespace; empty when unnamed.
        case unix(path: String)
        /// A family Vigil does not decode: only in the package's own checks of a passed
        /// descriptor, never in a socket a public initializer returns (the family is checked).
        case other(family: Int32)

        /// The TCP port, or `nil` for a Unix socket.
        package var port: UInt16? {
            switch self {
            case .ipv4(_, let port), .ipv6(_, let port): port
            case .unix, .other: nil
            }
        }

        public var description: String {
            switch self {
            case .ipv4(let host, let port): "\(host):\(port)"
            case .ipv6(let host, let port): "[\(host)]:\(port)"
            case .unix(let path): path
            case .other(let family): "address family \(family)"
            }
        }
    }

    /// The listening descriptor, with `FD_CLOEXEC` set.
    public let fileDescriptor: Int32
    /// Adopted from systemd or bound here.
    public let origin: Origin
    /// The address it listens on.
    public let localAddress: LocalAddress

    /// The TCP port it listens on (useful after binding port 0), or `nil` for a Unix socket.
    public var port: UInt16? { localAddress.port }

    /// Adopts the socket systemd passed under `name`, else binds and listens on `address`.
    ///
    /// The first call in the process reads `LISTEN_PID`, `LISTEN_FDS` and `LISTEN_FDNAMES`
    /// (see `sd_listen_fds_with_names(3)`) and removes them, so children
    /// do not inherit them; `NOTIFY_SOCKET` is never touched. Then:
    /// - systemd passed nothing: `address` is bound (`SO_REUSEADDR`, `FD_CLOEXEC`) and listened on;
    /// - systemd passed exactly one descriptor named `name`: it is checked and adopted;
    /// - systemd passed descriptors but none named `name`: an error (`notPassed`) — binding
    ///   the address instead would race systemd for it. Bind a socket that systemd is not meant
    ///   to pass with ``bind(_:backlog:)``;
    /// - several descriptors share `name` (one `.socket` unit with several `Listen*=` lines):
    ///   an error (`ambiguousName`) — give each address its own `.socket` unit and name;
    /// - systemd passed a connection named `connection` (`Accept=yes`, which ignores
    ///   `FileDescriptorName=`): an error (`unusable`) asking for `Accept=no`;
    /// - `name` was already adopted in this process: an error (`alreadyAdopted`).
    ///
    /// - Parameters:
    ///   - name: the `.socket` unit's `FileDescriptorName=`.
    ///   - address: what to bind without socket activation.
    ///   - backlog: `listen(2)`'s backlog for a bound socket.
    /// - Throws: ``SystemdError``, whose message says what to change.
    /// - Important: The first call reads and changes the process environment (it removes
    ///   `LISTEN_*`): make it before threads of the daemon's own read the environment.
    public init(name: String, orBind address: Address, backlog: Int32 = 128) throws(SystemdError) {
        let passed = try SocketActivation.passed(unsetEnvironment: true)
        guard let descriptor = try Self.select(name, from: passed) else {
            self = try Self.bind(address, backlog: backlog)
            return
        }
        guard SocketActivation.markAdopted(descriptor.fileDescriptor) else {
            throw SystemdError.listeningSocket(
                .alreadyAdopted,
                "fd \(descriptor.fileDescriptor) '\(name)' was already adopted in this process: create one ListeningSocket per name and share it"
            )
        }
        self = try Self.adopt(descriptor, for: address)
    }

    /// Adopts the descriptor named `name` from `passed`, else binds `address`: the same rules as
    /// ``init(name:orBind:backlog:)``, for a list the caller got from
    /// `ListenedFileDescriptor.adopt(unsetEnvironment:)` (or made, in a test). Does not
    /// remember what was adopted.
    package init(
        name: String,
        from passed: [ListenedFileDescriptor],
        orBind address: Address,
        backlog: Int32 = 128
    ) throws(SystemdError) {
        if let descriptor = try Self.select(name, from: passed) {
            self = try Self.adopt(descriptor, for: address)
        } else {
            self = try Self.bind(address, backlog: backlog)
        }
    }

    private init(fileDescriptor: Int32, origin: Origin) {
        self.fileDescriptor = fileDescriptor
        self.origin = origin
        self.localAddress = Self.localAddress(of: fileDescriptor)
    }

    /// Closes the descriptor. A Unix socket's path is left in place (the next bind replaces it).
    public func close() {
        SystemCall.close(fileDescriptor)
    }

    /// The one descriptor named `name`; `nil` when systemd passed none at all.
    static func select(
        _ name: String,
        from passed: [ListenedFileDescriptor]
    ) throws(SystemdError) -> ListenedFileDescriptor? {
        if passed.isEmpty { return nil }
        let matching = passed.filter { $0.name == name }
        if matching.count == 1 { return matching[0] }
        func list(_ descriptors: [ListenedFileDescriptor]) -> String {
            let shown = descriptors.prefix(6).map { "fd \($0.fileDescriptor) '\($0.name)'" }
            return shown.joined(separator: ", ") + (descriptors.count > shown.count ? ", …" : "")
        }
        // With Accept=yes systemd passes one connection per service instance; before 257 it names
        // it "connection", whatever FileDescriptorName= says (257 uses that name, and adopt(_:for:)
        // finds it is not listening): name the real cause.
        if matching.isEmpty, let connection = passed.first(where: { $0.name == "connection" && !isListening($0) }) {
            throw SystemdError.listeningSocket(
                .unusable,
                "systemd passed fd \(connection.fileDescriptor) 'connection', a connection rather than a listening socket, as Accept=yes passes (systemd before 257 names it so whatever FileDescriptorName= says): use Accept=no in the .socket unit"
            )
        }
        if matching.isEmpty {
            throw SystemdError.listeningSocket(
                .notPassed,
                "systemd passed \(list(passed)) but none named '\(name)': set FileDescriptorName=\(name) in the .socket unit (without it the name is the unit's name)"
            )
        }
        throw SystemdError.listeningSocket(
            .ambiguousName,
            "systemd passed \(matching.count) descriptors named '\(name)' (\(list(matching))): a .socket unit with several Listen*= lines passes them all under one name; give each address its own .socket unit with its own FileDescriptorName="
        )
    }
}

// MARK: - Adopting

extension ListeningSocket {
    /// Checks that `descriptor` is a listening stream socket of the family `address` asks for,
    /// sets `FD_CLOEXEC` on it and adopts it.
    ///
    /// - Parameters:
    ///   - descriptor: a descriptor systemd passed (`ListenedFileDescriptor.adopt(unsetEnvironment:)`).
    ///   - address: what the daemon would bind without socket activation; only its kind (TCP or
    ///     Unix) is checked, and it appears in the messages as the `ListenStream=` to write.
    /// - Throws: ``SystemdError`` with code `unusable`, the message saying why.
    package static func adopt(
        _ descriptor: ListenedFileDescriptor,
        for address: Address
    ) throws(SystemdError) -> ListeningSocket {
        let fd = descriptor.fileDescriptor
        let label = "fd \(fd) '\(descriptor.name)'"
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw SystemdError.listeningSocket(
                .unusable,
                "\(label) is not open in this process: check the service's Sockets= and the .socket unit",
                cause: SystemError(path: label, operation: "stat", errno: errno)
            )
        }
        let kind = info.st_mode & S_IFMT
        guard kind == S_IFSOCK else {
            throw SystemdError.listeningSocket(
                .unusable,
                "\(label) is \(FileSystem.describeKind(kind)), not a socket: pass a socket with ListenStream=\(address.spelled) in the .socket unit"
            )
        }
        let type = try option(SO_TYPE, of: fd, label)
        guard type == Int32(SOCK_STREAM.rawValue) else {
            let (what, line) =
                switch type {
                case Int32(SOCK_DGRAM.rawValue): ("a datagram socket", "ListenDatagram=")
                case Int32(SOCK_SEQPACKET.rawValue): ("a sequential-packet socket", "ListenSequentialPacket=")
                default: ("a socket of type \(type), not a stream socket", "another Listen*= line")
                }
            throw SystemdError.listeningSocket(
                .unusable,
                "\(label) is \(what): use ListenStream=\(address.spelled) (not \(line)) in the .socket unit"
            )
        }
        guard try option(SO_ACCEPTCONN, of: fd, label) != 0 else {
            throw SystemdError.listeningSocket(
                .unusable,
                "\(label) is a stream socket that is not listening (a connection, as Accept=yes passes): use Accept=no in the .socket unit"
            )
        }
        let family = try option(SO_DOMAIN, of: fd, label)
        let wanted: [Int32] =
            switch address {
            case .tcp: [AF_INET, AF_INET6]
            case .unix: [AF_UNIX]
            }
        guard wanted.contains(family) else {
            let asked =
                switch address {
                case .tcp: "TCP"
                case .unix: "a Unix socket"
                }
            throw SystemdError.listeningSocket(
                .unusable,
                "\(label) is \(describeFamily(family)) but this daemon listens on \(asked): use ListenStream=\(address.spelled) in the .socket unit"
            )
        }
        let flags = fcntl(fd, F_GETFD)
        guard flags >= 0, fcntl(fd, F_SETFD, flags | FD_CLOEXEC) == 0 else {
            let cause = SystemError(path: label, operation: "set FD_CLOEXEC on", errno: errno)
            throw SystemdError.listeningSocket(.unusable, "cannot set FD_CLOEXEC on \(label)", cause: cause)
        }
        return ListeningSocket(fileDescriptor: fd, origin: .adopted(name: descriptor.name))
    }

    private static func isListening(_ descriptor: ListenedFileDescriptor) -> Bool {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(descriptor.fileDescriptor, SOL_SOCKET, SO_ACCEPTCONN, &value, &length) == 0 && value != 0
    }

    private static func option(_ name: Int32, of fd: Int32, _ label: String) throws(SystemdError) -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, name, &value, &length) == 0 else {
            let cause = SystemError(path: label, operation: "read socket option \(name) of", errno: errno)
            throw SystemdError.listeningSocket(
                .unusable,
                "cannot read socket option \(name) of \(label)",
                cause: cause
            )
        }
        return value
    }

    private static func describeFamily(_ family: Int32) -> String {
        switch family {
        case AF_INET: "a TCP/IPv4 socket"
        case AF_INET6: "a TCP/IPv6 socket"
        case AF_UNIX: "a Unix socket"
        default: "a socket of address family \(family)"
        }
    }
}

// MARK: - Binding

extension ListeningSocket {
    /// Binds and listens on `address`, with `SO_REUSEADDR` and `FD_CLOEXEC`.
    ///
    /// For a Unix path, a socket file left by a process that is gone (connecting is refused) is
    /// removed and the bind retried once.
    ///
    /// - Throws: ``SystemdError`` with code `invalidAddress` (not a numeric IP address,
    ///   a path too long) or `bindFailed` (with the `errno` and what to do).
    public static func bind(_ address: Address, backlog: Int32 = 128) throws(SystemdError) -> ListeningSocket {
        switch address {
        case .tcp(let host, let port): try bindTCP(host: host, port: port, address: address, backlog: backlog)
        case .unix(let path): try bindUnix(path: path, address: address, backlog: backlog)
        }
    }

    private static func bindTCP(
        host: String,
        port: UInt16,
        address: Address,
        backlog: Int32
    ) throws(SystemdError) -> ListeningSocket {
        var bare = Substring(host)
        if bare.hasPrefix("["), bare.hasSuffix("]") { bare = bare.dropFirst().dropLast() }
        var hints = addrinfo()
        hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status =
            bare.isEmpty || bare.utf8.contains(0) ? EAI_NONAME : getaddrinfo(String(bare), String(port), &hints, &list)
        defer { if let list { freeaddrinfo(list) } }
        guard status == 0, let first = list?.pointee, let socketAddress = first.ai_addr else {
            throw SystemdError.listeningSocket(
                .invalidAddress,
                "cannot listen on \(address.spelled): '\(host)' is not a numeric IPv4 or IPv6 address; use e.g. 127.0.0.1, ::1, 0.0.0.0 (all IPv4) or :: (all)"
            )
        }
        return try bindAndListen(first.ai_family, socketAddress, first.ai_addrlen, address, backlog).get()
    }

    private static func bindUnix(
        path: String,
        address: Address,
        backlog: Int32
    ) throws(SystemdError) -> ListeningSocket {
        // A filesystem path needs its terminating NUL inside sun_path.
        guard let unixAddress = UnixSocketAddress(path) else {
            throw SystemdError.listeningSocket(
                .invalidAddress,
                "cannot listen on Unix socket '\(path.prefix(200))': a path must be 1 to \(UnixSocketAddress.capacity - 1) bytes without NUL (it is \(path.utf8.count)); choose a shorter path, e.g. under /run"
            )
        }
        let attempt = {
            unixAddress.withSocketAddress { socketAddress, length in
                bindAndListen(AF_UNIX, socketAddress, length, address, backlog)
            }
        }
        let first = attempt()
        guard case .failure(let error) = first, error.errno == EADDRINUSE, !unixAddress.isAbstract,
            isStale(unixAddress)
        else {
            return try first.get()
        }
        unlink(path)
        return try attempt().get()
    }

    /// A socket file at the address nobody listens on: left by a process that is gone.
    private static func isStale(_ address: UnixSocketAddress) -> Bool {
        var info = stat()
        guard lstat(address.text, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK else { return false }
        let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { return false }
        let owned = FileDescriptor(probe)
        return SystemCall.connect(owned.rawValue, address) != 0 && errno == ECONNREFUSED
    }

    private static func bindAndListen(
        _ family: Int32,
        _ socketAddress: UnsafePointer<sockaddr>,
        _ length: socklen_t,
        _ address: Address,
        _ backlog: Int32
    ) -> Result<ListeningSocket, SystemdError> {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            let cause = SystemError(path: "\(address.spelled)", operation: "create a socket for", errno: errno)
            return .failure(
                SystemdError.listeningSocket(.bindFailed, "cannot create a socket for \(address.spelled)", cause: cause)
            )
        }
        var yes: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        if SystemCall.bind(fd, socketAddress, length) != 0 {
            let code = errno
            SystemCall.close(fd)
            var info = stat()
            let notASocket: String? =
                if code == EADDRINUSE, case .unix(let path) = address, lstat(path, &info) == 0,
                    info.st_mode & S_IFMT != S_IFSOCK
                {
                    FileSystem.describeKind(info.st_mode & S_IFMT)
                } else {
                    nil
                }
            let advice =
                switch code {
                case EADDRINUSE where notASocket != nil:
                    "the path is \(notASocket ?? ""), not a socket: choose another path (a file in the runtime directory)"
                case EADDRINUSE:
                    "another socket is bound there: stop the process that holds it, choose another address, or let a .socket unit pass it"
                case EACCES where family != AF_UNIX:
                    "a port below 1024 needs CAP_NET_BIND_SERVICE (AmbientCapabilities= in the unit) or a .socket unit that passes it"
                case EACCES:
                    "no permission to create the socket file: check the directory's owner and mode (RuntimeDirectory= in the unit)"
                case EADDRNOTAVAIL: "the address is not on any interface of this host"
                case ENOENT: "the directory does not exist: create it (RuntimeDirectory= in the unit)"
                default: "check the address"
                }
            let cause = SystemError(path: "\(address.spelled)", operation: "bind", errno: code)
            return .failure(
                SystemdError.listeningSocket(.bindFailed, "cannot bind \(address.spelled): \(advice)", cause: cause)
            )
        }
        guard listen(fd, max(backlog, 1)) == 0 else {
            let code = errno
            SystemCall.close(fd)
            let cause = SystemError(path: "\(address.spelled)", operation: "listen on", errno: code)
            return .failure(
                SystemdError.listeningSocket(.bindFailed, "cannot listen on \(address.spelled)", cause: cause)
            )
        }
        return .success(ListeningSocket(fileDescriptor: fd, origin: .bound))
    }

    /// `getsockname(2)` decoded; `.other(family: -1)` when it fails.
    static func localAddress(of fd: Int32) -> LocalAddress {
        address(of: fd, getsockname)
    }

    /// `getpeername(2)` decoded (a connection's peer); `.other(family: -1)` when it fails.
    static func peerAddress(of fd: Int32) -> LocalAddress {
        address(of: fd, getpeername)
    }

    private static func address(
        of fd: Int32,
        _ call: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32
    ) -> LocalAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(fd, $0, &length) }
        }
        guard status == 0 else { return .other(family: -1) }
        switch Int32(storage.ss_family) {
        case AF_INET:
            let ipv4 = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in.self) }
            let host = withUnsafeBytes(of: ipv4.sin_addr) { numeric(AF_INET, $0) }
            return .ipv4(host: host, port: UInt16(bigEndian: ipv4.sin_port))
        case AF_INET6:
            let ipv6 = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in6.self) }
            let host = withUnsafeBytes(of: ipv6.sin6_addr) { numeric(AF_INET6, $0) }
            return .ipv6(host: host, port: UInt16(bigEndian: ipv6.sin6_port))
        case AF_UNIX:
            return .unix(path: UnixSocketAddress(storage, length: length).text)
        case let family:
            return .other(family: family)
        }
    }

    private static func numeric(_ family: Int32, _ address: UnsafeRawBufferPointer) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        guard inet_ntop(family, address.baseAddress, &buffer, socklen_t(buffer.count)) != nil else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

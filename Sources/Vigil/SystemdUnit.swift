import VigilPlatform

/// What a daemon declares about itself for the hardened units `NAME systemd-unit` prints.
///
/// Every Vigil daemon gets the same service unit (`Type=notify`, `ExecReload=` through its own
/// `reload --pid $MAINPID`, `DynamicUser=yes`, the three directories, a sandbox that
/// `systemd-analyze security` rates ≤ 1.0); what differs between daemons is declared here, and
/// each declaration adds its directive:
///
/// ```swift
/// let commandLine = DaemonCommandLine(
///     name: "jobs", version: "1.0", abstract: "Runs queued jobs.", configuration: Settings.self,
///     unit: SystemdUnit(watchdog: .seconds(30), socketInRuntimeDirectory: true, spawnsChildren: true))
/// ```
///
/// `systemd/README.md` in Vigil's repository gives the reason for every directive.
public struct SystemdUnit: Sendable, Hashable {
    /// `Description=`; `nil` takes the command line's abstract.
    package var description: String?
    /// `Documentation=` URIs (`man:jobs(8)`, `file:/usr/share/doc/jobs/README.md`), in order.
    package var documentation: [String]
    /// `WatchdogSec=`, for a daemon whose listeners have health checks (`checkHealth`): systemd
    /// restarts it when the pings stop. `nil`: no watchdog.
    package var watchdog: Duration?
    /// A socket the `.socket` unit creates lives in the runtime directory (`/run/NAME/…`): adds
    /// `RuntimeDirectoryPreserve=yes`, without which a stop deletes the socket file while the
    /// `.socket` unit still listens, and clients can no longer connect.
    package var socketInRuntimeDirectory: Bool
    /// The daemon spawns child processes that must outlive the stop signal until it has drained
    /// them: adds `KillMode=mixed` (SIGTERM to the main process only; SIGKILL to all at the end).
    package var spawnsChildren: Bool
    /// How many descriptors the daemon keeps in systemd's store across restarts
    /// (`ListeningSocket.storeInServiceManager`): `FileDescriptorStoreMax=`; 0 adds nothing.
    package var storedDescriptors: Int
    /// `FileDescriptorName=` of the `.socket` unit (`systemd-unit --socket ADDRESS`): the name the
    /// daemon passes to `ListeningSocket(name:orBind:)`; `nil` takes the daemon's name.
    package var socketName: String?
    /// The daemon serves only on the socket its `.socket` unit passes (`NAME.socket`, printed by
    /// `systemd-unit --socket`): adds `Requires=NAME.socket` and `After=NAME.socket`, so that
    /// `systemctl start NAME` listens there first and the socket outlives every restart.
    package var requiresSocketUnit: Bool
    /// The daemon also listens on a loopback TCP port it binds itself: instead of
    /// `PrivateNetwork=yes` (a network namespace whose loopback no client can reach), the host's
    /// network with `RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6` and
    /// `IPAddressAllow=localhost` beside `IPAddressDeny=any`.
    package var loopbackNetwork: Bool
    /// The daemon connects to other hosts (a database, an API, jobs that fetch over the network):
    /// the host's network with `RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6` and no
    /// `IPAddressDeny=` (which drops every packet to another host); it takes the place of
    /// `loopbackNetwork`. Without it (and without `loopbackNetwork`) the daemon runs with
    /// `PrivateNetwork=yes`: only a loopback of its own, no route anywhere.
    package var outboundNetwork: Bool
    /// The credentials the daemon reads with `Credentials` (VigilSystemd): one
    /// `LoadCredential=`, `LoadCredentialEncrypted=` or `SetCredential=` line each, in order.
    package var credentials: [Credential]
    /// Directories outside its own three that the daemon writes (an inbox it empties, a spool it
    /// fills): one `ReadWritePaths=` line each, the one way through `ProtectSystem=strict`, which
    /// keeps every other path read-only. Each must exist when the service starts (systemd fails
    /// the start with 226/NAMESPACE otherwise), and the daemon's transient user needs the
    /// permission to write there (`DynamicUser=yes`: a group the admin grants with
    /// `SupplementaryGroups=` in a drop-in, or an ACL). Absolute paths, not `/`, with no `.` or
    /// `..` component and no white space, control character, `%`, quote or backslash:
    /// `systemd-unit` refuses to print a unit with another.
    package var writablePaths: [String]
    /// `TimeoutStopSec=`: how long systemd lets a stop take before it kills the daemon (and, with
    /// `spawnsChildren`, its children). Keep it above the longest stop: the listeners' terminate
    /// budgets added up (they stop one after the other), plus the exit barrier and a margin;
    /// `run` warns when the daemon's budgets outgrow it.
    package var stopTimeout: Duration

    /// A unit with the given declarations; every one is off by default, and `TimeoutStopSec=` is
    /// 60 s (`stopTimeout:`).
    public init(
        description: String? = nil,
        documentation: [String] = [],
        watchdog: Duration? = nil,
        socketInRuntimeDirectory: Bool = false,
        spawnsChildren: Bool = false,
        storedDescriptors: Int = 0,
        socketName: String? = nil,
        requiresSocketUnit: Bool = false,
        loopbackNetwork: Bool = false,
        outboundNetwork: Bool = false,
        credentials: [Credential] = [],
        writablePaths: [String] = [],
        stopTimeout: Duration = .seconds(60)
    ) {
        self.description = description
        self.documentation = documentation
        self.watchdog = watchdog
        self.socketInRuntimeDirectory = socketInRuntimeDirectory
        self.spawnsChildren = spawnsChildren
        self.storedDescriptors = storedDescriptors
        self.socketName = socketName
        self.requiresSocketUnit = requiresSocketUnit
        self.loopbackNetwork = loopbackNetwork
        self.outboundNetwork = outboundNetwork
        self.credentials = credentials
        self.writablePaths = writablePaths
        self.stopTimeout = stopTimeout
    }

    /// A credential the unit hands the daemon in `$CREDENTIALS_DIRECTORY`, where
    /// `Credentials.read(_:)` finds it under its name:
    ///
    /// ```swift
    /// SystemdUnit(credentials: [.load("api-token"), .loadEncrypted("db-key", from: "/etc/jobs/db-key.cred")])
    /// ```
    ///
    /// prints `LoadCredential=api-token` and `LoadCredentialEncrypted=db-key:/etc/jobs/db-key.cred`.
    /// Without a path, systemd looks for a file of the credential's name in its credential
    /// stores (`/etc/credstore/`, `/run/credstore/`, `/usr/lib/credstore/`, and
    /// `/etc/credstore.encrypted/`… for an encrypted one): the admin puts the secret there, no
    /// drop-in needed, and when it is in none the service starts without it (`Credentials.read`
    /// then throws `missing`, naming it), so an optional credential is declared that way. With a
    /// path, a missing file fails the start (exit status 243/CREDENTIALS). A name is 1 to 255 bytes without `/`, `:`, white space or control
    /// characters, and not `.` or `..`: `systemd-unit` refuses to print a unit with another.
    public struct Credential: Sendable, Hashable {
        enum Kind: Sendable, Hashable { case load, loadEncrypted, set }
        let kind: Kind
        /// The credential's name: its file in `$CREDENTIALS_DIRECTORY`.
        package let name: String
        let source: String?

        /// `LoadCredential=NAME[:PATH]`: the file at `path` (absolute), or without one the file
        /// `name` in systemd's credential stores.
        public static func load(_ name: String, from path: String? = nil) -> Credential {
            Credential(kind: .load, name: name, source: path)
        }

        /// `LoadCredentialEncrypted=NAME[:PATH]` (systemd 250 and later): a file made with
        /// `systemd-creds encrypt`, decrypted by systemd for the daemon alone.
        public static func loadEncrypted(_ name: String, from path: String? = nil) -> Credential {
            Credential(kind: .loadEncrypted, name: name, source: path)
        }

        /// `SetCredential=NAME:VALUE`: a value written in the unit itself, readable by whoever
        /// reads the unit file: a default or a setting, never a secret (a `LoadCredential=` of
        /// the same name, in a drop-in, takes precedence over it).
        public static func set(_ name: String, to value: String) -> Credential {
            Credential(kind: .set, name: name, source: value)
        }

        /// The unit line.
        var line: String {
            switch kind {
            case .load: "LoadCredential=" + name + (source.map { ":" + $0 } ?? "")
            case .loadEncrypted: "LoadCredentialEncrypted=" + name + (source.map { ":" + $0 } ?? "")
            case .set: "SetCredential=" + name + ":" + SystemdUnit.line(source ?? "")
            }
        }

        /// Why this declaration cannot be printed as a unit line, or `nil`.
        var problem: String? {
            let bytes = name.utf8.count
            if bytes == 0 || bytes > 255 || name == "." || name == ".."
                || name.unicodeScalars.contains(where: {
                    $0 == "/" || $0 == ":" || $0 == "%" || $0.value < 0x21 || $0.value == 0x7F
                })
            {
                return
                    "credential name \(DisplayText.quoted(name, limit: 64)) is not 1 to 255 bytes without /, :, %, white space or control characters (nor . or ..)"
            }
            guard kind != .set, let path = source else { return nil }
            if !path.hasPrefix("/")
                || path.unicodeScalars.contains(where: { $0 == "%" || $0.value < 0x21 || $0.value == 0x7F })
            {
                return
                    "the path of credential '\(name)' (\(DisplayText.quoted(path, limit: 64))) is not an absolute path without white space, control characters or %"
            }
            return nil
        }
    }
}

extension SystemdUnit {
    /// The warning `run` logs when a stop may outlast ``stopTimeout`` (`TimeoutStopSec=`); `nil`
    /// when it fits.
    ///
    /// The stop calls the listeners' `terminate` one after the other, each for at most its
    /// budget, then waits at most `exitBarrier` for systemd to confirm the last notifications:
    /// their sum is the longest stop. A slow hook asks systemd for more time
    /// (`EXTEND_TIMEOUT_USEC=`), but a unit whose `TimeoutStopSec=` is shorter than the stop
    /// the daemon plans leans on that alone.
    ///
    /// - Parameters:
    ///   - terminateBudgets: every listener's terminate budget, as the daemon enforces them.
    ///   - exitBarrier: the daemon's exit barrier timeout.
    package func stopTimeoutWarning(terminateBudgets: [Duration], exitBarrier: Duration) -> String? {
        let longest = terminateBudgets.reduce(exitBarrier, +)
        guard longest > stopTimeout else { return nil }
        // A margin of a tenth, at least 5 s, rounded up to whole seconds.
        let margin = max(longest / 10, .seconds(5))
        let (seconds, attoseconds) = (longest + margin).components
        let advised = Duration.seconds(seconds + (attoseconds > 0 ? 1 : 0))
        return "The listeners' terminate budgets (\(terminateBudgets.count) listeners) and the exit barrier "
            + "add up to \(Self.seconds(longest)), more than the unit's TimeoutStopSec=\(Self.seconds(stopTimeout)): "
            + "a stop that uses them may be killed by systemd. Declare SystemdUnit(stopTimeout: "
            + "\(Self.seconds(advised))) (and reinstall the unit systemd-unit prints), or shorten ListenerBudgets.terminate."
    }

    /// ``stopTimeoutWarning(terminateBudgets:exitBarrier:)`` for `daemon`'s listeners (each with its
    /// own budgets or the daemon's) and exit barrier.
    package func stopTimeoutWarning(for daemon: Daemon) -> String? {
        stopTimeoutWarning(
            terminateBudgets: daemon.listeners.map { ($0.budgets ?? daemon.budgets).terminate },
            exitBarrier: daemon.exitBarrierTimeout
        )
    }

    /// The `.service` unit of the daemon `name`, whose executable is at `executable`.
    ///
    /// One directive per line, in the order of `systemd/README.md`'s table; a declaration that
    /// adds a directive adds one line where it belongs.
    package func service(name: String, abstract: String, executable: String) -> String {
        var unit = ["[Unit]", "Description=\(Self.line(description ?? abstract))"]
        unit += documentation.map { "Documentation=\(Self.line($0))" }
        if requiresSocketUnit { unit += ["Requires=\(name).socket", "After=\(name).socket"] }
        unit += ["", "[Service]", "Type=notify", "ExecStart=\(executable) run"]
        unit.append("ExecReload=\(executable) reload --pid $MAINPID")
        // A stop right behind a reload SIGTERMs the ExecReload= process, often before it runs
        // our code; without this the unit ends Result=signal (systemd/README.md).
        unit.append("SuccessExitStatus=SIGTERM")
        if let watchdog { unit.append("WatchdogSec=\(Self.seconds(watchdog))") }
        unit += [
            "Restart=on-failure",
            "RestartSec=1s",
            "TimeoutStartSec=90s",
            "TimeoutStopSec=\(Self.seconds(stopTimeout))",
            "TimeoutAbortSec=10s",
        ]
        if spawnsChildren { unit.append("KillMode=mixed") }
        if storedDescriptors > 0 { unit.append("FileDescriptorStoreMax=\(storedDescriptors)") }
        unit += credentials.map(\.line)
        unit += [
            "Environment=SWIFT_BACKTRACE=enable=no",
            "LimitNICE=-4",
            "",
            "DynamicUser=yes",
            "StateDirectory=\(name)",
            "RuntimeDirectory=\(name)",
        ]
        if socketInRuntimeDirectory { unit.append("RuntimeDirectoryPreserve=yes") }
        unit += [
            "ConfigurationDirectory=\(name)",
            "UMask=0077",
            "",
            "CapabilityBoundingSet=",
            "AmbientCapabilities=",
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
        ]
        unit += writablePaths.map { "ReadWritePaths=\($0)" }
        unit += [
            "ProtectHome=yes",
            "PrivateTmp=yes",
            "PrivateDevices=yes",
        ]
        let inet = loopbackNetwork || outboundNetwork
        if !inet { unit.append("PrivateNetwork=yes") }
        unit += [
            "PrivateUsers=yes",
            "PrivateIPC=yes",
            "ProtectHostname=yes",
            "ProtectClock=yes",
            "ProtectKernelTunables=yes",
            "ProtectKernelModules=yes",
            "ProtectKernelLogs=yes",
            "ProtectControlGroups=yes",
            "ProtectProc=invisible",
            "ProcSubset=pid",
            inet ? "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6" : "RestrictAddressFamilies=AF_UNIX",
            "RestrictNamespaces=yes",
            "RestrictRealtime=yes",
            "RestrictSUIDSGID=yes",
            "LockPersonality=yes",
            "MemoryDenyWriteExecute=yes",
            "RemoveIPC=yes",
            "DevicePolicy=closed",
        ]
        if !outboundNetwork { unit.append("IPAddressDeny=any") }
        if loopbackNetwork, !outboundNetwork { unit.append("IPAddressAllow=localhost") }
        unit += [
            "SystemCallArchitectures=native",
            "SystemCallFilter=@system-service",
            "SystemCallFilter=~@privileged",
            "SystemCallErrorNumber=EPERM",
            "",
            "[Install]",
            "WantedBy=multi-user.target",
        ]
        return unit.joined(separator: "\n") + "\n"
    }

    /// Why the declarations cannot be printed as a unit (a credential name or path systemd would
    /// refuse or read otherwise), or `nil`.
    package var problem: String? {
        credentials.lazy.compactMap(\.problem).first
            ?? writablePaths.lazy.compactMap(Self.problem(withWritablePath:)).first
    }

    /// Why `path` cannot be a `ReadWritePaths=` line as written, or `nil`: not absolute, `/`
    /// itself (the whole file system writable), a `.` or `..` component or an empty one (`//`),
    /// or a character systemd would read otherwise (white space or a control character ends
    /// the path or the line, `%` is a specifier, quotes and backslashes are unquoted).
    package static func problem(withWritablePath path: String) -> String? {
        let shown = DisplayText.quoted(path, limit: 64)
        // Bytes and scalars, not Characters: "/" or a quote before a combining mark is one
        // Character with it, which a check by Character would not see.
        guard FileSystem.isAbsolute(path), path.utf8.count > 1 else {
            return "the writable path \(shown) is not an absolute path below / (ReadWritePaths=)"
        }
        if path.unicodeScalars.contains(where: {
            $0.value < 0x21 || $0.value == 0x7F || $0 == "%" || $0 == "\"" || $0 == "'" || $0 == "\\"
        }) {
            return "the writable path \(shown) contains white space, a control character, %, a quote or a backslash"
        }
        let components = FileSystem.components(of: path, omittingEmpty: false).dropFirst()
        if components.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) {
            return "the writable path \(shown) has an empty, . or .. component: write it as the directory it names"
        }
        return path.utf8.count < Int(PATH_MAX) ? nil : "the writable path \(shown) is longer than PATH_MAX"
    }

    /// The `.socket` unit that listens on `address` for the daemon `name` and passes the socket
    /// to its service (`Accept=no`: one socket; connections queue in it while the service
    /// restarts).
    package func socket(name: String, address: String) -> String {
        [
            "[Unit]",
            "Description=\(Self.line(name)) listening socket",
            "",
            "[Socket]",
            "ListenStream=\(address)",
            "FileDescriptorName=\(socketName ?? name)",
            "Accept=no",
            "",
            "[Install]",
            "WantedBy=sockets.target",
        ].joined(separator: "\n") + "\n"
    }

    /// Why `address` cannot be a `ListenStream=`, or `nil` when it can: an absolute path (at most
    /// 107 bytes), an abstract `@name`, a port, `IPV4:PORT` or `[IPV6]:PORT`; no white space or
    /// control characters (they would end the directive or add another).
    package static func problem(withSocketAddress address: String) -> String? {
        guard !address.isEmpty else { return "the address is empty" }
        if address.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7F }) {
            return "the address contains white space or a control character"
        }
        if address.unicodeScalars.contains("%") {
            // systemd expands specifiers in ListenStream=: /run/%n would listen on /run/NAME.socket.
            return "the address contains %, which systemd expands as a specifier (%n, %i, …)"
        }
        if let quoting = address.unicodeScalars.first(where: { "\"'\\$".unicodeScalars.contains($0) }) {
            // Harmless to ListenStream= itself, but the path also goes into the unit's comments
            // and an admin's shell: one spelling that every reader takes alike.
            return "the address contains \(quoting); use a path without quotes, $ or \\"
        }
        let first = address.utf8.first
        if first == UInt8(ascii: "/") || first == UInt8(ascii: "@") {
            guard address.utf8.count > 1 else { return "the socket path or abstract name is empty" }
            if first == UInt8(ascii: "/"),
                FileSystem.components(of: address, omittingEmpty: false).dropFirst().contains(where: {
                    $0.isEmpty || $0 == "." || $0 == ".."
                })
            {
                return
                    "the socket path is not normalized (an empty, . or .. component); write it as the file's own path"
            }
            return address.utf8.count <= 107 ? nil : "a socket path is at most 107 bytes"
        }
        let expected = "expected /path, @abstract, PORT, IPV4:PORT or [IPV6]:PORT"
        let colon = address.lastIndex(of: ":")
        let port = colon.map { String(address[address.index(after: $0)...]) } ?? address
        // Decimal digits only, no sign and no leading zero: the one spelling that systemd's
        // parser (which may take "010" for octal) and the admin read alike.
        guard port.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), !port.hasPrefix("0"),
            let number = Int(port), (1...65535).contains(number)
        else { return expected }
        guard let colon else { return nil }
        var host = String(address[..<colon])
        var family = AF_INET
        if host.hasPrefix("[") && host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
            family = AF_INET6
        }
        var buffer = [UInt8](repeating: 0, count: 16)
        guard inet_pton(family, host, &buffer) == 1 else { return expected + " (a numeric address)" }
        return nil
    }

    /// `Duration` as systemd writes a time span: whole seconds as `30s`, else milliseconds.
    static func seconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        if attoseconds == 0 { return "\(seconds)s" }
        return "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000)ms"
    }

    /// Text on one line of a unit file: control characters (a newline would start a directive of
    /// its own) become spaces, `%` (a specifier) is doubled, a trailing `\\` (a continuation) goes.
    static func line(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if scalar == "%" { scalars.append("%") }
            scalars.append(scalar.value < 0x20 || scalar.value == 0x7F ? " " : scalar)
        }
        var line = String(scalars)
        while line.last == "\\" { line.removeLast() }
        return line
    }
}

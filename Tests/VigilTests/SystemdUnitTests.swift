import Logging
import Testing
import Vigil
import VigilTesting

/// `NAME systemd-unit`: each declaration adds its directive, nothing from outside can add a
/// directive of its own, and the options are checked.
@Suite struct SystemdUnitTests {
    static func service(_ unit: SystemdUnit) -> [String] {
        unit.service(name: "jobs", abstract: "Runs jobs.", executable: "/usr/bin/jobs")
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    @Test func everyDaemonGetsTheHardenedNotifyUnitWithItsOwnReload() {
        let lines = Self.service(SystemdUnit())
        for line in [
            "Description=Runs jobs.", "Type=notify", "ExecStart=/usr/bin/jobs run",
            "ExecReload=/usr/bin/jobs reload --pid $MAINPID", "DynamicUser=yes", "StateDirectory=jobs",
            "RuntimeDirectory=jobs", "ConfigurationDirectory=jobs", "PrivateNetwork=yes",
            "RestrictAddressFamilies=AF_UNIX", "WantedBy=multi-user.target",
        ] {
            #expect(lines.contains(line), "\(line)")
        }
        for directive in [
            "WatchdogSec=", "KillMode=", "RuntimeDirectoryPreserve=", "FileDescriptorStoreMax=", "Documentation=",
        ] {
            #expect(!lines.contains { $0.hasPrefix(directive) }, "\(directive) without its declaration")
        }
    }

    @Test func theStopTimeoutIsDeclaredAndCheckedAgainstTheTerminateBudgets() {
        #expect(Self.service(SystemdUnit()).contains("TimeoutStopSec=60s"))
        let unit = SystemdUnit(stopTimeout: .seconds(95))
        #expect(Self.service(unit).contains("TimeoutStopSec=95s"))
        #expect(!Self.service(unit).contains("TimeoutStopSec=60s"))
        // Four listeners of 20 s each and the 1 s exit barrier: 81 s, under 95 s but over 60 s.
        let budgets = Array(repeating: Duration.seconds(20), count: 4)
        #expect(unit.stopTimeoutWarning(terminateBudgets: budgets, exitBarrier: .seconds(1)) == nil)
        #expect(
            SystemdUnit().stopTimeoutWarning(terminateBudgets: budgets, exitBarrier: .seconds(1))
                == "The listeners' terminate budgets (4 listeners) and the exit barrier add up to 81s, more than the unit's TimeoutStopSec=60s: a stop that uses them may be killed by systemd. Declare SystemdUnit(stopTimeout: 90s) (and reinstall the unit systemd-unit prints), or shorten ListenerBudgets.terminate."
        )
        // A daemon's listeners: their own budgets, or the daemon's.
        let logging = DaemonLogging(
            levelControl: LogLevelControl(),
            logger: Logger(label: "t") { _ in SwiftLogNoOpLogHandler() },
            destination: .syslogPrefixedStderr
        )
        let log = AsyncRecorder<String>()
        var daemon = Daemon(
            identifier: "jobs",
            version: "0",
            listeners: [
                RecordingListener("queue", budgets: .init(terminate: .seconds(50)), log: log),
                RecordingListener("configuration", log: log),
            ],
            logging: logging
        )
        // 50 s of its own, the daemon's default 10 s, the 1 s exit barrier.
        #expect(SystemdUnit().stopTimeoutWarning(for: daemon)?.contains(" add up to 61s, ") == true)
        daemon.budgets = ListenerBudgets(terminate: .seconds(20))
        #expect(SystemdUnit().stopTimeoutWarning(for: daemon)?.contains(" add up to 71s, ") == true)
        #expect(SystemdUnit(stopTimeout: .seconds(80)).stopTimeoutWarning(for: daemon) == nil)
        daemon.budgets = ListenerBudgets(terminate: .seconds(5))
        #expect(SystemdUnit().stopTimeoutWarning(for: daemon) == nil)
        // The default budgets (10 s) of five listeners fit the default unit.
        #expect(
            SystemdUnit().stopTimeoutWarning(
                terminateBudgets: Array(repeating: .seconds(10), count: 5),
                exitBarrier: .seconds(1)
            ) == nil
        )
    }

    @Test func eachDeclarationAddsItsDirectiveInItsSection() throws {
        let lines = Self.service(
            SystemdUnit(
                documentation: ["man:jobs(8)"],
                watchdog: .milliseconds(1500),
                socketInRuntimeDirectory: true,
                spawnsChildren: true,
                storedDescriptors: 2
            )
        )
        let service = try #require(lines.firstIndex(of: "[Service]"))
        let install = try #require(lines.firstIndex(of: "[Install]"))
        for line in [
            "WatchdogSec=1500ms", "KillMode=mixed", "FileDescriptorStoreMax=2", "RuntimeDirectoryPreserve=yes",
        ] {
            let index = try #require(lines.firstIndex(of: line), "\(line)")
            #expect(index > service && index < install, "\(line) outside [Service]")
        }
        #expect(lines.firstIndex(of: "Documentation=man:jobs(8)")! < service)
        #expect(Self.service(SystemdUnit(watchdog: .seconds(30))).contains("WatchdogSec=30s"))
    }

    /// Issue 23: a daemon that reads credentials (`Credentials`) declares them, and the unit
    /// supplies them (before, the author added `LoadCredential=` to the printed unit by hand).
    @Test func declaredCredentialsArePrintedInTheServiceSection() throws {
        let lines = Self.service(
            SystemdUnit(credentials: [
                .load("api-token"), .load("tls-key", from: "/etc/jobs/tls.key"),
                .loadEncrypted("db-password", from: "/etc/jobs/db.cred"), .set("region", to: "eu west\n%x"),
            ])
        )
        let service = try #require(lines.firstIndex(of: "[Service]"))
        let install = try #require(lines.firstIndex(of: "[Install]"))
        let expected = [
            "LoadCredential=api-token", "LoadCredential=tls-key:/etc/jobs/tls.key",
            "LoadCredentialEncrypted=db-password:/etc/jobs/db.cred", "SetCredential=region:eu west %%x",
        ]
        let first = try #require(lines.firstIndex(of: expected[0]))
        #expect(Array(lines[first..<first + 4]) == expected, "in declaration order, one line each")
        #expect(first > service && first < install)
        #expect(!Self.service(SystemdUnit()).contains { $0.contains("Credential") })
        #expect(SystemdUnit(credentials: [.load("api-token"), .set("region", to: "eu")]).problem == nil)
    }

    /// A name or path systemd would refuse, or read as another directive, prints no unit.
    @Test func aCredentialSystemdWouldRefuseIsAProblem() {
        for credential in [
            SystemdUnit.Credential.load(""), .load("a/b"), .load("a:b"), .load(".."), .load("a b"),
            .load("token\nExecStartPre=/bin/evil"), .load("%n"), .load(String(repeating: "x", count: 256)),
            .load("token", from: "relative/path"), .loadEncrypted("token", from: "/etc/a b"),
        ] {
            #expect(SystemdUnit(credentials: [credential]).problem != nil, "\(credential)")
        }
    }

    @Test func aDaemonServingOnlyItsSocketUnitRequiresIt() throws {
        let lines = Self.service(SystemdUnit(requiresSocketUnit: true))
        let requires = try #require(lines.firstIndex(of: "Requires=jobs.socket"))
        #expect(lines[requires + 1] == "After=jobs.socket")
        #expect(requires < lines.firstIndex(of: "[Service]")!)
        #expect(!Self.service(SystemdUnit()).contains { $0.hasPrefix("Requires=") || $0.hasPrefix("After=") })
    }

    @Test func aLoopbackPortTradesThePrivateNetworkForLocalhostOnly() {
        let lines = Self.service(SystemdUnit(loopbackNetwork: true))
        #expect(!lines.contains("PrivateNetwork=yes"))
        #expect(lines.contains("RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"))
        #expect(!lines.contains("RestrictAddressFamilies=AF_UNIX"))
        let deny = lines.firstIndex(of: "IPAddressDeny=any")
        #expect(deny.map { lines[$0 + 1] } == "IPAddressAllow=localhost")
        #expect(!Self.service(SystemdUnit()).contains { $0.hasPrefix("IPAddressAllow=") })
    }

    /// A daemon that connects to other hosts (a helper's job runner, 2026-11-27, had no way to
    /// say so): the host's network, IP families, and no address filter; without it, none.
    @Test func anOutboundNetworkTradesThePrivateNetworkForTheHostsWithoutAnAddressFilter() {
        for lines in [
            Self.service(SystemdUnit(outboundNetwork: true)),
            Self.service(SystemdUnit(loopbackNetwork: true, outboundNetwork: true)),
        ] {
            #expect(!lines.contains("PrivateNetwork=yes"))
            #expect(lines.contains("RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"))
            #expect(!lines.contains { $0.hasPrefix("IPAddressDeny=") || $0.hasPrefix("IPAddressAllow=") })
        }
        let sealed = Self.service(SystemdUnit())
        #expect(sealed.contains("PrivateNetwork=yes"))
        #expect(sealed.contains("IPAddressDeny=any"))
        #expect(sealed.contains("RestrictAddressFamilies=AF_UNIX"))
    }

    /// A daemon that writes outside its own directories (an inbox it empties) declares them:
    /// `ProtectSystem=strict` keeps every other path read-only.
    @Test func declaredWritablePathsFollowProtectSystem() throws {
        let lines = Self.service(SystemdUnit(writablePaths: ["/srv/inbox", "/var/spool/jobs"]))
        let strict = try #require(lines.firstIndex(of: "ProtectSystem=strict"))
        #expect(
            Array(lines[(strict + 1)...].prefix(2)) == ["ReadWritePaths=/srv/inbox", "ReadWritePaths=/var/spool/jobs"]
        )
        #expect(!Self.service(SystemdUnit()).contains { $0.hasPrefix("ReadWritePaths=") })
        #expect(SystemdUnit(writablePaths: ["/srv/inbox"]).problem == nil)
    }

    @Test(arguments: [
        ("srv/inbox", "is not an absolute path below /"),
        ("/", "is not an absolute path below /"),
        ("", "is not an absolute path below /"),
        ("/srv/in box", "contains white space"),
        ("/srv/inbox\nExecStartPre=/bin/sh", "contains white space"),
        ("/srv/%n", "contains white space, a control character, %"),
        ("/srv/\"inbox\"", "a quote or a backslash"),
        ("/srv/../etc", "has an empty, . or .. component"),
        ("/srv/./inbox", "has an empty, . or .. component"),
        ("/srv//inbox", "has an empty, . or .. component"),
        ("/srv/inbox/", "has an empty, . or .. component"),
    ])
    func aWritablePathSystemdWouldReadOtherwiseIsAProblem(path: String, problem: String) throws {
        let found = try #require(SystemdUnit(writablePaths: ["/srv/ok", path]).problem)
        #expect(found.contains(problem), "\(found)")
        #expect(found.hasPrefix("the writable path "))
    }

    @Test func textFromTheDeclarationsCannotAddADirective() {
        let lines = Self.service(SystemdUnit(description: "evil\nExecStartPre=/bin/sh 100%\\"))
        #expect(lines.contains("Description=evil ExecStartPre=/bin/sh 100%%"))
        #expect(!lines.contains { $0.hasPrefix("ExecStartPre=") })
    }

    @Test func theSocketUnitPassesOneNamedSocket() {
        let unit = SystemdUnit(socketName: "queue").socket(name: "jobs", address: "127.0.0.1:7000")
        #expect(
            unit == """
                [Unit]
                Description=jobs listening socket

                [Socket]
                ListenStream=127.0.0.1:7000
                FileDescriptorName=queue
                Accept=no

                [Install]
                WantedBy=sockets.target

                """
        )
    }

    @Test(
        arguments: [
            ("/run/jobs/jobs.sock", nil), ("@jobs", nil), ("7000", nil), ("127.0.0.1:7000", nil), ("[::1]:7000", nil),
            ("", "the address is empty"), ("/run/a b", "the address contains white space or a control character"),
            ("/run/x\nExecStartPre=/bin/sh", "the address contains white space or a control character"),
            ("jobs.sock", "expected /path, @abstract, PORT, IPV4:PORT or [IPV6]:PORT"),
            ("127.0.0.1:0", "expected /path, @abstract, PORT, IPV4:PORT or [IPV6]:PORT"),
            ("localhost:7000", "expected /path, @abstract, PORT, IPV4:PORT or [IPV6]:PORT (a numeric address)"),
            ("[::1:7000", "expected /path, @abstract, PORT, IPV4:PORT or [IPV6]:PORT (a numeric address)"),
            ("/" + String(repeating: "a", count: 107), "a socket path is at most 107 bytes"),
            ("/run/%n", "the address contains %, which systemd expands as a specifier (%n, %i, …)"),
            ("@", "the socket path or abstract name is empty"), ("/", "the socket path or abstract name is empty"),
            ("080", "expected /path, @abstract, PORT, IPV4:PORT or [IPV6]:PORT"),
            ("+80", "expected /path, @abstract, PORT, IPV4:PORT or [IPV6]:PORT"),
            ("127.0.0.1:010", "expected /path, @abstract, PORT, IPV4:PORT or [IPV6]:PORT"),
            // The README promised these were refused; they were printed into the unit.
            ("/run/jobs/a\"b", "the address contains \"; use a path without quotes, $ or \\"),
            ("@'q", "the address contains '; use a path without quotes, $ or \\"),
            ("/run/a$b", "the address contains $; use a path without quotes, $ or \\"),
            ("/run/a\\b", "the address contains \\; use a path without quotes, $ or \\"),
            (
                "/tmp/../etc/x",
                "the socket path is not normalized (an empty, . or .. component); write it as the file's own path"
            ),
            // A quote or "/" before a combining mark is one Character with it: checked by
            // scalar and by byte, as systemd and the kernel read them.
            ("/run/a\"\u{301}", "the address contains \"; use a path without quotes, $ or \\"),
            (
                "/tmp/../\u{301}x",
                "the socket path is not normalized (an empty, . or .. component); write it as the file's own path"
            ),
            (
                "/run//jobs.sock",
                "the socket path is not normalized (an empty, . or .. component); write it as the file's own path"
            ),
        ] as [(String, String?)]
    )
    func socketAddressesAreChecked(address: String, problem: String?) {
        #expect(SystemdUnit.problem(withSocketAddress: address) == problem)
    }

    @Test(arguments: [
        (["systemd-unit", "--socket", "a b"], "--socket: 'a b': the address contains white space"),
        (["systemd-unit", "--executable", "bin/jobs"], "--executable: 'bin/jobs' is not an absolute path"),
        (["systemd-unit", "--executable", "/usr/bin/100%"], "--executable: '/usr/bin/100%' is not an absolute path"),
        (["systemd-unit", "extra"], "unexpected argument 'extra'"),
    ])
    func badOptionsAreUsageErrors(arguments: [String], message: String) async {
        let outcome = await DaemonCommandLineTests.execute(arguments)
        #expect(outcome.status == 64)
        #expect(outcome.standardError.hasPrefix("vigild: \(message)"), "\(outcome.standardError)")
        #expect(outcome.standardOutput.isEmpty)
    }

    @Test func theCommandPrintsTheUnitAtTheGivenPath() async {
        let outcome = await DaemonCommandLineTests.execute(["systemd-unit", "--executable", "/opt/jobs/bin/jobs"])
        #expect(outcome.status == 0)
        #expect(outcome.standardOutput.contains("\nExecStart=/opt/jobs/bin/jobs run\n"))
        #expect(outcome.standardOutput.contains("\nExecReload=/opt/jobs/bin/jobs reload --pid $MAINPID\n"))
        let unit = await DaemonCommandLineTests.execute(["systemd-unit"])
        #expect(unit.standardOutput.contains("\nExecStart=/usr/bin/vigild run\n"))
    }
}

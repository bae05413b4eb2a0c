// kv: a small key-value server built only with the calls a Vigil daemon author has.
//
// The library gives it vigild's command line and control protocol (run, check-config, reload,
// status; DaemonCommandLine), readiness that follows the bind, socket activation
// (ListeningSocket), accepted connections without SwiftNIO (AcceptedConnections), a drain at stop
// with the deadline handed over (ServiceListener), two-phase reloads of its configuration
// (ConfigurationListener), the watchdog and the journal. What is its own: the configuration type,
// the line protocol (KVServer), the SQLite store (KVStore, through GRDB) and a read cache
// dropped on memory pressure (KVCache).
import Logging
import Vigil
import VigilEarlySignals

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// systemd may signal the main PID the moment it exists; an unblocked SIGHUP would kill it. Linking
// VigilEarlySignals blocks the daemon's signals before the Swift runtime starts (and ignores
// SIGPIPE); the client commands get their signals back here.
EarlySignals.settle(arguments: CommandLine.arguments)

let commandLine = DaemonCommandLine(
    name: "kv",
    version: "0.1.0",
    abstract: "A small key-value server on Vigil: GET, SET and DEL over a Unix socket, values in SQLite.",
    configuration: KVConfiguration.self,
    // `kv systemd-unit` and `kv systemd-unit --socket /run/kv.sock` print Examples/kv/systemd/.
    // The socket (/run/kv.sock) is kv.socket's, outside the runtime directory: it listens while
    // the service starts and restarts. kv spawns no children; the TCP port is on loopback.
    unit: SystemdUnit(
        description: "kv, a Vigil example key-value server",
        documentation: ["file:/usr/share/doc/kv/README.md"],
        watchdog: .seconds(30),
        // FileDescriptorStoreMax=1: the read cache's snapshot across systemctl restart.
        storedDescriptors: 1,
        requiresSocketUnit: true,
        loopbackNetwork: true,
        // LoadCredential=kv-token: the TCP port's access token, from /etc/credstore/kv-token;
        // absent there, kv starts without it (it needs it only with tcpPort).
        credentials: [.load("kv-token")]
    )
)

// The default executor: GRDB runs SQLite on threads of its own, and each connection is a task.
await commandLine.main { options in
    let configuration = ConfigurationListener<KVConfiguration>(source: options.configurationSource)
    // GET hits, dropped on memory pressure, kept across a restart in systemd's descriptor store.
    let cache = KVCache()

    let server = ServiceListener(
        name: "kv",
        dependencies: ["configuration", "cache"],
        prepareReload: { reload, context in
            // The TCP socket is bound at start: a new port would silently not apply.
            let proposed = reload.proposed[CurrentConfiguration<KVConfiguration>.self]?.tcpPort
            let inForce = context.values[CurrentConfiguration<KVConfiguration>.self]?.tcpPort
            guard let proposed, let inForce, proposed != inForce else { return .accept }
            return .reject(
                reason: "tcpPort: changing it (\(inForce) → \(proposed)) takes a restart: systemctl restart kv"
            )
        },
        run: { ready in
            let context = ready.context
            let tcpPort = context.values[CurrentConfiguration<KVConfiguration>.self]?.tcpPort ?? 0
            // Here, in start, so that a bind or database failure is a failed start with the
            // reason in STATUS=. The state directory is StateDirectory= under systemd.
            if mkdir(options.stateDirectory, 0o700) != 0 && errno != EEXIST {
                throw SystemError(path: options.stateDirectory, operation: "create", errno: errno)
            }
            let store = try KVStore(path: options.stateDirectory + "/kv.sqlite")
            // Adopt the socket systemd passed as FileDescriptorName=kv, else bind one in the
            // runtime directory.
            let unix = try ListeningSocket(name: "kv", orBind: .unix(path: options.runtimeDirectory + "/kv.sock"))
            var listening = [try unix.connections(logger: context.logger)]
            var tcpToken: String?
            if tcpPort != 0 {
                // Every local user can reach the port: a client's first line is AUTH and the
                // access token, the credential kv-token (LoadCredential=kv-token in the printed
                // unit: the file /etc/credstore/kv-token).
                // A missing one fails the start, naming the unit lines that supply it.
                tcpToken = try Credentials.readString("kv-token")
                guard tcpToken?.isEmpty == false else { throw KVServer.EmptyToken() }
                // Bound here, never passed by systemd: loopback only.
                let tcp = try ListeningSocket.bind(.tcp(host: "127.0.0.1", port: UInt16(tcpPort)))
                listening.append(try tcp.connections(logger: context.logger))
            }
            let sockets = listening
            let token = tcpToken
            let kv = KVServer(store: store, cache: cache, values: context.values, logger: context.logger)
            // At stop: accept no more; idle connections end now, requests in flight may finish
            // until the deadline ServiceListener derives from the terminate budget.
            ready.onStop { deadline in
                for connections in sockets { connections.stop(deadline: deadline) }
            }
            let origin = unix.origin == .bound ? "bound here" : "passed by systemd"
            context.logger.info(
                "Serving \(sockets.map { "\($0.socket.localAddress)" }.joined(separator: " and ")) (\(origin))",
                metadata: ["kv.socket": "\(unix.localAddress)"]
            )
            ready()
            try await withThrowingDiscardingTaskGroup { group in
                for (index, connections) in sockets.enumerated() {
                    // The first is the Unix socket (its file mode guards it), the other TCP.
                    let required = index == 0 ? nil : token
                    // A socket that fails for good (not a listening socket) ends the part: a fatal
                    // fault, and Restart=on-failure brings the daemon back.
                    group.addTask {
                        try await withThrowingDiscardingTaskGroup { served in
                            for try await connection in connections {
                                served.addTask { await kv.serve(connection, token: required) }
                            }
                        }
                    }
                }
            }
        }
    )

    return Daemon(
        identifier: options.name,
        version: options.version,
        listeners: [configuration, KVCacheListener(cache: cache), server],
        logging: options.logging
    )
}

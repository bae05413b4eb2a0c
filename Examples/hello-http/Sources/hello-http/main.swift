// hello-http: a real HTTP service built only with the calls a Vigil daemon author has.
//
// The library gives it vigild's command line and control protocol (run, check-config, reload,
// status, --help, --version; DaemonCommandLine), readiness that follows the bind, a graceful
// drain at stop (ServiceListener), socket activation (ListeningSocket), two-phase reloads of its
// configuration (ConfigurationListener), the watchdog, the journal and lifecycle metrics
// (Daemon). What is its own: the configuration type, the routes, and serving Hummingbird's
// router on a descriptor (DescriptorServer: Hummingbird cannot adopt one).
import Hummingbird
import Logging
import Metrics
import Prometheus
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
    name: "hello-http",
    version: "0.1.0",
    abstract: "A small HTTP service on Vigil: GET / answers the configured greeting.",
    configuration: HelloConfiguration.self
)

// The default executor (not EventLoopExecutor): an HTTP server computes per request, and
// SwiftNIO runs its own event-loop threads anyway.
await commandLine.main { options in
    // Metrics first: the Daemon takes swift-metrics' factory as it is when it is created.
    let registry = PrometheusCollectorRegistry()
    MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))

    let values = ValueStore()
    let configuration = ConfigurationListener<HelloConfiguration>(source: options.configurationSource)

    let router = Router()
    router.add(middleware: RequestLogMiddleware())
    router.get("/") { _, _ in
        // The configuration in force now: a committed reload replaces it, a rejected one does not.
        values[CurrentConfiguration<HelloConfiguration>.self]?.greeting
            ?? HelloConfiguration.defaultConfiguration.greeting
    }
    router.get("/slow") { _, context in
        // Something in flight for the drain at stop: it completes across `systemctl stop`.
        context.logger.info("Slow request started: answering in 3 s")
        try await Task.sleep(for: .seconds(3))
        return "slow response done\n"
    }
    router.get("/metrics") { _, _ in
        Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer()))
        )
    }

    let responder = router.buildResponder()

    let http = ServiceListener(name: "http", dependencies: ["configuration"]) { ready in
        // Adopt the socket systemd passed as FileDescriptorName=http, else bind 127.0.0.1:8080.
        // Here, in start, so that a port in use is a start failure with the reason in STATUS=.
        let socket = try ListeningSocket(name: "http", orBind: .tcp(host: "127.0.0.1", port: 8080))
        return DescriptorServer(
            socket: socket,
            responder: responder,
            logger: Logger(label: "hello-http.http"),
            onServerRunning: { ready() }
        )
    }

    return Daemon(
        identifier: options.name,
        version: options.version,
        listeners: Failpoints.fromEnvironment().listeners + [configuration, http],
        values: values,
        logging: options.logging
    )
}

import ArgumentParser
import Logging
import Vigil

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

@main
struct Vigild: AsyncParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "vigild",
        abstract: "The Vigil reference daemon: a heartbeat worker with configuration, persistence and logging.",
        discussion: """
            Runs in the foreground, under systemd or in a terminal; it never forks into the background.

            Examples:
              vigild                      run with the embedded default configuration
              vigild run --config /etc/vigild/vigild.json
            """,
        version: version,
        subcommands: [Run.self],
        defaultSubcommand: Run.self
    )
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the daemon in the foreground (the default command)."
    )

    func run() async throws {
        let logging = Daemon.bootstrapLogging(identifier: "vigild")
        let heartbeat = HeartbeatWorker(settings: .init(interval: .seconds(5), message: "alive"))
        let daemon = Daemon(
            identifier: "vigild",
            version: Vigild.version,
            listeners: [heartbeat] + Failpoints.fromEnvironment().listeners,
            logging: logging
        )
        let status = await daemon.run()
        if status != 0 { throw ExitCode(status) }
    }
}

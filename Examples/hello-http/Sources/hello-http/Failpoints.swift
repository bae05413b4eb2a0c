import Logging
import Vigil

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// **Test-only** fault injection, off unless `HELLO_HTTP_FAILPOINTS` names them
/// (comma-separated), like vigild's `VIGIL_FAILPOINTS`. Never set it in production.
///
/// - `health-wedge`: the health probe never answers, so Vigil withholds the watchdog ping and
///   systemd's `WatchdogSec=` kills and (with `Restart=on-failure`) restarts the service. The
///   end-to-end test sets it to prove that a wedged hello-http is restarted.
struct Failpoints: Sendable {
    let names: Set<String>

    static func fromEnvironment() -> Failpoints {
        let text = getenv("HELLO_HTTP_FAILPOINTS").map { String(cString: $0) } ?? ""
        return Failpoints(names: Set(text.split(separator: ",").map { String($0) }))
    }

    /// The listeners that inject the named faults (none when nothing is named).
    var listeners: [any Listener] {
        names.contains("health-wedge") ? [HealthWedge()] : []
    }
}

/// A listener whose health check hangs: the daemon is wedged as far as the watchdog can tell.
struct HealthWedge: Listener {
    let name = "failpoint-health-wedge"

    func start(context: ListenerContext) async throws {
        context.logger.warning("Failpoint health-wedge is set (HELLO_HTTP_FAILPOINTS): the health check will hang")
    }

    func checkHealth(context: ListenerContext) async throws {
        // Hangs until the probe's budget abandons it (cancellation), every time.
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(3600))
        }
    }
}

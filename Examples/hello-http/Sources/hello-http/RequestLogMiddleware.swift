import Hummingbird
import Logging

/// Logs each request once it is answered, with structured metadata that Vigil's journal handler
/// turns into journal fields (keys sanitised to `[A-Z0-9_]`): `http.method` → `HTTP_METHOD`,
/// `http.path` → `HTTP_PATH`, `http.status` → `HTTP_STATUS`, `http.duration_ms` →
/// `HTTP_DURATION_MS`.
///
/// `journalctl -u hello-http HTTP_STATUS=404` then lists the requests that found nothing.
struct RequestLogMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let started = ContinuousClock.now
        do {
            let response = try await next(request, context)
            log(request, context: context, status: response.status.code, since: started)
            return response
        } catch let error as any HTTPResponseError {
            log(request, context: context, status: error.status.code, since: started)
            throw error
        } catch {
            log(request, context: context, status: 500, since: started)
            throw error
        }
    }

    private func log(_ request: Request, context: Context, status: Int, since started: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - started
        let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
        context.logger.info(
            "\(request.method) \(request.uri.path) \(status)",
            metadata: [
                "http.method": "\(request.method)",
                "http.path": "\(request.uri.path)",
                "http.status": "\(status)",
                "http.duration_ms": "\((milliseconds * 1000).rounded() / 1000)",
            ]
        )
    }
}

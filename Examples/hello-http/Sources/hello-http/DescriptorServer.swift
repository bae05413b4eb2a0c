import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOPosix
import ServiceLifecycle
import Vigil

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Serves a Hummingbird responder (a `Router`) on a listening socket that is already bound:
/// the one systemd passed (`.socket` unit) or the one `ListeningSocket` bound.
///
/// Hummingbird 2.28.1 cannot do this itself: its `Server` binds whatever `BindAddress` says, and
/// `BindAddress` has only `.hostname`, `.unixDomainSocket` and (on Apple platforms)
/// `.nwEndpoint`, all of which bind a new socket; `HTTPServerBuilder.buildServer` always returns
/// that `Server`. SwiftNIO's `ServerBootstrap.bind(_ socket:)` adopts a descriptor, so this is
/// Hummingbird's `Server.run` on that bootstrap: the same `HTTP1Channel`, the same graceful
/// shutdown (NIOExtras' `ServerQuiescingHelper`: stop accepting, let in-flight requests finish,
/// close idle connections), and the request handling `Application.run` does (a request id in
/// the logger's metadata, a 500 for an error a handler did not turn into a response, the `Date`
/// header).
struct DescriptorServer<Responder: HTTPResponder>: Service
where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
    /// The listening socket; the server owns it from `run()` on and closes it at the end.
    let socket: ListeningSocket
    let responder: Responder
    let logger: Logger
    /// Called once the server accepts connections on the socket.
    let onServerRunning: @Sendable () -> Void

    /// How long connections accepted just before the stop have to send their request.
    static var acceptGrace: TimeAmount { .milliseconds(500) }

    func run() async throws {
        let eventLoopGroup = MultiThreadedEventLoopGroup.singleton
        let logger = self.logger
        let responder = self.responder
        let childChannel = HTTP1Channel(responder: { request, responseWriter, channel in
            var logger = logger
            logger[metadataKey: "hb.request.id"] = .stringConvertible(RequestID())
            let context = Responder.Context(source: .init(channel: channel, logger: logger))
            var response: Response
            do {
                response = try await responder.respond(to: request, context: context)
            } catch let error as HTTPParserError {
                throw error
            } catch {
                logger.debug("Unrecognised error", metadata: ["error.type": "\(error)"])
                response = Response(status: .internalServerError)
            }
            response.headers[.date] = httpDate()
            try await responseWriter.write(response: response.head, body: response.body)
        })
        let quiescing = ServerQuiescingHelper(group: eventLoopGroup)
        let server = try await ServerBootstrap(group: eventLoopGroup)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(quiescing.makeServerChannelHandler(channel: channel))
                }
            }
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .bind(socket.fileDescriptor, serverBackPressureStrategy: nil) { channel in
                childChannel.setup(channel: channel, logger: logger)
            }
        logger.info(
            "Serving HTTP on \(socket.localAddress) (\(socket.origin == .bound ? "bound here" : "passed by systemd"))"
        )
        onServerRunning()
        try await withGracefulShutdownHandler {
            try await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { inbound in
                    for try await connection in inbound {
                        group.addTask { await childChannel.handle(value: connection, logger: logger) }
                    }
                }
            }
        } onGracefulShutdown: {
            // Stop accepting at once (no more accept(2) on the socket; new connections wait in
            // its backlog, which systemd keeps for the next process when it passed the socket).
            // Then quiesce: Hummingbird closes each connection once the request in flight is
            // answered, and at once a connection that has sent nothing yet; so connections
            // accepted just before the stop first get a short grace to have their request read.
            // Closing the listening channel at once instead dropped such connections with a
            // reset (seen as 1 request in about 30 across `systemctl restart`).
            server.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in
                server.channel.eventLoop.scheduleTask(in: Self.acceptGrace) {
                    quiescing.initiateShutdown(promise: nil)
                }
            }
        }
    }
}

/// The current time as an HTTP date (RFC 9110 IMF-fixdate): `Sun, 06 Nov 1994 08:49:37 GMT`.
func httpDate() -> String {
    var now = time(nil)
    var parts = tm()
    guard gmtime_r(&now, &parts) != nil else { return "" }
    var buffer = [CChar](repeating: 0, count: 64)
    let count = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
    return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

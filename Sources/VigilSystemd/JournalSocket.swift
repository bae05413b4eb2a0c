import Synchronization
import VigilPlatform

/// journald's native socket, spoken to without ever blocking, with a count of what it could
/// not take.
///
/// `sd_journal_sendv(3)` blocks while journald is frozen (`SIGSTOP`, a debugger) or its queue is
/// full (`net.unix.max_dgram_qlen`, 512 by default, 10 in some containers), and a daemon whose
/// event loop logs would then stall until the watchdog kills it. So entries go out in journald's
/// native protocol (systemd's "Native Journal Protocol") with `MSG_DONTWAIT`: an entry that does
/// not fit the queue is dropped and counted, and once journald takes entries again the next
/// entry is preceded by one that says how many were lost (``droppedEntriesMessageID``,
/// `VIGIL_DROPPED_ENTRIES=N`).
///
/// A value over ``maximumValueBytes`` is cut (ending in `… [N bytes cut]`) rather than sent
/// through a sealed memfd as libsystemd does: one non-blocking `sendmsg` per entry keeps the
/// cost of a log call bounded and the logging path free of file descriptors to manage, and a
/// message that long is a bug to see, not data to keep.
package final class JournalSocket: Sendable {
    /// journald's socket for native entries.
    package static let defaultPath = "/run/systemd/journal/socket"
    /// The process's connection, opened on first use.
    package static let shared = JournalSocket(path: defaultPath)

    /// The `MESSAGE_ID` of the entry that reports dropped entries.
    package static let droppedEntriesMessageID = LifecycleMessageID.journalEntriesDropped.rawValue
    /// The most bytes of one field's value that go to the journal.
    package static let maximumValueBytes = 48 * 1024

    /// What became of one entry.
    package enum Outcome: Sendable, Equatable {
        /// journald has it (and, before it, the report of any earlier drops).
        case sent
        /// journald's queue was full: dropped and counted.
        case dropped
        /// Nobody listens (journald stopped): the caller should fall back to stderr.
        case failed(Int32)
    }

    private let path: String
    private let state: Mutex<State>

    private struct State {
        /// The socket; replaced when journald's was made anew while the old one was held open.
        var socket: DatagramSocket?
        /// Entries dropped since the last report.
        var dropped = 0
        /// Whether the socket is connected to journald's (see ``send(_:report:)``).
        var connected = false
        /// The device and inode of the socket file at the path when it connected.
        var peer: FileIdentity?
    }

    private struct FileIdentity: Equatable {
        var device: UInt64
        var inode: UInt64

        /// The identity of what `path` names (following links, as `connect` does), or `nil`.
        init?(_ path: String) {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
        }
    }

    /// A connection to the native socket at `path` (tests pass their own).
    package init(path: String) {
        self.path = path
        state = Mutex(State(socket: Self.open(path)))
    }

    /// 8 MiB of send buffer, as libsystemd asks for: the kernel caps it at net.core.wmem_max.
    private static func open(_ path: String) -> DatagramSocket? { DatagramSocket(address: path, sendBuffer: 8 << 20) }

    /// Entries dropped since the last report.
    package var droppedCount: Int { state.withLock { $0.dropped } }

    /// Sends one entry's payload. When entries were dropped before, first sends `report(n)`'s
    /// payload; if journald cannot take that, the entry is dropped and counted too, so the
    /// report always comes before anything sent after a loss.
    ///
    /// The socket is connected to journald's, so the kernel does not look the path up for every
    /// entry; when the peer is gone (journald's socket was made anew) it connects again, and
    /// while it cannot connect, entries go to the path as they did before (and fail as the send
    /// says). When the connected peer's queue is full and the path names another socket than
    /// the one connected to, a new socket of ours connects to it: entries move to the new
    /// journald once the old socket's queue is full (what it queued is lost with it).
    package func send(_ payload: [UInt8], report: (Int) -> [UInt8]) -> Outcome {
        state.withLock { state in
            // No socket could be had at first (EMFILE at start): try again; meanwhile the caller
            // falls back to stderr.
            if state.socket == nil { state.socket = Self.open(path) }
            guard state.socket != nil else { return .failed(EINVAL) }
            if !state.connected { connect(&state) }
            func send(_ bytes: UnsafeRawBufferPointer) -> DatagramSocket.Outcome {
                guard let socket = state.socket else { return .failed(EINVAL) }
                guard state.connected else { return socket.send(bytes) }
                let outcome = socket.sendConnected(bytes)
                switch outcome {
                // The peer is gone, or shut for reading (`EPIPE`: a socket another process
                // still holds a copy of, which closing journald's own did not end): connect to
                // what the path names now.
                case .failed(ECONNREFUSED), .failed(ENOTCONN), .failed(ECONNRESET), .failed(EPIPE):
                    connect(&state)
                    return state.connected ? socket.sendConnected(bytes) : socket.send(bytes)
                case .wouldBlock:
                    // Full, or a socket nobody reads any more, while journald listens on one
                    // made anew at the path (its socket unit restarted while the old socket
                    // was held open). A new socket of ours, since what the old peer queued
                    // still counts against this one's send buffer.
                    guard let peer = state.peer, let now = FileIdentity(path), now != peer, let fresh = Self.open(path)
                    else { return outcome }
                    state.socket = fresh
                    connect(&state)
                    return state.connected ? fresh.sendConnected(bytes) : fresh.send(bytes)
                default: return outcome
                }
            }
            if state.dropped > 0 {
                let outcome = report(state.dropped).withUnsafeBytes { send($0) }
                switch outcome {
                case .sent: state.dropped = 0
                case .wouldBlock, .failed(EMSGSIZE):
                    state.dropped += 1
                    return .dropped
                case .failed(let code): return .failed(code)
                }
            }
            switch payload.withUnsafeBytes({ send($0) }) {
            case .sent: return .sent
            case .wouldBlock, .failed(EMSGSIZE):
                state.dropped += 1
                return .dropped
            case .failed(let code): return .failed(code)
            }
        }
    }

    /// Connects the socket to the path, noting what the path named just before.
    private func connect(_ state: inout State) {
        guard let socket = state.socket else { return }
        // Asked before connecting: if the path changes in between, a later full queue finds
        // them different and connects anew, which costs a socket, not an entry.
        let peer = FileIdentity(path)
        state.connected = socket.connect() == 0
        state.peer = state.connected ? peer : nil
    }
}

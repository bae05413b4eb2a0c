import VigilLifecycle
import VigilPOSIX

/// The lifecycle's ``NotifyMessage`` as sd_notify(3) spells it: what goes on the wire to
/// `NOTIFY_SOCKET`, and the bounds that keep every datagram under systemd's limit.
extension NotifyMessage {
    /// The wire text, e.g. `READY=1` or `RELOADING=1\nMONOTONIC_USEC=123`.
    package var wireText: String {
        switch kind {
        case .ready: "READY=1"
        case .reloading(let usec): "RELOADING=1\nMONOTONIC_USEC=\(usec)"
        case .stopping: "STOPPING=1"
        // Line breaks and tabs as spaces, other control characters escaped (`\u{1b}`,
        // `\u{85}`), cut to maximumStatusBytes on a character boundary ending in `…`: no
        // reason, however long or hostile, can push a datagram over systemd's limit.
        case .status(let text): "STATUS=" + Self.boundedStatus(text)
        case .errno(let code): "ERRNO=\(code)"
        case .extendTimeout(let usec): "EXTEND_TIMEOUT_USEC=\(usec)"
        case .watchdog: "WATCHDOG=1"
        case .watchdogTrigger: "WATCHDOG=trigger"
        }
    }

    /// The datagram for several messages: their texts joined by newlines.
    ///
    /// Use ``datagrams(_:)`` to send: it keeps each datagram under systemd's limit.
    package static func datagram(_ messages: [NotifyMessage]) -> String {
        messages.map(\.wireText).joined(separator: "\n")
    }

    /// The most bytes systemd reads from one notify datagram (`NOTIFY_BUFFER_MAX`, 4096).
    ///
    /// systemd drops a larger datagram whole ("Received notify message exceeded maximum size.
    /// Ignoring."), `READY=1` included, and a waiting `systemctl reload` then hangs.
    package static let maximumDatagramBytes = 4096

    /// The most bytes any one message takes on the wire: `STATUS=` and the bounded text.
    /// Every other message is a few dozen bytes at most.
    package static let maximumMessageBytes = "STATUS=".utf8.count + maximumStatusBytes

    /// `messages` packed in order into as few datagrams as fit ``maximumDatagramBytes`` each.
    ///
    /// Every message is at most ``maximumMessageBytes``, well under the limit, so by
    /// construction no datagram systemd would drop is ever built; messages that belong together
    /// (`RELOADING=1` with `MONOTONIC_USEC=`) are one message and never split. In practice the
    /// mediator's messages always fit in one datagram.
    package static func datagrams(_ messages: [NotifyMessage]) -> [String] {
        var result: [String] = []
        var current = ""
        for message in messages {
            let text = message.wireText
            if current.isEmpty {
                current = text
            } else if current.utf8.count + 1 + text.utf8.count <= maximumDatagramBytes {
                current += "\n" + text
            } else {
                result.append(current)
                current = text
            }
        }
        if !current.isEmpty { result.append(current) }
        return result
    }

    /// `text` as one safe line of at most ``maximumStatusBytes`` bytes.
    package static func boundedStatus(_ text: String) -> String {
        // Most status lines are short and hold no control character: nothing to replace,
        // escape or cut.
        if text.utf8.count <= maximumStatusBytes && !containsControl(text.utf8) { return text }
        let ellipsis = "…"
        let limit = maximumStatusBytes
        var result = ""
        var size = 0
        var characters = text.makeIterator()
        while let character = characters.next() {
            let piece = safe(character)
            let pieceSize = piece.utf8.count
            if size + pieceSize > limit {
                // Cut here, leaving room for the ellipsis: drop characters from the end.
                while size + ellipsis.utf8.count > limit, let last = result.popLast() {
                    size -= String(last).utf8.count
                }
                return result + ellipsis
            }
            result += piece
            size += pieceSize
        }
        return result
    }

    /// A character as it may appear in `STATUS=`: line breaks and tabs as a space, control
    /// characters escaped as everywhere else (``DisplayText``), everything else as it is.
    private static func safe(_ character: Character) -> String {
        if character.isNewline || character == "\t" { return " " }
        return DisplayText.escapingControlCharacters(String(character))
    }

    /// Whether the UTF-8 of a string holds one of the scalars `DisplayText.isControl(_:)` names: a C0
    /// control or DEL (one byte), a C1 control (`C2 80` … `C2 9F`), U+2028 to U+202E (`E2 80 A8`
    /// … `E2 80 AE`: the separators, embeddings and overrides) or U+2066 to U+2069 (`E2 81 A6`
    /// … `E2 81 A9`: the isolates). Byte by byte, without decoding scalars.
    package static func containsControl(_ utf8: String.UTF8View) -> Bool {
        // A native string's bytes in place: walking the view index by index cost ~25
        // instructions a byte, on every notification.
        if let found = utf8.withContiguousStorageIfAvailable({ containsControl(bytes: $0) }) { return found }
        return containsControl(bytes: utf8)
    }

    private static func containsControl<Bytes: Sequence<UInt8>>(bytes utf8: Bytes) -> Bool {
        var previous: UInt8 = 0
        var beforePrevious: UInt8 = 0
        for byte in utf8 {
            if byte < 0x20 || byte == 0x7F { return true }
            if previous == 0xC2 && byte >= 0x80 && byte <= 0x9F { return true }
            if beforePrevious == 0xE2 && previous == 0x80 && (0xA8...0xAE).contains(byte) { return true }
            if beforePrevious == 0xE2 && previous == 0x81 && (0xA6...0xA9).contains(byte) { return true }
            beforePrevious = previous
            previous = byte
        }
        return false
    }
}

/// The lifecycle's seam, implemented where systemd is known (as NIOPosix conforms to NIOCore's
/// protocols).
extension SystemdNotifier: ServiceManagerNotifier {
    /// Sends the messages in one datagram, or in several in order should they not fit in
    /// one (``NotifyMessage/datagrams(_:)``): systemd drops a datagram over its limit whole.
    package func notify(_ messages: [NotifyMessage]) throws {
        for datagram in NotifyMessage.datagrams(messages) { try send(datagram) }
    }

    /// `SystemdNotifier.barrier(timeout:)` when the exit needs one (``exitNeedsBarrier``):
    /// `BARRIER=1` (or the one sent ahead), then a bounded wait for systemd. Otherwise nothing:
    /// everything sent is in systemd's queue already, and systemd reads that queue before it
    /// handles the exit of its main process.
    package func synchronize(timeout: Duration) throws -> Bool {
        guard exitNeedsBarrier else {
            // A barrier sent ahead while datagrams waited: they have gone since, so nothing
            // needs its answer either.
            Self.dropBarrierAhead()
            return true
        }
        return try barrier(timeout: timeout)
    }

    /// ``SystemdNotifier/sendBarrierAhead()`` when the exit will need a barrier.
    package func prepareToSynchronize() {
        if exitNeedsBarrier { sendBarrierAhead() }
    }
}

/// A failed system call, a notification that could not be sent among them, gives systemd its
/// `ERRNO=`.
extension SystemError: ErrnoRepresentable {}

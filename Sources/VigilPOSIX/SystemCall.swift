import Synchronization
import VigilPlatform

/// Vigil's system-call layer: the one place that retries `EINTR`, tells `EAGAIN` apart, and
/// where a test can make a call fail.
///
/// Every call that may be interrupted goes through ``retrying(_:_:_:)`` (the C result: -1 and
/// `errno` on failure) or ``nonBlocking(_:_:_:)`` (``Outcome``, `EAGAIN` as ``Outcome/wouldBlock``),
/// in the manner of swift-system's `valueOrErrno(retryOnInterrupt:)` and NIOPosix's
/// `syscall(blocking:)`. Both first ask the failure seam (``inject(_:)``), which costs one
/// relaxed load of a word in `.bss` while no test has injected anything.
@usableFromInline
package enum SystemCall {
    /// The calls the seam can fail, by their C names.
    @usableFromInline
    package enum Name: String, Sendable {
        case open, read, write, fsync, fchmod, rename, unlink, mkdir
        case socket, bind, listen, connect, accept, send, sendto, sendmsg, recv, poll, waitpid, waitid
        case semaphoreWait
    }

    /// What a call is made on, as the seam matches it: a path, a descriptor, or both.
    @usableFromInline
    package struct Subject: Sendable {
        package var path: String?
        package var descriptor: Int32?

        package init(path: String? = nil, descriptor: Int32? = nil) {
            self.path = path
            self.descriptor = descriptor
        }

        package static func path(_ path: String) -> Subject { Subject(path: path) }
        package static func descriptor(_ descriptor: Int32) -> Subject { Subject(descriptor: descriptor) }
        package static var unspecified: Subject { Subject() }
    }

    /// What one non-blocking call came to.
    @usableFromInline
    package enum Outcome: Equatable, Sendable {
        /// It returned this value (a count, a descriptor).
        case done(Int)
        /// `EAGAIN` (`EWOULDBLOCK`): try again when the descriptor is ready.
        case wouldBlock
        /// It failed with this errno (never `EINTR`: that is retried).
        case failed(Int32)

        /// What a C result came to: `EAGAIN` read from `errno` as ``wouldBlock``.
        @inlinable
        package init(_ result: Int) {
            if result >= 0 {
                self = .done(result)
            } else {
                let code = errno
                self = code == EAGAIN || code == EWOULDBLOCK ? .wouldBlock : .failed(code)
            }
        }
    }

    /// `call()` again while it fails with `EINTR`; its result as C gives it (-1 with `errno`
    /// set on failure). A failure injected for `name` on `subject` is returned without making
    /// the call.
    @inlinable
    package static func retrying(_ name: Name, _ subject: @autoclosure () -> Subject, _ call: () -> Int) -> Int {
        if injectedFailureScopes.load(ordering: .relaxed) != 0, let code = FailureInjection.failure(name, subject()) {
            errno = code
            return -1
        }
        while true {
            let result = call()
            if result >= 0 || errno != EINTR { return result }
        }
    }

    /// ``retrying(_:_:_:)`` for a call that returns an `Int32` (`open`, `accept4`, `poll`).
    @inlinable
    package static func retrying32(_ name: Name, _ subject: @autoclosure () -> Subject, _ call: () -> Int32) -> Int32 {
        Int32(truncatingIfNeeded: retrying(name, subject(), { Int(call()) }))
    }

    /// ``retrying(_:_:_:)`` for a call on a non-blocking descriptor: `EAGAIN` and `EWOULDBLOCK`
    /// are ``Outcome/wouldBlock``.
    @inlinable
    package static func nonBlocking(_ name: Name, _ subject: @autoclosure () -> Subject, _ call: () -> Int) -> Outcome {
        Outcome(retrying(name, subject(), call))
    }

    // MARK: - The calls other modules name

    /// `close(2)`, not retried (Linux closes the descriptor even when it reports `EINTR`).
    @discardableResult
    package static func close(_ descriptor: Int32) -> Int32 { cClose(descriptor) }

    /// `open(2)`, `EINTR` retried; -1 with `errno` on failure.
    package static func open(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
        retrying32(.open, .path(path)) { cOpen(path, flags, mode) }
    }

    /// `read(2)` into `buffer`, `EINTR` retried; -1 with `errno` on failure.
    package static func read(
        _ descriptor: Int32,
        into buffer: UnsafeMutableRawBufferPointer,
        _ subject: @autoclosure () -> Subject = .unspecified
    ) -> Int {
        retrying(.read, subject().with(descriptor)) { cRead(descriptor, buffer.baseAddress, buffer.count) }
    }

    /// Writes all of `bytes`, `EINTR` retried; the errno of a failed `write(2)` (`EIO` when it
    /// wrote nothing), or `nil`.
    package static func writeAll(
        _ bytes: UnsafeRawBufferPointer,
        to descriptor: Int32,
        _ subject: @autoclosure () -> Subject = .unspecified
    ) -> Int32? {
        guard let base = bytes.baseAddress else { return nil }
        var offset = 0
        while offset < bytes.count {
            let written = retrying(.write, subject().with(descriptor)) {
                cWrite(descriptor, base + offset, bytes.count - offset)
            }
            if written <= 0 { return written < 0 ? errno : EIO }
            offset += written
        }
        return nil
    }

    /// One `write(2)` of as much of `bytes` as the descriptor takes now, `EINTR` retried; the
    /// count written, or -1 with `errno` (`EAGAIN` from a full non-blocking descriptor).
    package static func write(
        _ bytes: UnsafeRawBufferPointer,
        to descriptor: Int32,
        _ subject: @autoclosure () -> Subject = .unspecified
    ) -> Int {
        retrying(.write, subject().with(descriptor)) { cWrite(descriptor, bytes.baseAddress, bytes.count) }
    }

    /// One `send(2)` of as much of `bytes` as the socket takes now, `EINTR` retried; the count
    /// sent, or -1 with `errno`.
    package static func send(
        _ bytes: UnsafeRawBufferPointer,
        on descriptor: Int32,
        flags: Int32,
        _ subject: @autoclosure () -> Subject = .unspecified
    ) -> Int {
        retrying(.write, subject().with(descriptor)) { cSend(descriptor, bytes.baseAddress, bytes.count, flags) }
    }

    /// ``writeAll(_:to:_:)`` for the UTF-8 of `text`.
    @discardableResult
    package static func writeAll(_ text: String, to descriptor: Int32) -> Int32? {
        var text = text
        return text.withUTF8 { writeAll(UnsafeRawBufferPointer($0), to: descriptor) }
    }

    /// `fsync(2)`; -1 with `errno` on failure.
    package static func fsync(_ descriptor: Int32, _ subject: @autoclosure () -> Subject = .unspecified) -> Int32 {
        retrying32(.fsync, subject().with(descriptor)) { cFsync(descriptor) }
    }

    /// `poll(2)`, `EINTR` retried with `timeout` asked again (milliseconds, -1 for none: a
    /// caller with a deadline computes what is left); -1 with `errno` on failure.
    package static func poll(
        _ entries: UnsafeMutablePointer<pollfd>,
        _ count: Int,
        timeout: @autoclosure () -> Int32
    ) -> Int32 {
        retrying32(.poll, .unspecified) { cPoll(entries, nfds_t(count), timeout()) }
    }

    /// `bind(2)` to a Unix socket address; -1 with `errno` on failure.
    package static func bind(_ descriptor: Int32, _ address: UnixSocketAddress) -> Int32 {
        address.withSocketAddress { pointer, length in
            retrying32(.bind, Subject(path: address.text, descriptor: descriptor)) {
                cBind(descriptor, pointer, length)
            }
        }
    }

    /// `bind(2)` to any address; -1 with `errno` on failure.
    package static func bind(_ descriptor: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
        retrying32(.bind, .descriptor(descriptor)) { cBind(descriptor, address, length) }
    }

    /// `connect(2)` to a Unix socket address; -1 with `errno` on failure. `EINTR` is not
    /// retried: the connection goes on in the background, and connecting again says `EALREADY`.
    package static func connect(_ descriptor: Int32, _ address: UnixSocketAddress) -> Int32 {
        if let code = injectedFailure(.connect, Subject(path: address.text, descriptor: descriptor)) {
            errno = code
            return -1
        }
        return address.withSocketAddress { cConnect(descriptor, $0, $1) }
    }

    /// `accept4(2)`, `EINTR` retried; -1 with `errno` on failure.
    package static func accept(_ descriptor: Int32, flags: Int32) -> Int32 {
        retrying32(.accept, .descriptor(descriptor)) { acceptConnection(descriptor, nil, nil, flags) }
    }

    /// Resets `signal` to its default disposition. The corresponding C function is `signal(2)`.
    package static func restoreDefaultAction(_ signal: Int32) { cSignal(signal) }

    /// The errno the seam injects for this call, if any: for a call not made through
    /// ``retrying(_:_:_:)`` (one whose `EINTR` must not be retried).
    @inlinable
    package static func injectedFailure(_ name: Name, _ subject: @autoclosure () -> Subject) -> Int32? {
        guard injectedFailureScopes.load(ordering: .relaxed) != 0 else { return nil }
        return FailureInjection.failure(name, subject())
    }
}

extension SystemCall.Subject {
    /// This subject with `descriptor` filled in when it names none.
    package func with(_ descriptor: Int32) -> SystemCall.Subject {
        self.descriptor == nil ? SystemCall.Subject(path: path, descriptor: descriptor) : self
    }
}

// MARK: - The failure seam

/// How many ``FailureScope``s are installed: the one word every call loads.
@usableFromInline
let injectedFailureScopes = Atomic<Int>(0)

/// A failure for the seam to inject: make the `after + 1`-th call named `call` on a matching
/// subject (and the `count - 1` after it) fail with `errno`, without making it.
///
/// Tests run in parallel in one process: match a path only the test uses (its temporary
/// directory), or a descriptor it holds open, never every call.
package struct InjectedFailure: Sendable {
    /// Which subjects match.
    package enum Match: Sendable {
        /// A subject whose path contains this text.
        case pathContaining(String)
        /// A subject with this descriptor.
        case descriptor(Int32)
    }

    package var call: SystemCall.Name
    package var match: Match
    package var errno: Int32
    package var after: Int
    package var count: Int

    package init(_ call: SystemCall.Name, _ match: Match, errno: Int32, after: Int = 0, count: Int = 1) {
        self.call = call
        self.match = match
        self.errno = errno
        self.after = after
        self.count = count
    }

    func matches(_ name: SystemCall.Name, _ subject: SystemCall.Subject) -> Bool {
        guard name == call else { return false }
        switch match {
        case .pathContaining(let text): return subject.path.map { $0.contains(text) } ?? false
        case .descriptor(let descriptor): return subject.descriptor == descriptor
        }
    }
}

/// Failures installed by ``SystemCall/inject(_:)`` until ``remove()`` (which a test must call,
/// in a `defer`: the installed scope is kept alive until then); counts what it did.
package final class FailureScope: Sendable {
    fileprivate struct Rule {
        var failure: InjectedFailure
        var seen = 0
        var failed = 0
    }
    fileprivate let rules: Mutex<[Rule]>
    private let removed = Atomic<Bool>(false)

    fileprivate init(_ failures: [InjectedFailure]) {
        rules = Mutex(failures.map { Rule(failure: $0) })
    }

    /// How many calls this scope failed so far.
    package var injected: Int { rules.withLock { $0.reduce(0) { $0 + $1.failed } } }

    /// How many matching calls were made (failed or not).
    package var seen: Int { rules.withLock { $0.reduce(0) { $0 + $1.seen } } }

    /// Stops injecting. Calling it again does nothing.
    package func remove() {
        guard !removed.exchange(true, ordering: .relaxed) else { return }
        FailureInjection.scopes.withLock { scopes in scopes.removeAll { $0 === self } }
        injectedFailureScopes.wrappingSubtract(1, ordering: .relaxed)
    }
}

extension SystemCall {
    /// Installs `failures` until the returned scope's ``FailureScope/remove()`` (or its end):
    /// the seam that turns a failure mode (`ENOSPC` on a state file's write, `EAGAIN` on a
    /// notify send, `EMFILE` at accept) into a unit test that needs no root and no full disk.
    package static func inject(_ failures: [InjectedFailure]) -> FailureScope {
        let scope = FailureScope(failures)
        FailureInjection.scopes.withLock { $0.append(scope) }
        injectedFailureScopes.wrappingAdd(1, ordering: .relaxed)
        return scope
    }

    /// ``inject(_:)`` for one failure.
    package static func inject(
        _ call: Name,
        _ match: InjectedFailure.Match,
        errno: Int32,
        after: Int = 0,
        count: Int = 1
    ) -> FailureScope {
        inject([InjectedFailure(call, match, errno: errno, after: after, count: count)])
    }
}

@usableFromInline
enum FailureInjection {
    static let scopes = Mutex<[FailureScope]>([])

    /// The errno to fail this call with, counting it against every matching rule.
    @usableFromInline
    static func failure(_ name: SystemCall.Name, _ subject: SystemCall.Subject) -> Int32? {
        let installed = scopes.withLock { $0 }
        var code: Int32?
        for scope in installed {
            scope.rules.withLock { rules in
                for index in rules.indices where rules[index].failure.matches(name, subject) {
                    let rule = rules[index]
                    rules[index].seen += 1
                    guard code == nil, rule.seen + 1 > rule.failure.after,
                        rule.failed < rule.failure.count
                    else { continue }
                    rules[index].failed += 1
                    code = rule.failure.errno
                }
            }
        }
        return code
    }
}

// MARK: - The C calls whose names SystemCall's own functions shadow

private func cClose(_ descriptor: Int32) -> Int32 { close(descriptor) }
private func cOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 { open(path, flags, mode) }
private func cRead(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}
private func cWrite(_ descriptor: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    write(descriptor, buffer, count)
}
private func cSend(_ descriptor: Int32, _ buffer: UnsafeRawPointer?, _ count: Int, _ flags: Int32) -> Int {
    send(descriptor, buffer, count, flags)
}
private func cFsync(_ descriptor: Int32) -> Int32 { fsync(descriptor) }
private func cPoll(_ entries: UnsafeMutablePointer<pollfd>, _ count: nfds_t, _ timeout: Int32) -> Int32 {
    poll(entries, count, timeout)
}
private func cBind(_ descriptor: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    bind(descriptor, address, length)
}
private func cConnect(_ descriptor: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
    connect(descriptor, address, length)
}
private func cSignal(_ number: Int32) { _ = signal(number, SIG_DFL) }

/// `accept4(2)`: Glibc's module imports it only with `_GNU_SOURCE`. Non-blocking and close-on-exec
/// from the first instant, so a child spawned meanwhile inherits no connection.
@_silgen_name("accept4")
private func acceptConnection(
    _ descriptor: Int32,
    _ address: UnsafeMutableRawPointer?,
    _ length: UnsafeMutableRawPointer?,
    _ flags: Int32
) -> Int32

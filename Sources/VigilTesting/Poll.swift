/// State that changes with no event to await — a file another process writes, a store's flag
/// set by a timer — read again every `interval` until `probe` returns a value.
///
/// Prefer an ``AsyncRecorder`` wherever the change can be recorded: polling is for what only
/// the file system or another process shows. Throws ``PollTimedOut`` after `timeout`, so a test
/// fails instead of hanging.
///
/// - Parameters:
///   - what: what the test waits for, for the failure message.
///   - timeout: a safety net, not a synchronisation device; defaults to 30 s.
///   - interval: how long to wait between two probes.
///   - probe: the state once it is there, `nil` until then.
@discardableResult
public func poll<Value>(
    for what: String,
    timeout: Duration = .seconds(30),
    every interval: Duration = .milliseconds(5),
    _ probe: () throws -> Value?
) async throws -> Value {
    let deadline = ContinuousClock.now + timeout
    while true {
        if let value = try probe() { return value }
        guard ContinuousClock.now < deadline else { throw PollTimedOut(what: what, timeout: timeout) }
        try await Task.sleep(for: interval)
    }
}

/// ``poll(for:timeout:every:_:)`` for a condition.
public func poll(
    until what: String,
    timeout: Duration = .seconds(30),
    every interval: Duration = .milliseconds(5),
    _ condition: () throws -> Bool
) async throws {
    try await poll(for: what, timeout: timeout, every: interval) { try condition() ? () : nil }
}

/// The state polled for did not come within the timeout.
public struct PollTimedOut: Error, CustomStringConvertible {
    /// What the test waited for.
    public let what: String
    /// How long it waited.
    public let timeout: Duration

    public var description: String { "Timed out after \(timeout) waiting for \(what)" }
}

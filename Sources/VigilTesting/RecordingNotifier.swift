import VigilLifecycle
import VigilSystemd

/// A notifier (the lifecycle's `ServiceManagerNotifier` seam) that records every notification, for tests.
public final class RecordingNotifier: ServiceManagerNotifier {
    /// Each notification's messages, in order.
    package let notifications = AsyncRecorder<[NotifyMessage]>()

    /// Creates an empty recorder.
    public init() {}

    package func notify(_ messages: [NotifyMessage]) throws {
        notifications.append(messages)
    }

    /// Each notification as its datagram text (`READY=1\nSTATUS=…`).
    public var datagrams: [String] { notifications.values.map(NotifyMessage.datagram) }

    /// Waits until `count` notifications contain `READY=1`.
    public func waitForReady(count: Int = 1) async throws {
        try await notifications.wait("\(count) READY=1") { all in
            all.filter { $0.contains(where: \.isReady) }.count >= count
        }
    }
}

/// A ``VigilLifecycle/LifecycleObserver`` that records every record, for tests.
public final class RecordingObserver: LifecycleObserver {
    /// The records, in order.
    public let records = AsyncRecorder<LifecycleRecord>()
    /// The same records with everything they carry, for the package's own tests to match.
    package let kinds = AsyncRecorder<LifecycleRecord.Kind>()

    /// Creates an empty recorder.
    public init() {}

    public func observe(_ record: LifecycleRecord) {
        records.append(record)
        kinds.append(record.kind)
    }
}

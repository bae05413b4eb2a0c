import Logging

/// What Vigil's log handlers (``JournalLogHandler``, ``StderrLogHandler``) share: the level is
/// a shared ``LogLevelControl``'s, and the metadata is swift-log's usual dictionary, merged
/// with the provider's and the call's in one place (`LogMetadata.merged`).
package protocol LevelControlledLogHandler: LogHandler {
    /// The shared, run-time adjustable level.
    var levelControl: LogLevelControl { get }
}

extension LevelControlledLogHandler {
    /// The level comes from the shared ``LogLevelControl``; setting it changes every handler
    /// that shares the control.
    package var logLevel: Logger.Level {
        get { levelControl.level }
        set { levelControl.level = newValue }
    }

    /// The handler's own metadata value for `key`.
    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// The metadata of `event`'s entry: the handler's own, then the provider's, then the call's.
    func entryMetadata(_ event: LogEvent) -> Logger.Metadata {
        LogMetadata.merged(handler: metadata, provider: metadataProvider, explicit: event.metadata)
    }
}

import Logging

/// The one metadata merge both of Vigil's log handlers use, as swift-log's
/// `StreamLogHandler.prepareMetadata` does for its own.
package enum LogMetadata {
    /// The metadata of one entry: the handler's own, then the provider's, then the call's
    /// (`explicit`); a later source wins for a key in more than one.
    ///
    /// When only one source has anything, that dictionary is returned as it is: the common log
    /// call (metadata at the call site only) copies and merges nothing.
    package static func merged(
        handler: Logger.Metadata,
        provider: Logger.MetadataProvider?,
        explicit: Logger.Metadata?
    ) -> Logger.Metadata {
        let provided = provider?.get() ?? [:]
        let explicit = explicit ?? [:]
        switch (handler.isEmpty, provided.isEmpty, explicit.isEmpty) {
        case (_, true, true): return handler
        case (true, false, true): return provided
        case (true, true, false): return explicit
        default:
            var merged = handler
            merged.merge(provided) { _, new in new }
            merged.merge(explicit) { _, new in new }
            return merged
        }
    }

    /// `metadata`'s entries by key, as both handlers write them (no array for one entry or none).
    package static func forEachSorted(
        _ metadata: Logger.Metadata,
        _ body: (String, Logger.Metadata.Value) -> Void
    ) {
        switch metadata.count {
        case 0: return
        case 1: for (key, value) in metadata { body(key, value) }
        default: for (key, value) in metadata.sorted(by: { $0.key < $1.key }) { body(key, value) }
        }
    }
}

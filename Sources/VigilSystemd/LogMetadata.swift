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

    /// `metadata`'s entries by key, as both handlers write them: the dictionary's indices are
    /// sorted in a buffer on the stack, so no entry is copied and no array allocated.
    package static func forEachSorted(
        _ metadata: Logger.Metadata,
        _ body: (String, Logger.Metadata.Value) -> Void
    ) {
        switch metadata.count {
        case 0, 1:
            for (key, value) in metadata { body(key, value) }
            return
        case 2:
            let first = metadata.startIndex
            let second = metadata.index(after: first)
            let (a, b) = metadata.keys[first] < metadata.keys[second] ? (first, second) : (second, first)
            body(metadata.keys[a], metadata.values[a])
            body(metadata.keys[b], metadata.values[b])
            return
        default: break
        }
        withUnsafeTemporaryAllocation(of: Logger.Metadata.Index.self, capacity: metadata.count) { buffer in
            var indices = UnsafeMutableBufferPointer(rebasing: buffer[..<buffer.initialize(from: metadata.indices).1])
            defer { indices.deinitialize() }
            indices.sort { metadata.keys[$0] < metadata.keys[$1] }
            for index in indices { body(metadata.keys[index], metadata.values[index]) }
        }
    }
}

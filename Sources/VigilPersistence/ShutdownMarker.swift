import Synchronization
import VigilConfiguration
import VigilLifecycle
import VigilPOSIX
import VigilPlatform

/// Whether the previous run of a daemon stopped cleanly: a marker file written when a run
/// begins and removed when it ends cleanly. Finding it at the next start means that run crashed,
/// was killed with `SIGKILL`, or lost power.
///
/// ``PersistenceListener`` keeps one beside its state file; a daemon with persistence of its own
/// (a database, say) keeps one too and reports it through ``VigilLifecycle/ShutdownHistory``, so that
/// `status` shows an unclean stop for it as well:
///
/// ```swift
/// final class Store: Listener, ShutdownHistory {
///     let name = "store"
///     let marker = ShutdownMarker(path: stateDirectory + "/store.running")
///     var previousShutdownClean: Bool? { marker.previousShutdownClean }
///
///     func start(context: ListenerContext) async throws {
///         let clean = try marker.begin(dataExisted: access(databasePath, F_OK) == 0)  // before the store opens
///         if clean == false { context.logger.warning("the previous run did not stop cleanly") }
///         …
///     }
///
///     func terminate(reason: TerminationReason, context: ListenerContext) async throws {
///         … // the final save
///         try marker.end()  // only after it succeeded
///     }
/// }
/// ```
public final class ShutdownMarker: ShutdownHistory {
    /// How the previous run ended, as ``begin(dataExisted:)`` found it, with the pid the
    /// marker held (PersistenceListener's warning names it).
    package struct Previous: Sendable, Equatable {
        /// `false` when the marker was there: the previous run did not stop cleanly.
        package var clean: Bool
        /// What the marker recorded (the pid; escaped, at most 64 bytes read); `nil` when clean.
        package var pid: String?
        /// No marker and no data from an earlier run (``begin(dataExisted:)``): nothing ran
        /// before, so nothing is known of a previous stop (`clean` is then `true`: no run was
        /// cut short).
        package var firstRun: Bool = false

        package init(clean: Bool, pid: String?, firstRun: Bool = false) {
            self.clean = clean
            self.pid = pid
            self.firstRun = firstRun
        }
    }

    /// The marker file.
    package let path: String
    private let found = Mutex<Previous?>(nil)

    /// A marker at `path` (written atomically and durably; its directory must exist).
    public init(path: String) {
        self.path = path
    }

    /// `nil` before ``begin(dataExisted:)`` and on a first run (there was no previous stop to
    /// know of), then whether the previous run stopped cleanly.
    public var previousShutdownClean: Bool? {
        found.withLock { $0.flatMap { $0.firstRun ? nil : $0.clean } }
    }

    /// Reads how the previous run ended, then marks this run as running (the marker, holding
    /// this process's pid, written and synced before it returns). Call it at start, before the
    /// data it guards is opened.
    ///
    /// - Parameter dataExisted: whether the data the marker guards (its file, its database)
    ///   was there before this run. Without it and without a marker, this is the first run:
    ///   ``previousShutdownClean`` is then `nil` (unknown), not `true` (before, a daemon's very
    ///   first start said "previous stop: clean").
    /// - Returns: what ``previousShutdownClean`` says from now on: `false` when the previous run
    ///   did not stop cleanly, `nil` on a first run.
    @discardableResult
    public func begin(dataExisted: Bool = true) throws -> Bool? {
        let previous = try beginReading(dataExisted: dataExisted)
        return previous.firstRun ? nil : previous.clean
    }

    /// ``begin(dataExisted:)``, returning what the marker held as well.
    package func beginReading(dataExisted: Bool = true) throws -> Previous {
        let absent = FileSystem.isAbsent(path)
        var previous = Previous(clean: absent, pid: nil, firstRun: absent && !dataExisted)
        if !previous.clean {
            // Whatever is there is read without blocking or following a link, and escaped.
            previous.pid =
                (try? FileSystem.read(path, limit: 64, followSymlinks: false)).map {
                    DisplayText.escapingControlCharacters(
                        String(decoding: $0, as: UTF8.self).trimmingTrailingWhitespace()
                    )
                } ?? "?"
        }
        try FileSystem.writeAtomically(Array("\(getpid())\n".utf8), to: path)
        found.withLock { $0 = previous }
        return previous
    }

    /// Marks this run as ended cleanly: removes the marker, durably. Call it only after the last
    /// write of the data it guards succeeded; left in place, the next start reports this run
    /// as unclean, which it then was.
    public func end() throws {
        try FileSystem.remove(path)
        try FileSystem.syncDirectory(of: path)
    }
}

extension String {
    fileprivate func trimmingTrailingWhitespace() -> String {
        var text = Substring(self)
        while text.last?.isWhitespace == true { text.removeLast() }
        return String(text)
    }
}

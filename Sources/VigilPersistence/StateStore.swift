import Synchronization
import VigilConfiguration
import VigilLifecycle
import VigilPOSIX
import VigilPlatform

/// Durable state that listeners reach through the mediator: each listener keeps its own
/// `Codable` value under its own key, in one JSON file.
///
/// The file is `{"formatVersion": 1, "<key>": <value>, …}`. Writes are crash-safe (a temporary
/// file beside it, `fsync`ed, renamed over it, the directory `fsync`ed): after a crash, `kill -9`
/// or power loss the file holds either the previous checkpoint or the new one. Listeners reach the
/// store with `context.values[StateStoreKey.self]` after declaring a dependency on the
/// persistence listener.
///
/// A checkpoint writes what the store's own reader reads back, and never much more than the
/// state: indented for an admin to read (two spaces a level, the first
/// `JSONWriter.indentedDepth` levels; deeper ones on one line) when that
/// text is at most 64 KiB or at most twice the compact text, compact otherwise; a state whose
/// compact text is over 16 MiB fails the checkpoint (``StateStoreError/Code/tooLarge``) and the
/// file keeps the previous one.
///
/// Nothing read is ever lost: a file that cannot be used — not a regular file (a FIFO, a
/// symbolic link), over 16 MiB (or over it once written back), not JSON, not the
/// expected shape, or holding a value its listener rejects — is moved aside to `<path>.corrupt-<n>` with
/// its original bytes, before anything writes to `path`, and the reason says where and what. A
/// directory at `path` is not moved: opening the store fails, naming it.
public final class StateStore: Sendable {
    /// The format this build writes; files with a greater version are refused.
    package static let formatVersion = 1

    /// How many arrays and objects may enclose one another in a stored value: what the reader
    /// takes (`JSONParser.maximumDepth`) less the file's own object.
    package static let maximumValueDepth = JSONParser.maximumDepth - 1

    /// A checkpoint whose indented text is at most this long is written indented whatever its
    /// shape: the size of every state file an admin reads by eye.
    package static let readableSize = 64 << 10

    /// The state file.
    package let path: String

    /// What opening the store found.
    package struct Restored: Sendable, Hashable {
        /// Where a corrupt or unreadable file was moved, if it was.
        package var movedAside: String?
        /// Why it was moved aside.
        package var problem: String?
        /// How many keys were restored.
        package var keys: Int
    }

    /// The keys and values of a state file that parsed; see ``parse(_:)``.
    package struct Contents: Sendable, Hashable {
        /// The keys, in file order, without `formatVersion`.
        package var keys: [String] { entries.map(\.key) }
        package var entries: [JSONValue.Member]
    }

    private struct Storage {
        var entries: [JSONValue.Member] = []
        /// Bumped on every change; a checkpoint records the revision it wrote.
        var revision = 0
        var writtenRevision = 0
        /// The bytes read at open, until a value in them is rejected (then they are moved aside).
        var original: [UInt8]?
        /// Whether a checkpoint replaced the file read at open.
        var replacedOriginal = false
        /// Where the file read at open was moved, once it was.
        var movedAside: String?
        /// The entries as the file holds them (restored, or last checkpointed).
        var written: [JSONValue.Member] = []
    }

    private let storage = Mutex(Storage())
    /// Serialises checkpoints (and moving the file aside) so a later one never writes an older
    /// snapshot.
    private let writer = Mutex(0)
    /// What a checkpoint under way is doing: a ``CheckpointStage`` raw value.
    private let stage = Atomic<UInt8>(CheckpointStage.idle.rawValue)

    /// What the checkpoint under way is doing, for a caller whose wait for it timed out: one
    /// still making the text of a large state is slow for its size, not for the file system.
    package enum CheckpointStage: UInt8, Sendable {
        /// None runs.
        case idle
        /// Making the text of the state (what takes long for a large state).
        case makingText
        /// Writing the file: `write`, `fsync`, `rename`, `fsync` of the directory.
        case writing
    }

    /// What the checkpoint under way is doing.
    package var checkpointStage: CheckpointStage {
        CheckpointStage(rawValue: stage.load(ordering: .relaxed)) ?? .idle
    }

    /// The state directory must be the daemon's: owned by it or root, and not writable by
    /// group or others, or another local user could plant state or a directory at the temporary
    /// name (every checkpoint, and so the stop, would fail). A symbolic link to it is fine when
    /// root or the daemon's user made it (`DynamicUser=` makes `/var/lib/<name>` one); what it
    /// leads to is checked. A link another user made is refused: that user chooses where it
    /// leads (a helper's attack in a 1777 directory moved another program's state.json aside).
    /// So is a directory above it that another user owns, or that others may write in without
    /// the sticky bit (OpenSSH's `StrictModes` rule): they could rename the state directory away
    /// and put their own in its place between the check and a write, since the files in it are
    /// opened by path. A sticky directory such as `/tmp` is fine: others cannot rename what is
    /// not theirs there. Both the path as written and the one it resolves to are checked.
    ///
    /// - Parameter checkingOwner: `false` checks the link and the mode only: what can be known
    ///   before the instance lock is taken, so that a second daemon on a running one's directory
    ///   (owned by its `DynamicUser=`) hears whose it is, not whom the directory belongs to.
    package static func checkOwnership(of directory: String, checkingOwner: Bool = true) throws(SystemError) {
        let caller = geteuid()
        try DirectoryPathRule.check(directory, role: .state)
        var info = stat()
        guard stat(directory, &info) == 0 else {
            throw SystemError(path: directory, operation: "check the state directory", errno: errno)
        }
        if checkingOwner && info.st_uid != caller && info.st_uid != 0 {
            throw SystemError(
                path: directory,
                operation: "use as the state directory",
                errno: EPERM,
                detail: "it is owned by uid \(info.st_uid), not by this process (uid \(caller)) or root"
            )
        }
        if info.st_mode & (S_IWOTH | S_IWGRP) != 0 {
            let who = info.st_mode & S_IWOTH != 0 ? "anyone" : "its group (gid \(info.st_gid))"
            throw SystemError(
                path: directory,
                operation: "use as the state directory",
                errno: EPERM,
                detail: "\(who) may write in it (mode \(String(info.st_mode & 0o7777, radix: 8))); chmod go-w it"
            )
        }
    }

    /// The read errors after which the file is left in place and the open fails.
    static let passingErrors: Set<Int32> = [EAGAIN, EWOULDBLOCK, EINTR, EIO, EMFILE, ENFILE, ENOMEM]

    /// Parses the bytes of a state file, with no I/O: the entry point the init uses, and a
    /// fuzzer's.
    ///
    /// - Throws: ``StateStoreError/Code/invalidFile`` for text that is not JSON, a top level that is not an object, or
    ///   a missing or malformed `formatVersion`; ``StateStoreError/Code/newerFormat`` (with an empty path) for a file
    ///   from a newer version.
    package static func parse(_ bytes: [UInt8]) throws -> Contents {
        let root: JSONValue
        do {
            root = try JSONParser.parse(bytes)
        } catch {
            throw StateStoreError.invalidFile(
                line: error.position.line,
                column: error.position.column,
                keyPath: "",
                reason: error.message
            )
        }
        guard case .object(let members) = root.kind else {
            throw StateStoreError.invalidFile(
                line: root.position.line,
                column: root.position.column,
                keyPath: "",
                reason: "expected an object ({ … }) at the top level, found \(root.summary)"
            )
        }
        guard let version = root["formatVersion"] else {
            throw StateStoreError.invalidFile(
                line: root.position.line,
                column: root.position.column,
                keyPath: "formatVersion",
                reason: "the key is missing (expected a whole number from 1 to \(formatVersion))"
            )
        }
        guard case .number(let text) = version.kind, let number = Int(text), number >= 1 else {
            throw StateStoreError.invalidFile(
                line: version.position.line,
                column: version.position.column,
                keyPath: "formatVersion",
                reason: "expected a whole number from 1 to \(formatVersion), found \(version.summary)"
            )
        }
        if number > formatVersion { throw StateStoreError.newerFormat(path: "", version: number) }
        return Contents(entries: members.filter { $0.key != "formatVersion" })
    }

    /// Opens the store: removes a leftover temporary file, restores the file if it exists.
    ///
    /// A file that cannot be read, is not a regular file (it is never followed through a
    /// symbolic link, and a FIFO never blocks), exceeds 16 MiB or does not
    /// parse is moved aside to `<path>.corrupt-<n>` (never overwritten) and the store starts
    /// empty; `restored` says so and why.
    ///
    /// - Throws: ``StateStoreError/Code/newerFormat`` for a file from a newer, incompatible version; ``StateStoreError/Code/unreadable``,
    ///   leaving the file as it is, when reading failed for a reason that passes (`EAGAIN`:
    ///   another process holds a lease or lock on it; `EIO`, `EMFILE`, `ENFILE`, `ENOMEM`), or
    ///   when `path` is a directory (the state directory passed for the state file, say).
    package convenience init(path: String) throws {
        try self.init(path: path, read: { _ in })
    }

    /// ``init(path:)``, calling `read` with the file's size once its bytes are in (before they
    /// are parsed): whoever waits for the open can tell a file system that does not answer from
    /// a large state that takes its time to parse.
    package init(path: String, read: (Int) -> Void) throws {
        self.path = path
        try FileSystem.remove(FileSystem.temporaryName(for: path))
        var restored = Restored(movedAside: nil, problem: nil, keys: 0)
        var problem: String?
        do {
            let bytes = try FileSystem.read(path, limit: FileSystem.stateLimit, followSymlinks: false)
            read(bytes.count)
            let contents = try Self.parse(bytes)
            // Written back, a file can grow: each character the writer escapes (DEL, C1 controls,
            // U+2028, bidirectional controls, `\b`) takes six bytes, at most six times what the
            // file spent on it. A state no checkpoint could write is no use: every later change
            // would be lost. Below a sixth of the limit it always fits, so this costs ordinary
            // files nothing.
            if bytes.count > FileSystem.stateLimit / 6,
                JSONWriter.bytes(Self.document(contents.entries), pretty: false, limit: FileSystem.stateLimit) == nil
            {
                throw StateStoreError.invalidFile(
                    line: 0,
                    column: 0,
                    keyPath: "",
                    reason: "written back it would take more than \(FileSystem.describeSize(FileSystem.stateLimit)), "
                        + "the most the state file may hold (its strings hold characters it writes escaped, "
                        + "as \\u007f, six bytes each), so no checkpoint could write it"
                )
            }
            storage.withLock {
                $0.entries = contents.entries
                $0.original = bytes
                $0.written = contents.entries
            }
            restored.keys = contents.entries.count
        } catch let error as SystemError where error.errno == ENOENT {
            // No file: a first start.
        } catch let error as SystemError where Self.passingErrors.contains(error.errno) {
            // The file may well be sound: moving it aside would start from empty state for a
            // condition that passes (a lease or lock another process holds, no descriptors).
            throw StateStoreError.unreadable(path: path, cause: error)
        } catch let error as SystemError where error.errno == EISDIR {
            // A directory is no state file gone bad but a path that names the wrong thing (the
            // state directory itself, say): moved aside, all it holds went with it, and the
            // daemon ran on with empty state.
            throw StateStoreError.unreadable(path: path, cause: error)
        } catch let error as SystemError {
            problem = error.reason
        } catch let error as StateStoreError where error.code == .newerFormat {
            throw StateStoreError.newerFormat(path: path, version: error.version)
        } catch let error as StateStoreError {
            problem = error.description
        }
        if let problem {
            restored.movedAside = try Self.moveAside(path)
            restored.problem = problem
        }
        self.restored = restored
    }

    /// What opening found.
    package let restored: Restored

    /// The value stored under `key`, decoded as `type` and accepted by `validate`; `nil` when
    /// there is none.
    ///
    /// A stored value that does not decode, or that `validate` rejects, is neither used nor
    /// lost: the file as read at open is moved aside to `<path>.corrupt-<n>` (its original
    /// bytes), the key is dropped from the store, and a ``StateStoreError`` is thrown with the key
    /// path, what was expected and what was found. A listener that catches it logs it and
    /// starts from empty state for its key; one that does not fails its start, and the next
    /// start finds the key gone. Other keys are kept and written at the next checkpoint.
    ///
    /// - Parameters:
    ///   - type: the type to decode the stored value as.
    ///   - key: the key the value is stored under.
    ///   - validate: the listener's own checks of the decoded value (ranges, say); its key path
    ///     is relative to `key`.
    public func value<T: Decodable>(
        _ type: T.Type,
        forKey key: String,
        validate: (T) throws(InvalidValue) -> Void = { _ in }
    ) throws(StateStoreError) -> T? {
        guard let stored = storage.withLock({ storage in storage.entries.last { $0.key == key }?.value }) else {
            return nil
        }
        let problem: (path: [String], position: JSONValue.Position, reason: String)
        do {
            let value = try JSONValueDecoder.decode(type, from: stored, rejectUnknownKeys: false)
            switch Result(catching: { () throws(InvalidValue) in try validate(value) }) {
            case .success: return value
            case .failure(let error):
                problem = (error.keyPath, JSONValueDecoder.position(of: error.keyPath, in: stored), error.reason)
            }
        } catch let failure as JSONValueDecoder.Failure {
            problem = (failure.path, failure.position, failure.message)
        } catch {
            problem = ([], stored.position, String(describing: error))
        }
        var invalid = StateStoreError.invalidEntry(
            path: path,
            keyPath: ([key] + problem.path).joined(separator: "."),
            line: problem.position.line,
            column: problem.position.column,
            reason: problem.reason
        )
        do {
            invalid.movedAside = try quarantine(dropping: key)
        } catch {
            invalid.reason += " (and the file could not be moved aside: \(error))"
        }
        throw invalid
    }

    /// Moves the file read at open aside (once) and drops `key`.
    private func quarantine(dropping key: String) throws -> String? {
        try writer.withLock { _ in
            let (original, replaced, already) = storage.withLock { storage in
                storage.entries.removeAll { $0.key == key }
                storage.revision += 1
                return (storage.original, storage.replacedOriginal, storage.movedAside)
            }
            if let already { return already }
            guard let original else { return nil }
            let aside: String
            if replaced {
                // A checkpoint has replaced the file since: keep the bytes read at open.
                aside = try Self.unusedAsideName(for: path)
                try FileSystem.writeAtomically(original, to: aside)
            } else {
                aside = try Self.moveAside(path)
            }
            storage.withLock {
                $0.movedAside = aside
                $0.original = nil
            }
            return aside
        }
    }

    /// `<path>.corrupt-<n>` with the first `n` at which nothing exists (not even a link).
    ///
    /// - Throws: the `lstat` that answered anything but "no such file" (`ENAMETOOLONG` for a
    ///   path at the length limit, `EACCES`, `EIO`): asking the next name would get the same
    ///   answer for ever; `EEXIST` once the first 10 000 names are taken.
    private static func unusedAsideName(for path: String) throws(SystemError) -> String {
        let operation = "move the unreadable state file aside as"
        for number in 1...Self.asideNames {
            let aside = path + ".corrupt-\(number)"
            var info = stat()
            if lstat(aside, &info) == 0 { continue }
            guard errno == ENOENT else { throw SystemError(path: aside, operation: operation, errno: errno) }
            return aside
        }
        throw SystemError(
            path: path + ".corrupt-\(Self.asideNames)",
            operation: operation,
            errno: EEXIST,
            detail: "\(Self.asideNames) earlier copies are kept beside it; remove the old \(path).corrupt-N files"
        )
    }

    /// How many `<path>.corrupt-<n>` names are tried.
    private static let asideNames = 10_000

    /// Renames `path` to an unused `<path>.corrupt-<n>`, durably; returns the new name.
    private static func moveAside(_ path: String) throws -> String {
        let aside = try unusedAsideName(for: path)
        try FileSystem.move(path, to: aside)
        try FileSystem.syncDirectory(of: path)
        return aside
    }

    /// Stores `value` under `key`; it reaches the file at the next checkpoint.
    ///
    /// - Throws: ``StateStoreError`` for `formatVersion` or a `key` with more than 30 combining marks
    ///   in a row, which the file's reader refuses (comparing or hashing one takes quadratic
    ///   time); ``StateStoreError/Code/tooLarge`` for a value the file cannot hold whatever else
    ///   is stored: over 16 MiB written compactly, or nesting arrays and objects more than
    ///   `maximumValueDepth` deep; for such a key inside `value`, or a value JSON cannot hold
    ///   (infinity, NaN), an error that names it; or the value's own encoding error. Nothing is
    ///   stored then, and what was stored before stays. Values that fit one by one but not
    ///   together fail the checkpoint instead (see ``checkpoint(force:)``).
    public func set<T: Encodable>(_ value: T, forKey key: String) throws {
        guard key != "formatVersion" else {
            throw StateStoreError.invalidKey(
                key: key,
                reason: "formatVersion is the state file's own key; choose another"
            )
        }
        guard JSONParser.isStreamSafe(key) else {
            throw StateStoreError.invalidKey(
                key: key,
                reason: "it has more than \(JSONParser.maximumCombiningRun) combining marks in a row "
                    + "(Unicode's stream-safe limit), which the state file's reader refuses"
            )
        }
        let encoded = try JSONValueEncoder.encode(value)
        try Self.checkWritable(encoded, forKey: key)
        storage.withLock { storage in
            if let index = storage.entries.firstIndex(where: { $0.key == key }) {
                storage.entries[index].value = encoded
            } else {
                storage.entries.append(.init(key: key, value: encoded))
            }
            storage.revision += 1
        }
    }

    /// Removes what is stored under `key` (a key a daemon no longer uses, say); the file loses it
    /// at the next checkpoint.
    ///
    /// - Returns: `true` when something was stored under `key`; `false` changes nothing.
    @discardableResult
    public func removeValue(forKey key: String) -> Bool {
        storage.withLock { storage in
            guard let index = storage.entries.firstIndex(where: { $0.key == key }) else { return false }
            storage.entries.remove(at: index)
            storage.revision += 1
            return true
        }
    }

    /// Whether the file on disk holds a state this store read or wrote (one was restored at
    /// open and not moved aside, or a checkpoint succeeded): known without asking the file
    /// system, which may be the one that stopped answering.
    package var fileHoldsAState: Bool { storage.withLock { $0.original != nil || $0.replacedOriginal } }

    /// `true` when something changed since the last checkpoint.
    package var hasUnsavedChanges: Bool { storage.withLock { $0.revision != $0.writtenRevision } }

    /// Writes the state to the file, crash-safely.
    ///
    /// The text is indented when that is at most 64 KiB or at most twice the compact text, and
    /// compact otherwise (see `text(of:)`), so it never grows far beyond the state whatever
    /// its shape.
    ///
    /// - Parameter force: write even when nothing changed.
    /// - Returns: `true` when the file was written.
    /// - Throws: ``StateStoreError/Code/tooLarge`` when the state is more than the file may hold
    ///   (16 MiB written compactly, what the reader at the next start takes), naming the largest
    ///   values; the file is left as it is, holding the previous checkpoint. Else the write's
    ///   ``VigilPOSIX/SystemError``.
    @discardableResult
    public func checkpoint(force: Bool = false) throws -> Bool {
        try writer.withLock { _ in
            let (entries, revision, written) = storage.withLock { ($0.entries, $0.revision, $0.writtenRevision) }
            guard force || revision != written else { return false }
            stage.store(CheckpointStage.makingText.rawValue, ordering: .relaxed)
            defer { stage.store(CheckpointStage.idle.rawValue, ordering: .relaxed) }
            guard let text = Self.text(of: entries) else {
                throw StateStoreError.tooLarge(path: path, reason: Self.tooLargeReason(entries))
            }
            stage.store(CheckpointStage.writing.rawValue, ordering: .relaxed)
            try FileSystem.writeAtomically(text, to: path)
            storage.withLock {
                $0.replacedOriginal = true
                if revision > $0.writtenRevision {
                    $0.writtenRevision = revision
                    $0.written = entries
                }
            }
            return true
        }
    }

    /// The state file's object: `formatVersion`, then `entries`.
    private static func document(_ entries: [JSONValue.Member]) -> JSONValue {
        JSONValue(.object([.init(key: "formatVersion", value: JSONValue(.number("\(formatVersion)")))] + entries))
    }

    /// The text a checkpoint writes for `entries`, or `nil` when even its compact text is over
    /// ``VigilPOSIX/FileSystem/stateLimit``, which the reader refuses.
    ///
    /// Indented (as `JSONWriter` writes it) when that is at most
    /// ``readableSize`` or at most twice the compact text; compact otherwise. So the file is
    /// never more than twice the compact text or 64 KiB, and never over the reader's limit. An
    /// ordinary state (a few keys, a few levels) stays as an admin reads it; what would be long
    /// mostly for its indentation (a long list of numbers, values nested deeply) is written
    /// compactly, and writing it costs time and memory in proportion to the compact text.
    ///
    /// A state that is not small is written compactly first, which tells how long the indented
    /// text is; that is written only when it is to be used, and each attempt stops once past its
    /// limit (64 KiB, 16 MiB; a string that may fit goes in whole, escaped), so a state too large
    /// for the file costs little more than the limit to find out.
    package static func text(of entries: [JSONValue.Member]) -> [UInt8]? {
        let document = Self.document(entries)
        if let pretty = JSONWriter.bytes(document, pretty: true, limit: readableSize) { return pretty }
        guard let (compact, prettyCount) = JSONWriter.compact(document, limit: FileSystem.stateLimit) else {
            return nil
        }
        guard prettyCount <= 2 * compact.count, prettyCount <= FileSystem.stateLimit else { return compact }
        return JSONWriter.bytes(document)
    }

    /// Refuses `value` under `key` when no state file could hold it: the reader refuses arrays
    /// and objects nested more than `maximumValueDepth` deep in it, or a file over
    /// ``VigilPOSIX/FileSystem/stateLimit`` (that of `value` alone, compactly).
    private static func checkWritable(_ value: JSONValue, forKey key: String) throws(StateStoreError) {
        guard let bound = compactBound(of: value, depth: maximumValueDepth) else {
            throw StateStoreError.tooLarge(
                key: key,
                reason: "its value nests arrays and objects more than \(maximumValueDepth) levels deep, which the "
                    + "state file's reader refuses (so the next start would set the whole file aside); store it "
                    + "flatter. Nothing was stored, and what was stored before under the key stays"
            )
        }
        // Exactly only when it might not fit: a value of fewer bytes does.
        guard bound + 6 * key.utf8.count + 32 > FileSystem.stateLimit,
            JSONWriter.bytes(document([.init(key: key, value: value)]), pretty: false, limit: FileSystem.stateLimit)
                == nil
        else { return }
        throw StateStoreError.tooLarge(
            key: key,
            reason: "its value takes more than \(FileSystem.describeSize(FileSystem.stateLimit)) written compactly, "
                + "more than the state file may hold (what its reader takes); store less under it. Nothing was "
                + "stored, and what was stored before under the key stays"
        )
    }

    /// At least as many bytes as the compact text of `value` takes (every byte of its strings
    /// counted as its longest escape, six bytes), in one walk that makes nothing; `nil` when it
    /// nests more than `depth` arrays and objects (the walk stops there).
    private static func compactBound(of value: JSONValue, depth: Int) -> Int? {
        switch value.kind {
        case .object(let members):
            guard depth > 0 else { return nil }
            var total = 2
            for member in members {
                guard let size = compactBound(of: member.value, depth: depth - 1) else { return nil }
                total += 4 + 6 * member.key.utf8.count + size
            }
            return total
        case .array(let elements):
            guard depth > 0 else { return nil }
            var total = 2
            for element in elements {
                guard let size = compactBound(of: element, depth: depth - 1) else { return nil }
                total += 1 + size
            }
            return total
        case .string(let text): return 2 + 6 * text.utf8.count
        case .number(let text): return text.utf8.count
        case .bool, .null: return 5
        }
    }

    /// Why a checkpoint of `entries` cannot be written: the largest values, and what to do.
    private static func tooLargeReason(_ entries: [JSONValue.Member]) -> String {
        let limit = FileSystem.stateLimit
        let sizes = entries.map { entry in
            // `{"key":value}`: the key and its value; nil when over the limit alone.
            (entry.key, JSONWriter.bytes(JSONValue(.object([entry])), pretty: false, limit: limit).map { $0.count - 2 })
        }
        let largest = sizes.sorted { ($0.1 ?? .max) > ($1.1 ?? .max) }.prefix(3).map { key, size in
            "\(DisplayText.quoted(key, limit: 32)) \(size.map { "\($0) bytes" } ?? "over \(FileSystem.describeSize(limit))")"
        }
        return "the state takes more than \(FileSystem.describeSize(limit)) (\(limit) bytes) even written "
            + "compactly, more than the reader at the next start takes; the largest of its \(entries.count) "
            + "values: \(largest.joined(separator: ", ")). The file keeps the previous checkpoint; store less "
            + "under those keys, or remove those no longer used (removeValue(forKey:))"
    }

    /// What the file lacks compared with memory, for a message when a checkpoint fails: each
    /// changed key with its value in memory and on disk, e.g.
    /// `heartbeat = {"count":858} (on disk: {"count":840})`; "nothing" when the file is current.
    package var unsavedSummary: String {
        let (entries, written) = storage.withLock { ($0.entries, $0.written) }
        func text(_ value: JSONValue?) -> String {
            guard let value else { return "absent" }
            let text = JSONWriter.write(value, pretty: false)
            return text.utf8.count <= 200 ? text : String(text.prefix(200)) + "…"
        }
        let changed = entries.compactMap { entry -> String? in
            let old = written.last { $0.key == entry.key }?.value
            guard old.map({ JSONWriter.write($0, pretty: false) }) != JSONWriter.write(entry.value, pretty: false)
            else {
                return nil
            }
            return "\(entry.key) = \(text(entry.value)) (on disk: \(text(old)))"
        }
        let removed = written.filter { old in !entries.contains { $0.key == old.key } }.map {
            "\($0.key) removed (on disk: \(text($0.value)))"
        }
        return changed.isEmpty && removed.isEmpty ? "nothing" : (changed + removed).joined(separator: "; ")
    }
}

/// Where listeners find the ``StateStore``.
public enum StateStoreKey: ValueKey {
    public typealias Value = StateStore
}

import Synchronization
import VigilPOSIX
import VigilPlatform

/// One file descriptor passed by socket activation (`sd_listen_fds_with_names(3)`).
package struct ListenedFileDescriptor: Sendable, Hashable {
    /// The descriptor, already open in this process (from 3 upwards).
    package let fileDescriptor: Int32
    /// Its `FileDescriptorName=` (default: the socket unit's name; `unknown` when systemd sent
    /// no names).
    package let name: String

    /// A descriptor under a name, as systemd passes it (tests and the test kit make these).
    package init(fileDescriptor: Int32, name: String) {
        self.fileDescriptor = fileDescriptor
        self.name = name
    }
}

extension ListenedFileDescriptor {
    /// The descriptors systemd passed to this process, in order; empty when none.
    ///
    /// Follows `sd_listen_fds_with_names(3)`: `LISTEN_PID` must be this process (otherwise the
    /// variables were inherited and mean nothing here), `LISTEN_FDS` counts descriptors from 3
    /// upwards, `LISTEN_FDNAMES` names them (colon-separated). Each passed descriptor gets
    /// `FD_CLOEXEC`. The variables are read once per process; later calls return the same list
    /// (or throw the same error), so ``ListeningSocket`` and this function can be mixed.
    ///
    /// - Parameter unsetEnvironment: remove `LISTEN_PID`, `LISTEN_FDS` and `LISTEN_FDNAMES` so
    ///   children do not inherit them (`NOTIFY_SOCKET` is never touched). Only the first call
    ///   in a process reads (and unsets) them.
    /// - Throws: ``SystemdError`` with code `malformedEnvironment` when the variables
    ///   are not what systemd sets, `unusable` when an announced descriptor is not open.
    /// - Important: Reads and changes the process environment; call it early in `main`, before
    ///   other threads read the environment.
    package static func adopt(unsetEnvironment: Bool = true) throws(SystemdError) -> [ListenedFileDescriptor] {
        try SocketActivation.passed(unsetEnvironment: unsetEnvironment)
    }

    /// The descriptors `environment` announces to process `pid`, without touching them.
    ///
    /// Never traps: every number is parsed with bounds; descriptors must lie below
    /// `descriptorLimit` (this process's `RLIMIT_NOFILE`) and number at most 65536, so a huge
    /// `LISTEN_FDS` is refused instead of building a huge list.
    package static func parse(
        environment: (String) -> String?,
        pid: Int32,
        descriptorLimit: Int32
    ) throws(SystemdError) -> [ListenedFileDescriptor] {
        let remedy =
            "systemd sets it for a socket-activated service; unset LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES when starting the daemon by hand"
        guard let pidText = environment("LISTEN_PID") else { return [] }
        guard let listenPID = decimal(pidText), listenPID > 0 else {
            throw SystemdError.listeningSocket(
                .malformedEnvironment,
                "LISTEN_PID='\(pidText.prefix(40))' is not a process id: \(remedy)"
            )
        }
        // Inherited from a socket-activated parent: meant for another process, so nothing here.
        guard listenPID == pid else { return [] }
        guard let countText = environment("LISTEN_FDS") else { return [] }
        let start = SocketActivation.firstDescriptor
        guard let count = decimal(countText), count >= 0 else {
            throw SystemdError.listeningSocket(
                .malformedEnvironment,
                "LISTEN_FDS='\(countText.prefix(40))' is not a count of descriptors: \(remedy)"
            )
        }
        guard Int64(count) <= Int64(descriptorLimit) - Int64(start) else {
            throw SystemdError.listeningSocket(
                .malformedEnvironment,
                "LISTEN_FDS=\(count) announces descriptors up to fd \(Int64(start) + Int64(count) - 1), beyond this process's limit of \(descriptorLimit) open files (RLIMIT_NOFILE): \(remedy)"
            )
        }
        // Without LISTEN_FDNAMES the list below is built from the count alone: keep it sane.
        guard count <= SocketActivation.maximumCount else {
            throw SystemdError.listeningSocket(
                .malformedEnvironment,
                "LISTEN_FDS=\(count) is more descriptors than Vigil accepts (\(SocketActivation.maximumCount)): \(remedy)"
            )
        }
        let names: [String]
        if let namesText = environment("LISTEN_FDNAMES") {
            // Split and checked as bytes: a name is what FileDescriptorName= allows (systemd's
            // fdname_is_valid), so a name compared later is never a long run of combining
            // marks (quadratic to compare) or a control character that forges a log line.
            let split = namesText.utf8.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
            if let bad = split.firstIndex(where: { $0.count > 255 || $0.contains { $0 < 0x20 || $0 > 0x7E } }) {
                throw SystemdError.listeningSocket(
                    .malformedEnvironment,
                    "LISTEN_FDNAMES= name \(bad + 1) is not one systemd gives (at most 255 printable ASCII characters, as FileDescriptorName= allows): \(remedy)"
                )
            }
            names = split.map { String(decoding: $0, as: UTF8.self) }
            guard names.count == count else {
                throw SystemdError.listeningSocket(
                    .malformedEnvironment,
                    "LISTEN_FDNAMES='\(namesText.prefix(80))' has \(names.count) names for LISTEN_FDS=\(count) descriptors: \(remedy)"
                )
            }
        } else {
            names = Array(repeating: "unknown", count: Int(count))
        }
        return names.enumerated().map { index, name in
            ListenedFileDescriptor(fileDescriptor: start + Int32(index), name: name)
        }
    }
}

extension ListenedFileDescriptor {
    /// A number as systemd writes it: decimal digits, no sign, no space, no leading zero.
    /// libsystemd also reads ` 3`, `+3`, `0x3` and, in 252, `010` as 8 (base prefixes); none
    /// of them comes from systemd, so each is refused here rather than read one way or another
    /// (`Tests/VigilSystemdTests/LibsystemdConformanceTests.swift`).
    fileprivate static func decimal(_ text: String) -> Int32? {
        let digits = text.utf8
        guard !digits.isEmpty, digits.count <= 10,
            digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            digits.count == 1 || digits.first != UInt8(ascii: "0")
        else { return nil }
        return Int32(text)
    }
}

/// The process-wide record of what socket activation passed: read once, adopted by name once.
enum SocketActivation {
    /// `SD_LISTEN_FDS_START`.
    static let firstDescriptor: Int32 = 3
    /// The most descriptors accepted from `LISTEN_FDS`: far above what a unit passes, low enough
    /// that a bogus count cannot exhaust memory.
    static let maximumCount: Int32 = 65536

    private struct State {
        var passed: Result<[ListenedFileDescriptor], SystemdError>?
        var adopted: Set<Int32> = []
    }

    private static let state = Mutex(State())

    static func passed(unsetEnvironment: Bool) throws(SystemdError) -> [ListenedFileDescriptor] {
        try state.withLock { state throws(SystemdError) in
            if let passed = state.passed { return try passed.get() }
            let result = Result { () throws(SystemdError) in try readEnvironment(unset: unsetEnvironment) }
            state.passed = result
            return try result.get()
        }
    }

    /// Marks `descriptor` as adopted; `false` when it already was.
    static func markAdopted(_ descriptor: Int32) -> Bool {
        state.withLock { $0.adopted.insert(descriptor).inserted }
    }

    private static func readEnvironment(unset: Bool) throws(SystemdError) -> [ListenedFileDescriptor] {
        defer {
            if unset {
                for variable in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { unsetenv(variable) }
            }
        }
        var limit = rlimit()
        let descriptorLimit: Int32 =
            getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0
            ? Int32(clamping: limit.rlim_cur) : Int32.max
        let passed = try ListenedFileDescriptor.parse(
            environment: { name in getenv(name).map { String(cString: $0) } },
            pid: getpid(),
            descriptorLimit: descriptorLimit
        )
        for descriptor in passed {
            let flags = fcntl(descriptor.fileDescriptor, F_GETFD)
            guard flags >= 0, fcntl(descriptor.fileDescriptor, F_SETFD, flags | FD_CLOEXEC) == 0 else {
                throw SystemdError.listeningSocket(
                    .unusable,
                    "fd \(descriptor.fileDescriptor) '\(descriptor.name)' is announced in LISTEN_FDS but is not open in this process: start the daemon from its .socket unit, or unset LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES",
                    cause: SystemError(
                        path: "fd \(descriptor.fileDescriptor) '\(descriptor.name)'",
                        operation: "set FD_CLOEXEC on",
                        errno: errno
                    )
                )
            }
        }
        return passed
    }
}

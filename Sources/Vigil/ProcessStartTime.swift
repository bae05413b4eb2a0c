import VigilPOSIX
import VigilPlatform

/// When a process started, in clock ticks after boot: field 22 (`starttime`) of
/// `/proc/<pid>/stat`. A pid and its start time name one process for the life of the system,
/// where a pid alone may be reused.
package enum ProcessStartTime {
    /// The start time of `pid`, or `nil` when the process does not exist or its `stat` cannot
    /// be read or parsed.
    package static func of(_ pid: Int32) -> UInt64? {
        guard pid > 0, let text = statLine(pid) else { return nil }
        return parse(statLine: text)
    }

    /// This process's start time.
    package static var current: UInt64? { of(getpid()) }

    /// Whether `pid` has exited but its parent has not reaped it yet (state `Z`, or `X` while
    /// it goes): it keeps its pid and `kill(pid, 0)` still succeeds, but it runs no more and
    /// will answer nothing. `false` when its `stat` cannot be read.
    package static func hasExited(_ pid: Int32) -> Bool {
        guard pid > 0, let text = statLine(pid), let state = state(statLine: text) else { return false }
        return state == UInt8(ascii: "Z") || state == UInt8(ascii: "X")
    }

    /// Field 3 (the state letter) of a `/proc/<pid>/stat` line, counted from the last `)`.
    package static func state(statLine: [UInt8]) -> UInt8? {
        fieldsAfterName(statLine)?.first?.first
    }

    /// Field 22 of a `/proc/<pid>/stat` line. The second field, `(comm)`, is the executable's
    /// name and may hold spaces and parentheses itself, so the fields after it are counted from
    /// the **last** `)`: the state is field 3, the start time field 22.
    package static func parse(statLine: [UInt8]) -> UInt64? {
        // fields[0] is field 3 (state); field 22 is fields[19].
        guard let fields = fieldsAfterName(statLine), fields.count > 19 else { return nil }
        let field = fields[19]
        guard !field.isEmpty, field.count <= 20 else { return nil }
        var value: UInt64 = 0
        for byte in field {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { return nil }
            value = sum
        }
        return value
    }

    /// The fields after `(comm)`, from field 3 on; `nil` without a `)`.
    private static func fieldsAfterName(_ statLine: [UInt8]) -> [ArraySlice<UInt8>]? {
        guard let close = statLine.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        return statLine[(close + 1)...].split(separator: UInt8(ascii: " "), omittingEmptySubsequences: true)
    }

    private static func statLine(_ pid: Int32) -> [UInt8]? {
        guard let descriptor = try? FileDescriptor(opening: "/proc/\(pid)/stat", O_RDONLY | O_NOFOLLOW) else {
            return nil
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        // A stat line is well under 4 KiB even with a 15-byte comm full of parentheses.
        while bytes.count < 65536 {
            let count = chunk.withUnsafeMutableBytes { SystemCall.read(descriptor.rawValue, into: $0) }
            if count < 0 { return nil }
            if count == 0 { break }
            bytes += chunk[0..<count]
        }
        return bytes
    }
}

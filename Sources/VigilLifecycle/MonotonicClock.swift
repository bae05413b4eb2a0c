#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// `CLOCK_MONOTONIC`, the clock systemd's `MONOTONIC_USEC=` and `EXTEND_TIMEOUT_USEC=` use.
public enum MonotonicClock {
    /// Now, in microseconds. The corresponding C function is `clock_gettime(CLOCK_MONOTONIC)`.
    public static func microseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
    }
}

extension Duration {
    /// Whole microseconds, rounded down, never negative, saturating at `Int64.max`.
    package var microseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        guard seconds < 9_000_000_000_000 else { return UInt64(Int64.max) }
        return UInt64(seconds) * 1_000_000 + UInt64(attoseconds / 1_000_000_000_000)
    }

    /// Whole nanoseconds, rounded down, never negative, saturating at `Int64.max`.
    package var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        guard seconds < 9_000_000_000 else { return UInt64(Int64.max) }
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }
}

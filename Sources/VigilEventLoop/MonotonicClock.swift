import VigilPlatform

/// `CLOCK_MONOTONIC`, the clock systemd's `MONOTONIC_USEC=` and `EXTEND_TIMEOUT_USEC=` use, and
/// the clock of the event loop's timers: the one reader of it for Swift code in Vigil.
package enum MonotonicClock {
    /// Now, in nanoseconds. The corresponding C function is `clock_gettime(CLOCK_MONOTONIC)`.
    package static func nanoseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        // The kernel's clock is never negative and fits 584 years of nanoseconds.
        return UInt64(truncatingIfNeeded: now.tv_sec) &* 1_000_000_000 &+ UInt64(truncatingIfNeeded: now.tv_nsec)
    }

    /// Now, in microseconds.
    package static func microseconds() -> UInt64 {
        nanoseconds() / 1_000
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

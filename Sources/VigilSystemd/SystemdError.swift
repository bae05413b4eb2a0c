/// A call to the service manager (its notify socket) failed.
public struct SystemdError: Error, Hashable, CustomStringConvertible {
    /// The errno value of the failed call.
    public let errno: Int32
    /// What was being done, and what to check.
    public let message: String

    init(errno: Int32, _ message: String) {
        self.errno = errno
        self.message = message
    }

    public var description: String {
        "\(message) (\(String(cString: strerror(errno))), errno \(errno))"
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

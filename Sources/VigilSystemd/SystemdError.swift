import VigilPOSIX

/// The former name of the error a failed send to the service manager's notify socket throws:
/// it is the one errno-carrying ``VigilPOSIX/SystemError`` now (`errno`, and the socket's address as
/// `path`).
@available(*, deprecated, renamed: "SystemError")
public typealias SystemdError = SystemError

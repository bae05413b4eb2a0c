/// The fixed 128-bit `MESSAGE_ID`s of Vigil's lifecycle journal entries, so that
/// `journalctl MESSAGE_ID=…` finds them (listed in the README, like systemd's catalog).
///
/// One case per entry, its raw value the id (32 lower-case hex digits, as journald expects):
/// `allCases` lists every one, so the catalog's test cannot miss an id added here.
package enum LifecycleMessageID: String, CaseIterable, Sendable {
    /// Every listener started; the daemon reported ready.
    case started = "61ece635e54942e1b9c1dd26c92678c0"
    /// Start-up failed.
    case startFailed = "fb2c9dd93cf0458ea1c91bbc63140915"
    /// A reload was applied.
    case reloadApplied = "7dd32b12fecb4f54b882f1a4b4061f72"
    /// A reload was rejected; the old configuration stays.
    case reloadRejected = "9475ebda59634e2fb407cda3695425bc"
    /// A user signal (SIGUSR1) was handled.
    case userSignal = "c06f97d2500d44ab8e99eb45663d26cb"
    /// Shutdown began.
    case stopping = "9a931e64755042cca47bf9a3940245ed"
    /// Shutdown finished.
    case stopped = "a68d07ff51674e3ab701b9d04ab67e69"
    /// Shutdown finished, but a listener failed to stop cleanly (a final checkpoint that could
    /// not be written, say); the daemon exits non-zero.
    case stopFailed = "62a1c17ff67341619cf37d4b53b826e3"
    /// The previous run did not shut down cleanly (crash, kill -9, power loss).
    case uncleanShutdown = "3e4167fd5a4f4684b69749aba65dd187"
    /// A listener declared a fatal fault, or the watchdog withheld a ping.
    case watchdogFault = "079016620c1947ea917c4086c8f486fc"
    /// The service manager reported memory pressure; every listener was asked to release what
    /// it can rebuild.
    case memoryPressure = "0cd2cd838e6e46c182a0fd36b9b59a18"
    /// journald could not take some entries (its queue was full, or it was frozen): they were
    /// dropped so that logging never blocks the daemon; this entry says how many.
    case journalEntriesDropped = "3606d99ed4c147ff9017f354ff5a6bad"
}

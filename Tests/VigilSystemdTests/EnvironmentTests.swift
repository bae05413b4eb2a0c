import Testing
import VigilSystemd

@Suite struct EnvironmentTests {
    private func environment(
        _ variables: [String: String],
        stderr: (device: UInt64, inode: UInt64)? = (2049, 77),
        terminal: Bool = false
    ) -> ServiceManagerEnvironment {
        ServiceManagerEnvironment(environment: { variables[$0] }, stderr: stderr, stderrIsTerminal: terminal, pid: 4242)
    }

    @Test func aTerminalIsNotAServiceManager() {
        let env = environment(["TERM": "xterm"], terminal: true)
        #expect(!env.isUnderServiceManager)
        #expect(LogDestination.automatic(env) == .terminal(colors: true))
    }

    @Test func noColorTurnsColoursOff() {
        #expect(LogDestination.automatic(environment(["NO_COLOR": "1"], terminal: true)) == .terminal(colors: false))
    }

    @Test func journalStreamMustMatchStderr() {
        let matching = environment(["JOURNAL_STREAM": "2049:77", "INVOCATION_ID": "abc"])
        #expect(matching.stderrIsJournal)
        #expect(LogDestination.automatic(matching) == .journal)
        // Inherited by a child whose stderr was redirected: not the journal any more.
        let redirected = environment(["JOURNAL_STREAM": "2049:77", "INVOCATION_ID": "abc"], stderr: (2049, 78))
        #expect(!redirected.stderrIsJournal)
        #expect(LogDestination.automatic(redirected) == .syslogPrefixedStderr)
    }

    @Test(arguments: [
        ["NOTIFY_SOCKET": "/run/systemd/notify"],
        ["SYSTEMD_EXEC_PID": "4242"],
        ["INVOCATION_ID": "0123456789abcdef"],
    ])
    func anyOfSystemdsVariablesMeansAServiceManager(variables: [String: String]) {
        let env = environment(variables)
        #expect(env.isUnderServiceManager)
        #expect(LogDestination.automatic(env) == .syslogPrefixedStderr)
    }

    @Test func systemdExecPIDOfAnotherProcessDoesNotCount() {
        #expect(!environment(["SYSTEMD_EXEC_PID": "1"]).isUnderServiceManager)
    }

    @Test func destinationsCanBeOverridden() {
        let env = environment([:])
        #expect(LogDestination(name: "journal", environment: env) == .journal)
        #expect(LogDestination(name: "syslog", environment: env) == .syslogPrefixedStderr)
        #expect(LogDestination(name: "terminal", environment: env) == .terminal(colors: false))
        #expect(LogDestination(name: "nonsense", environment: env) == nil)
    }
}

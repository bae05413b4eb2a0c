import Glibc
import Logging
import ServiceLifecycle
import Testing
import VigilLifecycle
import VigilTesting

@Suite struct SignalMapTests {
    @Test func defaultsFollowSystemd() {
        let map = SignalMap.default
        #expect(map[.sighup] == .reload)
        #expect(map[.sigterm] == .terminate)
        #expect(map[.sigint] == .terminate)
        #expect(map[.sigusr1] == .userSignal)
        #expect(map[.sigusr2] == .userSignal, "a stray SIGUSR2 must not kill the daemon")
        #expect(map.reloadSignal == .sighup)
    }

    @Test func theReloadSignalCanMove() {
        var map = SignalMap.default
        map.reloadSignal = .realTime(3)
        // Still owned (taken and its discard logged), not a reload: unowned, a SIGHUP blocked
        // from the first instruction would stay pending unseen.
        #expect(map[.sighup] == .ignore)
        #expect(map.event(for: .sighup) == nil)
        #expect(map.signals.contains(.sighup))
        #expect(map[.realTime(3)] == .reload)
        #expect(map.reloadSignal?.description == "SIGRTMIN+3")
        map.reloadSignal = .sighup
        #expect(map[.sighup] == .reload)
        #expect(map[.realTime(3)] == .ignore)
    }

    @Test(arguments: [
        ("SIGHUP", SIGHUP), ("HUP", SIGHUP), ("sigterm", SIGTERM), ("USR2", SIGUSR2), ("10", 10), ("1", SIGHUP),
        ("\(__libc_current_sigrtmin() + 3)", __libc_current_sigrtmin() + 3),
        ("SIGRTMIN", __libc_current_sigrtmin()), ("SIGRTMIN+3", __libc_current_sigrtmin() + 3),
        ("RTMIN+1", __libc_current_sigrtmin() + 1), ("SIGRTMAX-2", __libc_current_sigrtmax() - 2),
    ])
    func parsesSignalNames(name: String, number: Int32) {
        #expect(ProcessSignal(name: name)?.rawValue == number)
    }

    /// SIGKILL and SIGSTOP by number (no daemon can handle them), and the numbers glibc keeps
    /// between the standard and the real-time signals, are refused as their names are.
    @Test(arguments: ["", "SIGFOO", "SIGRTMIN+99", "SIGRTMIN-1", "0", "-3", "9", "19", "32", "33", "SIGKILL", "99"])
    func rejectsWhatIsNotASignal(name: String) {
        #expect(ProcessSignal(name: name) == nil)
    }

    @Test func describesSignalsTheCWay() {
        #expect(ProcessSignal.sighup.description == "SIGHUP")
        #expect(ProcessSignal.realTime(0).description == "SIGRTMIN")
        #expect(ProcessSignal.realTime(5).description == "SIGRTMIN+5")
    }
}

/// Real signals sent to this process. Only user signals, `SIGALRM` and real-time signals: stop
/// signals go to child processes (see the vigild tests).
@Suite(.serialized) struct InProcessSignalTests {
    @Test func ownedSignalsBecomeEvents() async throws {
        var signals = SignalMap()
        signals[.sigusr2] = .userSignal
        signals[.sigalrm] = .reload
        signals[.realTime(4)] = .reload
        let log = AsyncRecorder<String>()
        let notifier = RecordingNotifier()
        let observer = RecordingObserver()
        let group = try ListenerGroup(
            listeners: [RecordingListener("l", log: log)],
            configuration: .init(logger: .init(label: "test"), signals: signals, observers: [observer])
                .reporting(to: notifier)
        )
        let running = Task { try await group.run() }
        try await notifier.waitForReady()
        kill(getpid(), SIGUSR2)
        try await observer.kinds.wait { $0.contains(.userSignal(.sigusr2)) }
        kill(getpid(), SIGALRM)
        try await observer.kinds.wait {
            $0.contains { if case .reloadApplied(2, _) = $0 { true } else { false } }
        }
        kill(getpid(), ProcessSignal.realTime(4).rawValue)
        try await observer.kinds.wait {
            $0.contains { if case .reloadApplied(3, _) = $0 { true } else { false } }
        }
        group.requestTermination(.requested("test"))
        try await running.value
    }

    /// A second group that asks for a signal the first owns trapped, and killed the first
    /// daemon with it (a helper's finding: two `Daemon`s in one process). Now its run fails to
    /// start with the reason, and the first goes on.
    @Test func aSecondOwnerOfASignalFailsToStartAndTheFirstGoesOn() async throws {
        var signals = SignalMap()
        signals[.realTime(5)] = .reload
        let log = AsyncRecorder<String>()
        let notifier = RecordingNotifier()
        let observer = RecordingObserver()
        let first = try ListenerGroup(
            listeners: [RecordingListener("first", log: log)],
            configuration: .init(logger: .init(label: "test"), signals: signals, observers: [observer])
                .reporting(to: notifier)
        )
        let running = Task { try await first.run() }
        try await notifier.waitForReady()
        let secondNotifier = RecordingNotifier()
        let second = try ListenerGroup(
            listeners: [RecordingListener("second", log: log)],
            configuration: .init(logger: .init(label: "test"), signals: signals).reporting(to: secondNotifier)
        )
        let error = await #expect(throws: ListenerGroupError.self) { try await second.run() }
        #expect(error?.code == .startFailed)
        #expect(
            error?.message
                == "Start-up failed: \(ProcessSignal.realTime(5)) already has an owner in this process: a Daemon runs in it already; run one Daemon per process (and do not give its signals to a ServiceGroup too).",
            "\(String(describing: error?.message))"
        )
        #expect(!log.values.contains("second.start"))
        // Nothing to the service manager: the unit's status is the first daemon's (a reviewer's point).
        #expect(secondNotifier.datagrams.isEmpty, "\(secondNotifier.datagrams)")
        kill(getpid(), ProcessSignal.realTime(5).rawValue)
        try await observer.kinds.wait {
            $0.contains { if case .reloadApplied(2, _) = $0 { true } else { false } }
        }
        first.requestTermination(.requested("test"))
        try await running.value
    }
}

/// The mediator inside a swift-service-lifecycle `ServiceGroup`, next to a daemon's own service.
@Suite struct ServiceGroupInteropTests {
    struct OtherService: Service {
        let events: AsyncRecorder<String>
        let finishOnItsOwn: Bool
        func run() async throws {
            events.append("other.running")
            if finishOnItsOwn { return }
            try? await gracefulShutdown()
            events.append("other.shutdown")
        }
    }

    @Test func terminatingTheMediatorShutsTheGroupDown() async throws {
        let log = AsyncRecorder<String>()
        let events = AsyncRecorder<String>()
        let notifier = RecordingNotifier()
        let group = try ListenerGroup(
            listeners: [RecordingListener("l", log: log)],
            configuration: .init(logger: .init(label: "test"), signals: SignalMap()).reporting(to: notifier)
        )
        let services = ServiceGroup(
            configuration: .init(
                services: [
                    group.serviceConfiguration, .init(service: OtherService(events: events, finishOnItsOwn: false)),
                ],
                logger: .init(label: "test")
            )
        )
        let running = Task { try await services.run() }
        try await notifier.waitForReady()
        try await events.wait { $0.contains("other.running") }
        group.requestTermination(.requested("test"))
        try await running.value
        #expect(events.values == ["other.running", "other.shutdown"])
        #expect(log.values.contains("l.terminate.done"))
    }

    @Test func theGroupsGracefulShutdownTerminatesTheListeners() async throws {
        let log = AsyncRecorder<String>()
        let events = AsyncRecorder<String>()
        let group = try ListenerGroup(
            listeners: [RecordingListener("l", log: log)],
            configuration: .init(logger: .init(label: "test"), signals: SignalMap())
        )
        let services = ServiceGroup(
            configuration: .init(
                services: [
                    group.serviceConfiguration,
                    .init(
                        service: OtherService(events: events, finishOnItsOwn: true),
                        successTerminationBehavior: .gracefullyShutdownGroup
                    ),
                ],
                logger: .init(label: "test")
            )
        )
        try await services.run()
        #expect(log.values == ["l.start", "l.start.done", "l.terminate", "l.terminate.done"])
    }
}

import VigilLifecycle

extension ServiceListener {
    /// A listener that runs `run` and hands it each committed configuration, typed: the
    /// configuration listener's values reach the long-running part without a second listener.
    ///
    /// ```swift
    /// let queue = ServiceListener(name: "queue", configuration: QueueConfiguration.self,
    ///                             onCommit: { configuration in await pool.resize(to: configuration.concurrency) }) { ready in
    ///     …
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - name: the listener's name.
    ///   - dependencies: the listeners that start before this one; must include the
    ///     `ConfigurationListener` (`"configuration"`, the default).
    ///   - budgets: its budgets (see ``ServiceListener/init(name:dependencies:budgets:prepareReload:commitReload:memoryPressure:userSignal:shutdownHistory:run:)``).
    ///   - configuration: the daemon's configuration type.
    ///   - check: checks a proposed configuration before anything applies it (one the
    ///     configuration listener accepted); return `.reject(reason:)` naming the key for one the
    ///     running part cannot take. `nil` accepts every one.
    ///   - onCommit: called with the new configuration once every listener accepted the reload
    ///     (after the configuration listener committed it); not called for a rejected reload.
    ///   - memoryPressure: runs on memory pressure (drop a cache); `nil` for nothing.
    ///   - userSignal: runs on `SIGUSR1` or `SIGUSR2`; `nil` for nothing.
    ///   - shutdownHistory: what knows whether the previous run stopped cleanly (a
    ///     `ShutdownMarker`), for `status`; `nil` for none.
    ///   - run: the part, as for ``ServiceListener/init(name:dependencies:budgets:prepareReload:commitReload:memoryPressure:userSignal:shutdownHistory:run:)``.
    public convenience init<Configuration: ValidatedConfiguration>(
        name: String,
        dependencies: [String] = ["configuration"],
        budgets: ListenerBudgets? = nil,
        configuration: Configuration.Type,
        check: (@Sendable (Configuration) async throws -> ReloadDecision)? = nil,
        onCommit: @escaping @Sendable (Configuration) async throws -> Void,
        memoryPressure: (@Sendable (ListenerContext) async throws -> Void)? = nil,
        userSignal: (@Sendable (ProcessSignal, ListenerContext) async throws -> Void)? = nil,
        shutdownHistory: (any ShutdownHistory)? = nil,
        run: @escaping @Sendable (ReadySignal) async throws -> Void
    ) {
        self.init(
            name: name,
            dependencies: dependencies,
            budgets: budgets,
            prepareReload: { reload, _ in
                guard let check, let proposed = reload.proposed[CurrentConfiguration<Configuration>.self] else {
                    return .accept
                }
                return try await check(proposed)
            },
            commitReload: { _, context in
                if let committed = context.values[CurrentConfiguration<Configuration>.self] {
                    try await onCommit(committed)
                }
            },
            memoryPressure: memoryPressure,
            userSignal: userSignal,
            shutdownHistory: shutdownHistory,
            run: run
        )
    }
}

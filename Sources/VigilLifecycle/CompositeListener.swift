/// A group of listeners that acts as one listener (the composite pattern).
///
/// Its members are ordered by their dependencies on each other (declaration order otherwise);
/// dependencies on listeners outside the composite become the composite's own. The composite
/// starts, reloads and hears user signals in that order and terminates in reverse. A member
/// that fails fails the composite, named as `composite/member`.
package struct CompositeListener: Listener {
    package let name: String
    package let dependencies: [String]
    package let budgets: ListenerBudgets?
    /// The members, in order.
    package let members: [any Listener]

    /// Groups `members` under `name`.
    ///
    /// - Throws: ``ListenerGroupError`` for duplicate names or a cycle among the members.
    package init(
        name: String,
        dependencies: [String] = [],
        budgets: ListenerBudgets? = nil,
        members: [any Listener]
    ) throws {
        let names = Set(members.map(\.name))
        let outside = members.flatMap(\.dependencies).filter { !names.contains($0) }
        self.members = try DependencyOrder.sort(
            members,
            name: \.name,
            dependencies: \.dependencies,
            external: Set(outside)
        )
        self.name = name
        var all = dependencies
        for dependency in outside where !all.contains(dependency) { all.append(dependency) }
        self.dependencies = all
        self.budgets = budgets
    }

    private func named<T>(_ member: any Listener, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            throw MemberError(path: "\(name)/\(member.name)", underlying: error)
        }
    }

    package func start(context: ListenerContext) async throws {
        for member in members { try await named(member) { try await member.start(context: context) } }
    }

    package func prepareReload(_ reload: ReloadTransaction, context: ListenerContext) async throws -> ReloadDecision {
        for member in members {
            let decision = try await named(member) { try await member.prepareReload(reload, context: context) }
            if case .reject(let reason) = decision { return .reject(reason: "\(member.name): \(reason)") }
        }
        return .accept
    }

    package func commitReload(_ reload: ReloadTransaction, context: ListenerContext) async throws {
        for member in members { try await named(member) { try await member.commitReload(reload, context: context) } }
    }

    package func abortReload(_ reload: ReloadTransaction, context: ListenerContext) async {
        for member in members.reversed() { await member.abortReload(reload, context: context) }
    }

    package func userSignal(_ signal: ProcessSignal, context: ListenerContext) async throws {
        for member in members { try await named(member) { try await member.userSignal(signal, context: context) } }
    }

    package func terminate(reason: TerminationReason, context: ListenerContext) async throws {
        var firstError: (any Error)?
        for member in members.reversed() {
            do {
                try await named(member) { try await member.terminate(reason: reason, context: context) }
            } catch {
                firstError = firstError ?? error
            }
        }
        if let firstError { throw firstError }
    }

    package func checkHealth(context: ListenerContext) async throws {
        for member in members { try await named(member) { try await member.checkHealth(context: context) } }
    }

    struct MemberError: Error, CustomStringConvertible {
        var path: String
        var underlying: any Error
        var description: String { "\(path): \(underlying)" }
    }
}

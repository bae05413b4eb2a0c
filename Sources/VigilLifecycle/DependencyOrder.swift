/// Orders listeners so that each comes after everything it depends on.
///
/// Stable: among listeners whose dependencies are met, declaration order wins, so a group with
/// no dependencies runs in the order it was built.
enum DependencyOrder {
    private enum Mark { case none, visiting, done }

    /// Returns `items` in dependency order, or throws a ``ListenerGroupError`` naming a
    /// duplicate, a missing dependency, or the cycle.
    ///
    /// - Parameter external: names that count as satisfied from outside (a composite's parent).
    static func sort<Item>(
        _ items: [Item],
        name: (Item) -> String,
        dependencies: (Item) -> [String],
        external: Set<String> = []
    ) throws -> [Item] {
        var index: [String: Int] = [:]
        for (position, item) in items.enumerated() {
            let itemName = name(item)
            // Logs, errors, `STATUS=` and other listeners' dependencies name a listener by it.
            if itemName.isEmpty {
                throw ListenerGroupError(
                    .unnamedListener,
                    "Listener \(position + 1) of \(items.count) has an empty name. Give each listener a name: logs, errors and dependencies use it."
                )
            }
            if index.updateValue(position, forKey: itemName) != nil {
                throw ListenerGroupError(
                    .duplicateListener,
                    "Two listeners are named '\(itemName)'. Give each listener a unique name.",
                    listener: itemName
                )
            }
        }
        var edges: [[Int]] = Array(repeating: [], count: items.count)
        for (position, item) in items.enumerated() {
            for dependency in dependencies(item) where !external.contains(dependency) {
                guard let target = index[dependency] else {
                    let known = index.keys.sorted().map { "'\($0)'" }.joined(separator: ", ")
                    throw ListenerGroupError(
                        .missingDependency,
                        "Listener '\(name(item))' depends on '\(dependency)', which is not in the group "
                            + "(listeners: \(known)). Add it, or remove the dependency.",
                        listener: name(item)
                    )
                }
                edges[position].append(target)
            }
        }
        // Depth-first, visiting dependencies before dependants, in declaration order. With a
        // stack of its own, not recursion: a chain of 8,000 dependencies overflowed the thread's
        // stack (SIGSEGV) where a mistake of any other kind is an error.
        var marks = Array(repeating: Mark.none, count: items.count)
        var order: [Item] = []
        order.reserveCapacity(items.count)
        // The nodes being visited, root first, each with its next dependency to visit.
        var path: [(node: Int, next: Int)] = []
        for root in items.indices where marks[root] == .none {
            marks[root] = .visiting
            path.append((root, 0))
            while let (node, next) = path.last {
                guard next < edges[node].count else {
                    path.removeLast()
                    marks[node] = .done
                    order.append(items[node])
                    continue
                }
                path[path.count - 1].next += 1
                let dependency = edges[node][next]
                switch marks[dependency] {
                case .done: continue
                case .visiting:
                    let nodes = path.map(\.node)
                    let start = nodes.firstIndex(of: dependency) ?? 0
                    let cycle = (nodes[start...] + [dependency]).map { name(items[$0]) }.joined(separator: " → ")
                    throw ListenerGroupError(
                        .dependencyCycle,
                        "Listener dependencies form a cycle: \(cycle). Break it by removing one of these dependencies.",
                        listener: name(items[dependency])
                    )
                case .none:
                    marks[dependency] = .visiting
                    path.append((dependency, 0))
                }
            }
        }
        return order
    }
}

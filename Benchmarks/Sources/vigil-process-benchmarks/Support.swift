import BenchmarkSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Order statistics of a sample.
struct Summary {
    let sorted: [Double]

    init<Values: Sequence>(_ values: Values) where Values.Element: BinaryInteger {
        sorted = values.map { Double($0) }.sorted()
    }

    init(_ values: [Double]) { sorted = values.sorted() }

    /// Nearest-rank percentile, `p` in 0...100.
    func percentile(_ p: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }

    var median: Double { percentile(50) }
    var count: Int { sorted.count }
}

/// Numbers as the README's table shows them.
enum Format {
    static func fixed(_ value: Double, _ digits: Int) -> String {
        guard value.isFinite else { return "n/a" }
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let rounded = (value * scale).rounded() / scale
        var text = "\(rounded)"
        if digits == 0 {
            text = "\(Int(rounded))"
        } else if let dot = text.firstIndex(of: ".") {
            let decimals = text.distance(from: dot, to: text.endIndex) - 1
            if decimals < digits { text += String(repeating: "0", count: digits - decimals) }
        }
        return text
    }

    static func microseconds(_ nanoseconds: Double) -> String {
        nanoseconds >= 10_000_000 ? fixed(nanoseconds / 1e6, 1) + " ms" : fixed(nanoseconds / 1e3, 0) + " µs"
    }

    static func ratio(_ value: Double, _ floor: Double) -> String { fixed(value / floor, 2) + "×" }

    static func mebibytes(_ kibibytes: Double) -> String { fixed(kibibytes / 1024, 1) + " MiB" }
}

import BenchmarkSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// vigil-process-benchmarks: vigild measured from outside, as systemd sees it, in one run
// alternating with the C floor (libsystemd), the Go peer (go-systemd) and the language floor (a
// static-stdlib Swift hello-world). Benchmarks/run.sh builds everything and calls this; see the
// README's "Performance".

struct Options {
    var daemons: [String: String] = [:]
    var configuration = ""
    var workDirectory = "/tmp/vigil-benchmarks"
    var runtimeDirectory = "/run/vigil-benchmarks"
    var cycles = 20
    var reloads = 50
    /// notifybench's default pause between reloads.
    var reloadGapMilliseconds = 10
    /// The CPU time systemd 252 spent on each RELOADING=1 or READY=1 here (62–70 µs in three
    /// runs of Benchmarks/systemd-reader.sh; README, "What systemd sees"): the reader spends as
    /// much on each datagram.
    var readerWorkMicroseconds = 65
    var idleSeconds = 5

    static let usage = """
        usage: vigil-process-benchmarks --vigild BINARY --floor BINARY --go-peer BINARY --swift-hello BINARY
               --configuration FILE [--work-directory DIR] [--runtime-directory TMPFS_DIR]
               [--cycles N] [--reloads N] [--reload-gap-ms N] [--reader-work-us N] [--idle-seconds N]
        """

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        func value(_ flag: String) throws -> String {
            guard let value = rest.popFirst() else { throw BenchmarkError("\(flag) needs a value\n\(Self.usage)") }
            return value
        }
        func number(_ flag: String) throws -> Int {
            let text = try value(flag)
            guard let number = Int(text), number > 0, number <= 1_000_000 else {
                throw BenchmarkError("\(flag): '\(text)' is not a number from 1 to 1000000")
            }
            return number
        }
        while let flag = rest.popFirst() {
            switch flag {
            case "--vigild", "--floor", "--go-peer", "--swift-hello":
                daemons[String(flag.dropFirst(2))] = try value(flag)
            case "--configuration": configuration = try value(flag)
            case "--work-directory": workDirectory = try value(flag)
            case "--runtime-directory": runtimeDirectory = try value(flag)
            case "--cycles": cycles = try number(flag)
            case "--reloads": reloads = try number(flag)
            case "--idle-seconds": idleSeconds = try number(flag)
            case "--reload-gap-ms":
                let text = try value(flag)
                guard let number = Int(text), number >= 0, number <= 10_000 else {
                    throw BenchmarkError("\(flag): '\(text)' is not a number from 0 to 10000")
                }
                reloadGapMilliseconds = number
            case "--reader-work-us":
                let text = try value(flag)
                guard let number = Int(text), number >= 0, number <= 10_000 else {
                    throw BenchmarkError("\(flag): '\(text)' is not a number from 0 to 10000")
                }
                readerWorkMicroseconds = number
            default: throw BenchmarkError("unknown argument \(flag)\n\(Self.usage)")
            }
        }
        let missing = ["vigild", "floor", "go-peer", "swift-hello"].filter { daemons[$0] == nil }
        if !missing.isEmpty || configuration.isEmpty {
            throw BenchmarkError(
                "missing \((missing.map { "--\($0)" } + (configuration.isEmpty ? ["--configuration"] : [])).joined(separator: ", "))\n\(Self.usage)"
            )
        }
    }
}

do {
    let options = try Options(Array(CommandLine.arguments.dropFirst()))
    print(try ProcessReport(options: options).run())
} catch {
    var message = "vigil-process-benchmarks: \(error)\n"
    message.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    exit(1)
}

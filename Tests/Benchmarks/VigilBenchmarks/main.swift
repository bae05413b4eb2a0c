import Vigil
import VigilTesting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// vigil-benchmarks: Vigil's performance budget, measured in one run against a C floor.
// Tests/Benchmarks/run.sh builds everything and calls this; see the README's "Performance".

struct Options {
    var vigild = ""
    var floor = ""
    var configuration = ""
    var referenceConfiguration = "packaging/vigild.json"
    var workDirectory = "/tmp/vigil-benchmarks"
    var runtimeDirectory = "/run/vigil-benchmarks"
    var cycles = 20
    var reloads = 25
    var idleSeconds = 5
    var process = true
    var inProcess = true

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        func value(_ flag: String) throws -> String {
            guard let value = rest.popFirst() else { throw BenchmarkError("\(flag) needs a value") }
            return value
        }
        func number(_ flag: String) throws -> Int {
            let text = try value(flag)
            guard let number = Int(text), number > 0 else {
                throw BenchmarkError("\(flag): '\(text)' is not a positive number")
            }
            return number
        }
        while let flag = rest.popFirst() {
            switch flag {
            case "--vigild": vigild = try value(flag)
            case "--floor": floor = try value(flag)
            case "--configuration": configuration = try value(flag)
            case "--reference-configuration": referenceConfiguration = try value(flag)
            case "--work-directory": workDirectory = try value(flag)
            case "--runtime-directory": runtimeDirectory = try value(flag)
            case "--cycles": cycles = try number(flag)
            case "--reloads": reloads = try number(flag)
            case "--idle-seconds": idleSeconds = try number(flag)
            case "--only-process": inProcess = false
            case "--only-in-process": process = false
            default:
                throw BenchmarkError(
                    """
                    unknown argument \(flag)
                    usage: vigil-benchmarks --vigild BINARY --floor BINARY --configuration FILE
                           [--reference-configuration FILE] [--work-directory DIR] [--runtime-directory TMPFS_DIR]
                           [--cycles N] [--reloads N] [--idle-seconds N] [--only-process | --only-in-process]
                    """
                )
            }
        }
        if process, vigild.isEmpty || floor.isEmpty || configuration.isEmpty {
            throw BenchmarkError("the process benchmarks need --vigild, --floor and --configuration")
        }
    }
}

/// One row of the results table.
struct Row {
    var measure: String
    var vigil: String
    var floor: String
    var ratio: String
    var budget: String
    var met: Bool?

    static func header() -> String {
        "| Measure | Vigil | Floor | Ratio | Budget | Met |\n| --- | ---: | ---: | ---: | --- | :---: |"
    }

    var line: String {
        let verdict = met.map { $0 ? "yes" : "**no**" } ?? ""
        return "| \(measure) | \(vigil) | \(floor) | \(ratio) | \(budget) | \(verdict) |"
    }
}

func main() async throws {
    let options = try Options(Array(CommandLine.arguments.dropFirst()))
    var rows: [Row] = []
    if options.inProcess {
        try FileSystem.makeDirectories(options.workDirectory)
        rows += try await InProcessBenchmarks(
            configurationPath: options.referenceConfiguration,
            workDirectory: options.workDirectory
        ).run()
    }
    if options.process {
        rows += try ProcessReport(options: options).run()
    }
    print(Row.header())
    for row in rows { print(row.line) }
}

// The benchmarks run on the executor vigild runs on: one thread, Vigil's event loop.
let status = EventLoopExecutor.run { () async -> Int32 in
    do {
        try await main()
        return 0
    } catch {
        var message = "vigil-benchmarks: \(error)\n"
        message.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
        return 1
    }
}
exit(status)

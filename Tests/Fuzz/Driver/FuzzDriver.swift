import CVigilFuzzer
import VigilFuzzTargets
import VigilPlatform

/// One executable for the three targets, which VIGIL_FUZZ_TARGET picks (JSONParser, Configuration
/// or StateFile), so that the fuzz build links once.
///
/// Built by Tests/Fuzz/run.sh with `-sanitize=fuzzer -D FUZZING`, it runs libFuzzer's driver
/// with the command line (`VIGIL_FUZZ_TARGET=JSONParser vigil-fuzz CORPUS -max_total_time=60`).
/// In a normal build it replays files instead (`VIGIL_FUZZ_TARGET=JSONParser vigil-fuzz FILE…`),
/// e.g. a crash the fuzzer saved.
@main
enum FuzzDriver {
    static let target: FuzzTargets.Target = {
        let name = getenv("VIGIL_FUZZ_TARGET").map { String(cString: $0) } ?? ""
        guard let target = FuzzTargets.target(named: name) else {
            fatalError("set VIGIL_FUZZ_TARGET to one of \(FuzzTargets.all.map(\.directory)) (found \"\(name)\")")
        }
        return target
    }()

    static func main() throws {
        _ = target
        #if FUZZING
            var argc = CommandLine.argc
            var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
            exit(
                LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzOneInput(data, size) }
            )
        #else
            try FuzzTargets.replay(CommandLine.arguments.dropFirst(), through: target.run)
        #endif
    }
}

/// libFuzzer's usual entry point. Unused (``FuzzDriver`` hands libFuzzer's driver its callback),
/// but the fuzzer runtime is linked whole, and its own `main` refers to this symbol.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzDriver.target.run(FuzzTargets.bytes(data, size))
    return 0
}

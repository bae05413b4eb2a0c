#ifndef C_VIGIL_FUZZER_H
#define C_VIGIL_FUZZER_H

#include <stddef.h>
#include <stdint.h>

// libFuzzer's driver (compiler-rt, FuzzerInterface.h), for a program that keeps its own `main`:
// SwiftPM gives every executable a `main` of its own (it renames the module's entry point), so
// vigil-fuzz cannot use libFuzzer's `main` and calls this instead. Defined only when linked with
// `-sanitize=fuzzer`; vigil-fuzz calls it only under `-D FUZZING`.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif

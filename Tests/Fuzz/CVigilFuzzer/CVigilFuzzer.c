// Declarations only (see include/CVigilFuzzer.h); SwiftPM wants a source file in a C target.
#include "CVigilFuzzer.h"

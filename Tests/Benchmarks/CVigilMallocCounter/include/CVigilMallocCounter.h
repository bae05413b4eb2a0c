#ifndef CVIGIL_MALLOC_COUNTER_H
#define CVIGIL_MALLOC_COUNTER_H
#include <stdint.h>

/// Allocations (malloc, calloc, realloc, aligned and memalign forms) made by the whole process
/// since it started. Only the benchmark executable links this.
uint64_t cvigil_malloc_count(void);

#endif

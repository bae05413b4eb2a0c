// See include/CVigilMemoryFile.h.
#define _GNU_SOURCE
#include "CVigilMemoryFile.h"

#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif

int cvigil_memfd_create_sealable(const char *name) {
    // The raw system call: musl and older glibc lack the wrapper, and the kernel's is the same.
    return (int)syscall(SYS_memfd_create, name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
}

long long cvigil_file_system_type(int fd) {
    struct statfs info;
    if (fstatfs(fd, &info) != 0) return -1;
    return (long long)info.f_type;
}

// The C calls VigilSystemd cannot make from Swift: `memfd_create(2)`, for a state snapshot
// kept in systemd's file-descriptor store. Glibc declares it only under _GNU_SOURCE, which
// Swift's Glibc module is not built with, and `syscall(2)` is variadic, which Swift cannot call.
// (Not named CVigilSystemd: the benchmarks package has a target of that name, its C floor.)
#ifndef CVIGILMEMORYFILE_H
#define CVIGILMEMORYFILE_H

// memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING): a close-on-exec anonymous file whose
// contents can be sealed. Returns the descriptor, or -1 with errno set (ENOSYS before Linux 3.17).
int cvigil_memfd_create_sealable(const char *name);

// fstatfs(fd)'s f_type (the file system's magic number, linux/magic.h), or -1 with errno set:
// Swift's Glibc module does not bring in <sys/vfs.h>. Tells a PSI file (procfs, cgroupfs) from
// an ordinary file that $MEMORY_PRESSURE_WATCH names by mistake.
long long cvigil_file_system_type(int fd);

#endif

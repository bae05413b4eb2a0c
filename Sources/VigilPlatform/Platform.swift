// The C library, for every Swift module of the package: Glibc, or Musl with the static Linux SDK.
// One `import VigilPlatform` instead of the same conditional import in every file. Not a product
// and re-exported by no library module, so a daemon's own namespace gets no C library from Vigil.
#if canImport(Glibc)
    @_exported import Glibc
#elseif canImport(Musl)
    @_exported import Musl
#else
    #error("Vigil runs on Linux only (Glibc or Musl): it uses epoll, signalfd, timerfd and systemd's sockets")
#endif

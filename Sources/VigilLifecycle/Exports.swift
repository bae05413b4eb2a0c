// The event loop (EventLoopExecutor, MonotonicClock) lives in VigilEventLoop; daemons that
// import VigilLifecycle (or Vigil) keep seeing it as before.
@_exported import VigilEventLoop

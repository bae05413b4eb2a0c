// A daemon author imports `Vigil` alone: the lifecycle core, the systemd face, configuration,
// persistence, the system-call layer and the event loop (EventLoopExecutor, ChildProcess's
// termination()) come with it.
@_exported import VigilConfiguration
@_exported import VigilEventLoop
@_exported import VigilLifecycle
@_exported import VigilPOSIX
@_exported import VigilPersistence
@_exported import VigilSystemd

// A daemon author imports `Vigil` alone: the lifecycle core, the systemd face, configuration,
// persistence and the system-call layer come with it.
@_exported import VigilConfiguration
@_exported import VigilLifecycle
@_exported import VigilPOSIX
@_exported import VigilPersistence
@_exported import VigilSystemd

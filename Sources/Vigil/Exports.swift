// A daemon author imports `Vigil` alone: the lifecycle core and the systemd face come with it.
@_exported import VigilLifecycle
@_exported import VigilSystemd

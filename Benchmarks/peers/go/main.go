// vigil-go-peer: the Go daemon a user would write instead of vigild, for Vigil's process
// benchmarks (Benchmarks/run.sh). The same work as the C floor (Benchmarks/floor/vigil-floor.c),
// written as a Go programmer would: go-systemd's daemon package for sd_notify, os/signal for
// the signals, a ticker for the watchdog only when WATCHDOG_USEC asks for one.
//
//	start:  read the configuration file, read the state file, write the unclean-shutdown
//	        marker (<state>.running, fsync + rename + fsync of the directory), log a line,
//	        READY=1 with STATUS=.
//	SIGHUP: RELOADING=1 with MONOTONIC_USEC=, read the configuration again, log, READY=1.
//	SIGTERM/SIGINT: STOPPING=1, checkpoint the state file (write a temporary file, fsync,
//	        rename, fsync the directory), remove the marker, fsync the directory, exit 0.
//
// Usage: vigil-go-peer run --config FILE --state-directory DIR [--runtime-directory DIR]
// Built by run.sh with Debian's golang-go and golang-github-coreos-go-systemd-dev
// (GO111MODULE=off, GOPATH=/usr/share/gocode).
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"github.com/coreos/go-systemd/daemon"
)

var (
	configPath string
	stateDir   string
	generation uint64
)

func die(what string, err error) {
	fmt.Fprintf(os.Stderr, "<3>vigil-go-peer: %s: %v\n", what, err)
	daemon.SdNotify(false, fmt.Sprintf("STATUS=%s failed: %v", what, err))
	os.Exit(1)
}

func fsyncDirectory() {
	directory, err := os.Open(stateDir)
	if err == nil {
		err = directory.Sync()
		directory.Close()
	}
	if err != nil {
		die("fsync state directory", err)
	}
}

func writeAtomically(path string, text []byte) {
	temporary := path + ".tmp"
	file, err := os.OpenFile(temporary, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		die("open temporary file", err)
	}
	if _, err = file.Write(text); err == nil {
		err = file.Sync()
	}
	file.Close()
	if err != nil {
		die("write temporary file", err)
	}
	if err := os.Rename(temporary, path); err != nil {
		die("rename", err)
	}
	fsyncDirectory()
}

func loadConfiguration() {
	contents, err := os.ReadFile(configPath)
	if err != nil {
		die("read configuration", err)
	}
	if !bytes.Contains(contents, []byte("{")) {
		die("parse configuration", syscall.EINVAL)
	}
	generation++
}

func monotonicMicroseconds() uint64 {
	var now syscall.Timespec
	// CLOCK_MONOTONIC is 1; the syscall package has no clock_gettime wrapper on every arch.
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&now)), 0)
	return uint64(now.Sec)*1_000_000 + uint64(now.Nsec)/1_000
}

func main() {
	for i := 1; i < len(os.Args); i++ {
		switch {
		case os.Args[i] == "--config" && i+1 < len(os.Args):
			i++
			configPath = os.Args[i]
		case os.Args[i] == "--state-directory" && i+1 < len(os.Args):
			i++
			stateDir = os.Args[i]
		case os.Args[i] == "--runtime-directory" && i+1 < len(os.Args):
			i++
		}
	}
	if configPath == "" || stateDir == "" {
		fmt.Fprintln(os.Stderr, "usage: vigil-go-peer run --config FILE --state-directory DIR")
		os.Exit(2)
	}
	statePath := filepath.Join(stateDir, "state.json")
	markerPath := statePath + ".running"

	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)

	loadConfiguration()
	var heartbeats uint64
	if state, err := os.ReadFile(statePath); err == nil {
		if at := bytes.Index(state, []byte(`"heartbeat":`)); at >= 0 {
			digits := state[at+12:]
			end := 0
			for end < len(digits) && digits[end] >= '0' && digits[end] <= '9' {
				end++
			}
			heartbeats, _ = strconv.ParseUint(string(digits[:end]), 10, 64)
		}
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		die("create state directory", err)
	}
	writeAtomically(markerPath, []byte(fmt.Sprintf("%d\n", os.Getpid())))

	var watchdog <-chan time.Time
	if interval, err := daemon.SdWatchdogEnabled(false); err == nil && interval > 0 {
		watchdog = time.NewTicker(interval / 2).C
	}

	fmt.Fprintf(os.Stderr, "<6>Started vigil-go-peer (generation %d)\n", generation)
	daemon.SdNotify(false, "READY=1\nSTATUS=Running")

	for {
		select {
		case <-watchdog:
			daemon.SdNotify(false, daemon.SdNotifyWatchdog)
		case received := <-signals:
			switch received {
			case syscall.SIGHUP:
				daemon.SdNotify(false, fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", monotonicMicroseconds()))
				loadConfiguration()
				fmt.Fprintf(os.Stderr, "<6>Reloaded: configuration generation %d\n", generation)
				daemon.SdNotify(false, "READY=1\nSTATUS=Running")
			case syscall.SIGTERM, syscall.SIGINT:
				daemon.SdNotify(false, daemon.SdNotifyStopping)
				writeAtomically(statePath, []byte(fmt.Sprintf("{\"formatVersion\":1,\"values\":{\"heartbeat\":%d}}\n", heartbeats)))
				if err := os.Remove(markerPath); err != nil {
					die("remove marker", err)
				}
				fsyncDirectory()
				fmt.Fprintln(os.Stderr, "<6>Stopped")
				os.Exit(0)
			}
		}
	}
}

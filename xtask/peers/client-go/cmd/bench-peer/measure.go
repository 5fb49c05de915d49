package main

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// clockTicksPerSecond is Linux's USER_HZ, the unit of /proc/self/stat's utime and stime: fixed
// at 100 by the kernel ABI whatever the kernel's internal HZ.
const clockTicksPerSecond = 100

// statusKiB reads one "Name:   1234 kB" field of /proc/self/status.
func statusKiB(field string) (int64, error) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		value, found := strings.CutPrefix(line, field+":")
		if !found {
			continue
		}
		value = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(value), "kB"))
		return strconv.ParseInt(value, 10, 64)
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

func mustStatusKiB(field string) int64 {
	kib, err := statusKiB(field)
	if err != nil {
		fail("reading %s: %v", field, err)
	}
	return kib
}

// rssKiB is the resident set now.
func rssKiB() int64 { return mustStatusKiB("VmRSS") }

// peakRSSKiB is the resident set's high-water mark since start or the last resetPeakRSS.
func peakRSSKiB() int64 { return mustStatusKiB("VmHWM") }

// resetPeakRSS makes VmHWM start again from the current VmRSS.
func resetPeakRSS() {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		fail("resetting VmHWM through /proc/self/clear_refs: %v", err)
	}
}

// cpuMillis is the CPU time of every thread of the process so far, user and system.
func cpuMillis() int64 {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		fail("reading /proc/self/stat: %v", err)
	}
	ticks, err := parseCPUTicks(stat)
	if err != nil {
		fail("%v", err)
	}
	return ticks * 1000 / clockTicksPerSecond
}

// parseCPUTicks adds fields 14 (utime) and 15 (stime) of a /proc/PID/stat line. Field 2, the
// command name in parentheses, may itself hold spaces and parentheses, so fields are counted
// from the last ')'.
func parseCPUTicks(stat []byte) (int64, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/self/stat has no command name: %q", stat)
	}
	// After the name come field 3 (state) onwards: utime is field 14, the 12th of these.
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/self/stat is too short: %q", stat)
	}
	utime, err := strconv.ParseInt(fields[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime in /proc/self/stat: %w", err)
	}
	stime, err := strconv.ParseInt(fields[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime in /proc/self/stat: %w", err)
	}
	return utime + stime, nil
}

// settledRSSKiB is the resident set once garbage is gone: Go keeps what it has not collected
// yet, and freed spans, mapped for a while, and neither is the informer's cost.
func settledRSSKiB(settle time.Duration) int64 {
	time.Sleep(settle)
	runtime.GC()
	debug.FreeOSMemory()
	return rssKiB()
}

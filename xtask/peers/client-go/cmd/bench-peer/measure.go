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

// usage is the CPU time and page faults of every thread of the process so far.
type usage struct {
	cpuMs  int64 // utime + stime
	sysMs  int64 // stime: the part spent in the kernel
	faults int64 // minflt: page faults served without reading a file
}

// since is what was used between earlier and u.
func (u usage) since(earlier usage) usage {
	return usage{
		cpuMs:  max(u.cpuMs-earlier.cpuMs, 0),
		sysMs:  max(u.sysMs-earlier.sysMs, 0),
		faults: max(u.faults-earlier.faults, 0),
	}
}

// readUsage reads the process's usage so far from /proc/self/stat.
func readUsage() usage {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		fail("reading /proc/self/stat: %v", err)
	}
	used, err := parseUsage(stat)
	if err != nil {
		fail("%v", err)
	}
	return used
}

// parseUsage reads fields 10 (minflt), 14 (utime) and 15 (stime) of a /proc/PID/stat line.
// Field 2, the command name in parentheses, may itself hold spaces and parentheses, so fields
// are counted from the last ')'.
func parseUsage(stat []byte) (usage, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return usage{}, fmt.Errorf("/proc/self/stat has no command name: %q", stat)
	}
	// After the name come field 3 (state) onwards: field N is the (N-2)th of these.
	fields := strings.Fields(string(stat[end+1:]))
	field := func(number int, name string) (int64, error) {
		if len(fields) <= number-3 {
			return 0, fmt.Errorf("/proc/self/stat lacks %s: %q", name, stat)
		}
		value, err := strconv.ParseInt(fields[number-3], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s in /proc/self/stat: %w", name, err)
		}
		return value, nil
	}
	faults, err := field(10, "minflt")
	if err != nil {
		return usage{}, err
	}
	utime, err := field(14, "utime")
	if err != nil {
		return usage{}, err
	}
	stime, err := field(15, "stime")
	if err != nil {
		return usage{}, err
	}
	return usage{
		cpuMs:  (utime + stime) * 1000 / clockTicksPerSecond,
		sysMs:  stime * 1000 / clockTicksPerSecond,
		faults: faults,
	}, nil
}

// settledRSSKiB is the resident set once garbage is gone: Go keeps what it has not collected
// yet, and freed spans, mapped for a while, and neither is the informer's cost.
func settledRSSKiB(settle time.Duration) int64 {
	time.Sleep(settle)
	runtime.GC()
	debug.FreeOSMemory()
	return rssKiB()
}

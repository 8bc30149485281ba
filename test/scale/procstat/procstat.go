// Package procstat reads a process's CPU time and resident memory from /proc, for the scale
// test bed's comparison of readyspan with the bare informers.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ClockTicks is the unit of utime and stime in /proc/PID/stat: USER_HZ, 100 on every Linux
// architecture Go supports (the kernel exports it to user space as a constant).
const ClockTicks = 100

// Sample is one reading of a process.
type Sample struct {
	At      time.Time
	CPU     time.Duration // user + system time since the process started
	RSS     int64         // bytes resident now (VmRSS)
	PeakRSS int64         // bytes, the most resident since it started (VmHWM)
	Threads int
	// ReadBytes is what the process has read through read(2) and its kin since it started
	// (rchar in /proc/PID/io): for a watcher, its watch streams as they arrived, TLS and HTTP/2
	// framing included. 0 where /proc/PID/io cannot be read.
	ReadBytes int64
	Finished  bool // the process was gone
}

// Read samples process pid.
func Read(pid int) (Sample, error) {
	s := Sample{At: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if os.IsNotExist(err) {
			s.Finished = true
		}
		return s, fmt.Errorf("read stat of %d: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("read status of %d: %w", pid, err)
	}
	if s.CPU, err = ParseStatCPU(string(stat)); err != nil {
		return s, err
	}
	mem, err := ParseStatus(string(status))
	if err != nil {
		return s, err
	}
	s.RSS, s.PeakRSS, s.Threads = mem.RSS, mem.PeakRSS, mem.Threads
	if io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid)); err == nil {
		s.ReadBytes = ParseIORead(string(io))
	}
	return s, nil
}

// ParseIORead returns rchar from the text of /proc/PID/io (0 if it is not there).
func ParseIORead(text string) int64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, "rchar:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return 0
}

// ParseStatCPU returns utime+stime from the text of /proc/PID/stat. The command name (field 2)
// is in parentheses and may itself hold spaces and parentheses, so fields are counted from the
// last ')'.
func ParseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc stat: no command name")
	}
	// After ") " come fields 3 (state) onwards; utime is field 14, stime 15.
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("parse /proc stat: %d fields after the command name", len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc stat: utime %q stime %q", f[11], f[12])
	}
	return time.Duration(utime+stime) * time.Second / ClockTicks, nil
}

// Memory is what the scale test bed reads from /proc/PID/status.
type Memory struct {
	RSS, PeakRSS int64 // bytes
	Threads      int
}

// ParseStatus reads VmRSS, VmHWM and Threads from the text of /proc/PID/status.
func ParseStatus(status string) (Memory, error) {
	var m Memory
	var seen int
	for _, line := range strings.Split(status, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmRSS":
			m.RSS, seen = n*1024, seen|1 // the kernel prints kB
		case "VmHWM":
			m.PeakRSS, seen = n*1024, seen|2
		case "Threads":
			m.Threads = int(n)
		}
	}
	if seen != 3 {
		return m, fmt.Errorf("parse /proc status: no VmRSS or VmHWM")
	}
	return m, nil
}

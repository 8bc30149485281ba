package procstat

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr bool
	}{
		{
			name: "plain name",
			stat: "4242 (readyspan) S 1 4242 4242 0 -1 4194560 9140 0 0 0 250 73 0 0 20 0 9 0 1234 1500000000 7000 18446744073709551615",
			want: 3230 * time.Millisecond,
		},
		{
			name: "name with spaces and parentheses",
			stat: "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5 100 10 0",
			want: 30 * time.Millisecond,
		},
		{name: "truncated", stat: "7 (x) R 1 2", wantErr: true},
		{name: "no name", stat: "garbage", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStatCPU(tt.stat)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("cpu = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	status := "Name:\treadyspan\nVmHWM:\t  120000 kB\nVmRSS:\t   98304 kB\nThreads:\t11\n"
	m, err := ParseStatus(status)
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS != 98304*1024 || m.PeakRSS != 120000*1024 || m.Threads != 11 {
		t.Errorf("got %+v", m)
	}
	if _, err := ParseStatus("Name:\tkthreadd\nThreads:\t1\n"); err == nil {
		t.Error("a kernel thread's status (no VmRSS) parsed without error")
	}
}

func TestReadSelf(t *testing.T) {
	s, err := Read(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err) // not Linux
	}
	if s.RSS <= 0 || s.PeakRSS < s.RSS || s.Threads < 1 {
		t.Errorf("implausible sample of this test: %+v", s)
	}
}

func TestParseIORead(t *testing.T) {
	const io = "rchar: 123456789\nwchar: 42\nsyscr: 10\nsyscw: 3\nread_bytes: 0\nwrite_bytes: 0\ncancelled_write_bytes: 0\n"
	if got := ParseIORead(io); got != 123456789 {
		t.Errorf("rchar %d, want 123456789", got)
	}
	if got := ParseIORead("wchar: 1\n"); got != 0 {
		t.Errorf("without rchar: %d, want 0", got)
	}
	// This process's own: something was read to start it.
	s, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.ReadBytes <= 0 {
		t.Errorf("ReadBytes of this process %d, want > 0", s.ReadBytes)
	}
}

// Command otlpattack runs every attack of package otlpattack against an OTLP input, one after
// another, and prints what each cost the target: its peak RSS (VmHWM, reset before each attack
// through /proc/PID/clear_refs), the answers it gave, and after each flood the bytes its input
// counts against the heap it has (readyspan_otlp_held_bytes, go_memstats_heap_alloc_bytes).
//
//	go run ./test/scale/otlpattack -url http://127.0.0.1:4321 -pid $(pidof readyspan) -metrics http://127.0.0.1:8080/metrics
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/readyspan/readyspan/test/otlpattack"
)

func main() {
	target := otlpattack.Target{}
	flag.StringVar(&target.URL, "url", "http://127.0.0.1:4321", "the OTLP/HTTP input's base URL")
	flag.StringVar(&target.Token, "token", "", "bearer token to send")
	skip := flag.Bool("insecure-skip-verify", false, "do not verify an https target's certificate")
	pid := flag.Int("pid", 0, "the target's process ID, for its peak RSS (VmHWM)")
	metrics := flag.String("metrics", "", "the target's /metrics URL, for the held bytes and the heap")
	flag.Parse()
	if *skip {
		target.TLS = &tls.Config{InsecureSkipVerify: true} // #nosec G402 -- a test target's self-signed certificate
	}
	ctx := context.Background()
	fmt.Printf("%-40s %10s %10s %10s  %s\n", "attack", "peak RSS", "held", "heap", "answers")
	run := func(name string, f func() string) {
		resetPeak(*pid)
		start := time.Now()
		answers := f()
		time.Sleep(2 * time.Second) // a GC cycle and a scrape later
		held, heap := scrape(*metrics)
		fmt.Printf("%-40s %7d MiB %7d MiB %7d MiB  %s (%s)\n", name, peakRSS(*pid)>>20, int64(held)>>20, int64(heap)>>20, answers, time.Since(start).Round(time.Second))
	}
	run("baseline", func() string { return "" })
	run("gzip bombs 400, 50 at a time", func() string { return target.GzipBombs(ctx, 400, 50).String() })
	run("stalled: 30 x 15 MiB, 100 slow headers", func() string {
		open, closeAll, err := target.Stall(30, 16<<20, 100, 5*time.Second)
		if err != nil {
			return err.Error()
		}
		defer closeAll()
		time.Sleep(10 * time.Second)
		at10 := open()
		time.Sleep(35 * time.Second)
		return fmt.Sprintf("open after 10 s: %d, after 45 s: %d of 130", at10, open())
	})
	run("4,000,000 unrelated roots", func() string {
		return target.Flood(ctx, 4_000_000, 2000, 4, "kube-apiserver", otlpattack.UnrelatedRoots).String()
	})
	run("unique 128-byte keys, 48-byte values", func() string {
		return target.Flood(ctx, 200_000, 200, 4, "kubelet", otlpattack.UniqueKeys).String()
	})
	run("one trace naming a Pod per span (400k)", func() string {
		return target.Flood(ctx, 400_000, 100_000, 1, "kubelet", otlpattack.PodInEverySpan).String()
	})
}

func resetPeak(pid int) {
	if pid > 0 {
		_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
	}
}

func peakRSS(pid int) int64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func scrape(u string) (held, heap float64) {
	if u == "" {
		return 0, 0
	}
	resp, err := http.Get(u)
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "readyspan_otlp_held_bytes":
			held = v
		case "go_memstats_heap_alloc_bytes":
			heap = v
		}
	}
	return held, heap
}

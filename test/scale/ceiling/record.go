package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/readyspan/readyspan/test/scale/fakeapi"
	"github.com/readyspan/readyspan/watch"
)

// record writes a recording of a cluster in readyspan's format (watch.<stream>.jsonl), but of
// whole objects as the apiserver sends them: `readyspan record` keeps what its Transform keeps,
// and a replay of slimmed objects would cost the watchers less to decode than the real stream.
// Each stream is a cluster-wide JSON watch; it ends when ctx does.
func record(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of a user who may watch everything")
	dir := fs.String("out", "", "directory to write the recording into")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("record needs --out")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", *kubeconfig, err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("make http client: %w", err)
	}
	hc.Timeout = 0
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", *dir, err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(fakeapi.Recorded))
	for _, r := range fakeapi.Recorded {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := recordStream(ctx, hc, cfg.Host, r, *dir); err != nil && ctx.Err() == nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return errors.Join(func() []error {
		var all []error
		for e := range errs {
			all = append(all, e)
		}
		return all
	}()...)
}

func recordStream(ctx context.Context, hc *http.Client, host string, r fakeapi.Resource, dir string) error {
	f, err := os.Create(filepath.Join(dir, "watch."+string(r.Stream)+".jsonl"))
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	defer w.Flush()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+r.Path("")+"?watch=1", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("watch %s: %w", r.Stream, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("watch %s: %s: %s", r.Stream, resp.Status, b)
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type   watch.DeltaType `json:"type"`
			Object json.RawMessage `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("read watch %s: %w", r.Stream, err)
		}
		recv := time.Now().UTC()
		line, _ := json.Marshal(watch.Line{Type: ev.Type, Object: ev.Object, Recv: &recv})
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
	}
}

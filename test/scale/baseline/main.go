// Command baseline is the scale test bed's floor: the informers readyspan runs (the resources of
// watch.NewWatcher, in the same namespaces), with no transform, no handlers' work and no
// export. What it costs is what watching costs; readyspan's CPU and memory are reported as a
// ratio to it. It reads in either encoding (--encoding, as readyspan's --watch-encoding), so
// that each encoding of readyspan has its own floor.
//
//	baseline --kubeconfig .local/scale/baseline.kubeconfig --ready-addr 127.0.0.1:8081 --encoding protobuf
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/readyspan/readyspan/watch"
)

// watched are the resources of watch.NewWatcher, and those of the workload controllers
// readyspan follows besides Deployments (StatefulSets, DaemonSets, their ControllerRevisions).
var watched = []schema.GroupVersionResource{
	corev1.SchemeGroupVersion.WithResource("pods"),
	appsv1.SchemeGroupVersion.WithResource("replicasets"),
	appsv1.SchemeGroupVersion.WithResource("deployments"),
	corev1.SchemeGroupVersion.WithResource("events"),
	discoveryv1.SchemeGroupVersion.WithResource("endpointslices"),
	corev1.SchemeGroupVersion.WithResource("services"),
	appsv1.SchemeGroupVersion.WithResource("statefulsets"),
	appsv1.SchemeGroupVersion.WithResource("daemonsets"),
	appsv1.SchemeGroupVersion.WithResource("controllerrevisions"),
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "baseline:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) (err error) {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the user the baseline watches as")
	namespaces := flag.String("namespaces", "", "comma-separated namespaces (default: all, as readyspan run)")
	readyAddr := flag.String("ready-addr", "127.0.0.1:8081", "serves /readyz once every cache has synced")
	encoding := flag.String("encoding", string(watch.DefaultEncoding), "encoding of the lists and watches, as readyspan's --watch-encoding: protobuf (JSON accepted) or json")
	asJSON := flag.Bool("json", false, "the same as --encoding json")
	flag.Parse()
	enc, err := watch.ParseEncoding(*encoding)
	if err != nil {
		return fmt.Errorf("--encoding: %w", err)
	}
	if *asJSON {
		enc = watch.EncodingJSON
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", *kubeconfig, err)
	}
	cfg.UserAgent = "readyspan-scale-baseline"
	cfg.QPS, cfg.Burst = 50, 100 // as readyspan run
	// The media types as readyspan asks for them: one place says what each encoding is.
	client, err := kubernetes.NewForConfig(enc.RESTConfig(cfg))
	if err != nil {
		return fmt.Errorf("make client: %w", err)
	}
	nss := []string{metav1.NamespaceAll}
	if *namespaces != "" {
		nss = strings.Split(*namespaces, ",")
	}
	var events atomic.Int64
	count := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { events.Add(1) },
		UpdateFunc: func(any, any) { events.Add(1) },
		DeleteFunc: func(any) { events.Add(1) },
	}
	var synced []cache.InformerSynced
	for _, ns := range nss {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
		for _, gvr := range watched {
			inf, err := f.ForResource(gvr)
			if err != nil {
				return fmt.Errorf("informer for %s: %w", gvr.Resource, err)
			}
			if _, err := inf.Informer().AddEventHandler(count); err != nil {
				return fmt.Errorf("handler for %s: %w", gvr.Resource, err)
			}
			synced = append(synced, inf.Informer().HasSynced)
		}
		f.Start(ctx.Done())
		defer f.Shutdown()
	}
	var ready atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "ok %d events\n", events.Load())
	})
	srv := &http.Server{Addr: *readyAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.ListenAndServe() }()
	defer srv.Close()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("caches did not sync: %w", ctx.Err())
	}
	ready.Store(true)
	<-ctx.Done()
	return nil
}

// Package load is the scale test bed's load driver: it creates Deployments (with a Service each)
// scheduled onto KWOK's fake nodes and rolls them, at a given rate of Pod startups, bounded in
// count and time, and records on its own watch when each Pod turned Ready and when its address
// turned ready in an EndpointSlice: the truth readyspan's export lag is measured against.
package load

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/readyspan/readyspan/test/scale/report"
)

// Labels and annotations the driver and the KWOK stages (deploy/local/config/kwok) agree on.
const (
	DriverLabel     = "scale.readyspan.dev/driver" // on every object the driver makes
	ImageAnnotation = "scale.readyspan.dev/image"  // cold: the stages simulate a pull
	NodeAnnotation  = "kwok.x-k8s.io/node"         // kwok manages nodes with this set to fake
	NodeLabel       = "type"                       // = kwok on the fake nodes
)

// Config is one run's load.
type Config struct {
	Namespaces []string      // Deployments are spread over these
	Pods       int           // Pods existing at the end: Deployments × Replicas
	Replicas   int           // per Deployment
	Rolls      int           // rollouts of each Deployment after its creation (new image: cold pulls)
	Rate       float64       // Pod startups per second
	Deadline   time.Duration // the whole run, creations and waiting for Ready
}

// Result is what the driver saw.
type Result struct {
	Start, End time.Time // first create, last Ready (or the deadline)
	Expected   int       // Pod startups asked for
	Pods       []report.PodTimes
	Actions    int // creates and rolls made
	Skipped    int // turns at which every Deployment was still rolling out
	Failed     int // creates and rolls that failed after their retries (an overloaded apiserver)
	Complete   bool
}

// Driver runs the load.
type Driver struct {
	client kubernetes.Interface
	cfg    Config

	mu          sync.Mutex
	pods        map[types.UID]*report.PodTimes
	serving     map[types.UID]time.Time // an address ready before its Pod was seen Ready
	deployments map[string]*appsv1.Deployment
	lastReady   time.Time
}

// New returns a Driver; Run applies the load.
func New(client kubernetes.Interface, cfg Config) *Driver {
	if cfg.Replicas <= 0 {
		cfg.Replicas = 10
	}
	return &Driver{client: client, cfg: cfg, pods: map[types.UID]*report.PodTimes{}, serving: map[types.UID]time.Time{}, deployments: map[string]*appsv1.Deployment{}}
}

// Run creates the namespaces, watches, then creates and rolls the Deployments at the configured
// rate, and returns once every started Pod was seen Ready or the deadline passed.
func (d *Driver) Run(ctx context.Context) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Deadline)
	defer cancel()
	for _, ns := range d.cfg.Namespaces {
		_, err := d.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{DriverLabel: "1"}}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return Result{}, fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	if err := d.watch(ctx); err != nil {
		return Result{}, err
	}

	deployments := int(math.Ceil(float64(d.cfg.Pods) / float64(d.cfg.Replicas)))
	res := Result{Expected: deployments * d.cfg.Replicas * (1 + d.cfg.Rolls)}
	interval := time.Duration(float64(d.cfg.Replicas) / d.cfg.Rate * float64(time.Second))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	res.Start = time.Now()
	// Each turn starts Replicas Pods: first every Deployment is created, then each is rolled in
	// turn, Rolls times; a Deployment still rolling out is passed over for the next.
	var errs []error
	var wg sync.WaitGroup
	created, rolls := 0, make([]int, deployments)
	rollsLeft := deployments * d.cfg.Rolls
	for turn := 0; created < deployments || rollsLeft > 0; turn++ {
		if turn > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return d.result(res, ctx.Err())
			case <-tick.C:
			}
		}
		var action func(context.Context) error
		if created < deployments {
			i := created
			created++
			action = func(ctx context.Context) error { return d.create(ctx, i) }
		} else {
			i := d.nextToRoll(deployments, rolls)
			if i < 0 {
				res.Skipped++
				continue
			}
			rolls[i]++
			rollsLeft--
			n := rolls[i]
			action = func(ctx context.Context) error { return d.roll(ctx, i, n) }
		}
		res.Actions++
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := retry(ctx, action); err != nil {
				d.mu.Lock()
				errs = append(errs, err)
				d.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var err error
	if len(errs) > 0 {
		// Each failed create or roll started no Pods: wait for the others.
		res.Failed = len(errs)
		res.Expected -= len(errs) * d.cfg.Replicas
		err = fmt.Errorf("%d of %d creates and rolls failed, first: %w", len(errs), res.Actions, errs[0])
	}
	// Wait for every started Pod to be Ready.
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		if d.readyCount() >= res.Expected {
			res.Complete = err == nil
			d.awaitServing(ctx, servingWait)
			return d.result(res, err)
		}
		select {
		case <-ctx.Done():
			return d.result(res, err)
		case <-poll.C:
		}
	}
}

// servingWait bounds how long the driver waits, after the last Pod turned Ready, for the last
// addresses to turn ready in their Services' EndpointSlices (the EndpointSlice controller lags
// the Pods by up to a second or two on a loaded cluster). Without it the last Pods had no
// serving time, and the lag from serving took their lag from Ready instead.
const servingWait = 15 * time.Second

// awaitServing waits until every Pod seen Ready was seen serving too (every Deployment of the
// driver has a Service), for at most wait.
func (d *Driver) awaitServing(ctx context.Context, wait time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for !d.allServing() {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		}
	}
}

func (d *Driver) allServing() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.pods {
		if !p.Ready.IsZero() && p.Serving.IsZero() {
			return false
		}
	}
	return true
}

// retry makes up to three attempts at an action, a second apart: on an overloaded cluster a
// create can time out in the apiserver and succeed on a later try (creates are idempotent here).
func retry(ctx context.Context, action func(context.Context) error) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = action(ctx); err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
	return err
}

func (d *Driver) result(res Result, err error) (Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	res.End = d.lastReady
	for _, p := range d.pods {
		if !p.Ready.IsZero() {
			res.Pods = append(res.Pods, *p)
		}
	}
	return res, err
}

func (d *Driver) readyCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, p := range d.pods {
		if !p.Ready.IsZero() {
			n++
		}
	}
	return n
}

// nextToRoll picks, among the Deployments rolled fewest times and not rolled Rolls times yet,
// the first whose last rollout is complete; -1 if none is.
func (d *Driver) nextToRoll(deployments int, rolls []int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	best := -1
	for i := 0; i < deployments; i++ {
		if rolls[i] >= d.cfg.Rolls || (best >= 0 && rolls[i] >= rolls[best]) {
			continue
		}
		dep := d.deployments[d.name(i)]
		if dep == nil || !rolledOut(dep) {
			continue
		}
		best = i
	}
	return best
}

func rolledOut(dep *appsv1.Deployment) bool {
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	s := dep.Status
	return s.ObservedGeneration >= dep.Generation && s.UpdatedReplicas == want && s.ReadyReplicas == want && s.Replicas == want
}

func (d *Driver) name(i int) string { return fmt.Sprintf("scale-%04d", i) }

func (d *Driver) namespace(i int) string { return d.cfg.Namespaces[i%len(d.cfg.Namespaces)] }

// image is the image of a Deployment's nth template (0: the first).
func image(n int) string { return fmt.Sprintf("registry.scale.invalid/app:v%d", n+1) }

func (d *Driver) create(ctx context.Context, i int) error {
	name, ns := d.name(i), d.namespace(i)
	labels := map[string]string{"app": name, DriverLabel: "1"}
	replicas := int32(d.cfg.Replicas)
	surge, unavailable := intstr.FromString("100%"), intstr.FromInt32(0)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}},
			Template: corev1.PodTemplateSpec{
				// The first Pods find their image on the node (warm); rollouts pull a new one.
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{ImageAnnotation: "warm"}},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{NodeLabel: "kwok"},
					Tolerations:  []corev1.Toleration{{Key: NodeAnnotation, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					Containers: []corev1.Container{{
						Name: "app", Image: image(0),
						Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
						}},
					}},
				},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if _, err := d.client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service %s/%s: %w", ns, name, err)
	}
	if _, err := d.client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create deployment %s/%s: %w", ns, name, err)
	}
	return nil
}

// roll starts a Deployment's nth rollout: a new image, not on the nodes yet.
func (d *Driver) roll(ctx context.Context, i, n int) error {
	name, ns := d.name(i), d.namespace(i)
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:"cold"}},"spec":{"containers":[{"name":"app","image":%q}]}}}}`, ImageAnnotation, image(n))
	if _, err := d.client.AppsV1().Deployments(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("roll deployment %s/%s: %w", ns, name, err)
	}
	return nil
}

// watch starts the driver's own informers: Pods, EndpointSlices and Deployments in its
// namespaces; it returns once they have synced.
func (d *Driver) watch(ctx context.Context) error {
	var synced []cache.InformerSynced
	for _, ns := range d.cfg.Namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(d.client, 0, informers.WithNamespace(ns))
		pods := f.Core().V1().Pods().Informer()
		_, _ = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { d.pod(obj) },
			UpdateFunc: func(_, obj any) { d.pod(obj) },
		})
		slices := f.Discovery().V1().EndpointSlices().Informer()
		_, _ = slices.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { d.slice(obj) },
			UpdateFunc: func(_, obj any) { d.slice(obj) },
		})
		deps := f.Apps().V1().Deployments().Informer()
		_, _ = deps.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { d.deployment(obj) },
			UpdateFunc: func(_, obj any) { d.deployment(obj) },
		})
		synced = append(synced, pods.HasSynced, slices.HasSynced, deps.HasSynced)
		f.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("driver caches did not sync: %w", ctx.Err())
	}
	return nil
}

func (d *Driver) pod(obj any) {
	now := time.Now()
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Labels[DriverLabel] != "1" || !ready(p) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, seen := d.pods[p.UID]; seen {
		return
	}
	d.pods[p.UID] = &report.PodTimes{UID: string(p.UID), Ready: now, Serving: d.serving[p.UID]}
	delete(d.serving, p.UID)
	d.lastReady = now
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (d *Driver) slice(obj any) {
	now := time.Now()
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range s.Endpoints {
		if e.TargetRef == nil || e.Conditions.Ready == nil || !*e.Conditions.Ready {
			continue
		}
		uid := e.TargetRef.UID
		if p := d.pods[uid]; p != nil {
			if p.Serving.IsZero() {
				p.Serving = now
			}
		} else if _, seen := d.serving[uid]; !seen {
			d.serving[uid] = now
		}
	}
}

func (d *Driver) deployment(obj any) {
	dep, ok := obj.(*appsv1.Deployment)
	if !ok {
		return
	}
	d.mu.Lock()
	d.deployments[dep.Name] = dep
	d.mu.Unlock()
}

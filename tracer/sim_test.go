package tracer

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/readyspan/readyspan/watch"
)

// sim builds the stream of watch events a v1.37 control plane produces, with objects filled in
// the way the real components fill them (compare testdata/real-node): kubelet events through
// the core/v1 recorder (name suffix, whole-second timestamps, source and reporting fields), the
// scheduler's through events.k8s.io (eventTime in µs, action, no source), conditions and
// container statuses with whole-second times stamped by the kubelet.
type sim struct {
	t      testing.TB
	t0     time.Time
	ns     string
	node   string
	rv     int
	uidN   int
	deltas []watch.Delta
	pods   map[string]*corev1.Pod
	events map[string]*corev1.Event
	// kubeletSkew is added to every time the kubelet stamps (its clock runs ahead).
	kubeletSkew time.Duration
	// watchLag is the delay between a write and readyspan receiving it.
	watchLag time.Duration
}

// simT0 is when every simulated stream starts; simAt(ms) is a time in it, so checks can state
// the exact times the stream stamped.
var simT0 = time.Date(2026, 11, 30, 8, 41, 33, 700_000_000, time.UTC)

func simAt(ms int) time.Time { return simT0.Add(time.Duration(ms) * time.Millisecond) }

func newSim(t testing.TB, ns string) *sim {
	return &sim{
		t: t, ns: ns, node: "nodetest",
		t0:       simT0,
		rv:       400,
		pods:     map[string]*corev1.Pod{},
		events:   map[string]*corev1.Event{},
		watchLag: 3 * time.Millisecond,
	}
}

func (s *sim) at(ms int) time.Time { return s.t0.Add(time.Duration(ms) * time.Millisecond) }

func secs(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }

func (s *sim) nextRV() string { s.rv++; return strconv.Itoa(s.rv) }

func (s *sim) uid(kind string) types.UID {
	s.uidN++
	return types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012d", len(kind)*1000+s.uidN, s.uidN))
}

func (s *sim) emit(r watch.Resource, typ watch.DeltaType, obj runtime.Object, at time.Time) {
	s.deltas = append(s.deltas, watch.Delta{Resource: r, Type: typ, Object: obj, Recv: at.Add(s.watchLag)})
}

// deployment is created by kubectl apply at ms.
func (s *sim) deployment(name string, replicas int32, ms int) *appsv1.Deployment {
	t := s.at(ms)
	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.ns, UID: s.uid("deployment"), ResourceVersion: s.nextRV(), Generation: 1,
			CreationTimestamp: secs(t),
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: "Update", APIVersion: "apps/v1", Time: ptr.To(secs(t))}},
		},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
	}
	s.emit(ResourceDeployments, watch.Added, d, t)
	return d
}

// replicaSet is created by the deployment controller at ms, followed by its ScalingReplicaSet event.
func (s *sim) replicaSet(d *appsv1.Deployment, hash string, ms int) *appsv1.ReplicaSet {
	t := s.at(ms)
	rs := &appsv1.ReplicaSet{
		TypeMeta: metav1.TypeMeta{Kind: "ReplicaSet", APIVersion: "apps/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: d.Name + "-" + hash, Namespace: s.ns, UID: s.uid("replicaset"), ResourceVersion: s.nextRV(), Generation: 1,
			CreationTimestamp: secs(t),
			Labels:            map[string]string{"app": d.Name, "pod-template-hash": hash},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: "Update", APIVersion: "apps/v1", Time: ptr.To(secs(t))}},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: d.Spec.Replicas},
	}
	s.emit(ResourceReplicaSets, watch.Added, rs, t)
	s.coreEvent(&corev1.ObjectReference{Kind: "Deployment", Namespace: s.ns, Name: d.Name, UID: d.UID, APIVersion: "apps/v1", ResourceVersion: d.ResourceVersion},
		"deployment-controller", "", corev1.EventTypeNormal, "ScalingReplicaSet",
		fmt.Sprintf("Scaled up replica set %s from 0 to %d", rs.Name, *d.Spec.Replicas), ms+1)
	return rs
}

func (s *sim) service(name string, selector map[string]string, ms int) {
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns, UID: s.uid("service"), ResourceVersion: s.nextRV(), CreationTimestamp: secs(s.at(ms))},
		Spec:       corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}
	s.emit(ResourceServices, watch.Added, svc, s.at(ms))
}

// container describes one container of a simulated Pod.
type container struct {
	name      string
	image     string
	readiness bool
	startup   bool
	postStart bool
	sidecar   bool
}

// pod is created at ms: by the ReplicaSet (rs != nil, with its SuccessfulCreate event) or by a
// client directly.
func (s *sim) pod(name string, rs *appsv1.ReplicaSet, inits, ctrs []container, ms int) *corev1.Pod {
	t := s.at(ms)
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.ns, UID: s.uid("pod"), ResourceVersion: s.nextRV(), Generation: 1,
			CreationTimestamp: secs(t),
			Labels:            map[string]string{"app": "web"},
		},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, SchedulerName: "default-scheduler",
			Volumes: []corev1.Volume{{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort},
	}
	manager := "kubectl-create"
	if rs != nil {
		manager = "kube-controller-manager"
		p.GenerateName = rs.Name + "-"
		p.Labels = map[string]string{"app": rs.Labels["app"], "pod-template-hash": rs.Labels["pod-template-hash"]}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	}
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: manager, Operation: "Update", APIVersion: "v1", Time: ptr.To(secs(t))}}
	for _, c := range inits {
		ct := corev1.Container{Name: c.name, Image: c.image, Command: []string{"sh", "-c", "true"}, Env: []corev1.EnvVar{{Name: "SECRET", Value: "hunter2"}}}
		if c.sidecar {
			ct.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, ct)
	}
	for _, c := range ctrs {
		ct := corev1.Container{Name: c.name, Image: c.image, Args: []string{"--token=hunter2"}, Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}
		if c.readiness {
			ct.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, InitialDelaySeconds: 1, PeriodSeconds: 2, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
		}
		if c.startup {
			ct.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 1, FailureThreshold: 30}
		}
		if c.postStart {
			ct.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "1"}}}}
		}
		p.Spec.Containers = append(p.Spec.Containers, ct)
	}
	s.pods[name] = p
	s.emit(ResourcePods, watch.Added, p.DeepCopy(), t)
	if rs != nil {
		s.coreEvent(&corev1.ObjectReference{Kind: "ReplicaSet", Namespace: s.ns, Name: rs.Name, UID: rs.UID, APIVersion: "apps/v1", ResourceVersion: rs.ResourceVersion},
			"replicaset-controller", "", corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: "+name, ms+1)
	}
	return p
}

// update applies a status change written at ms (by the kubelet unless noted) and emits it.
func (s *sim) update(name string, ms int, change func(p *corev1.Pod, now metav1.Time)) {
	p := s.pods[name]
	change(p, secs(s.at(ms).Add(s.kubeletSkew)))
	p.ResourceVersion = s.nextRV()
	s.emit(ResourcePods, watch.Modified, p.DeepCopy(), s.at(ms))
}

func (s *sim) delete(name string, ms int) {
	p := s.pods[name]
	p.ResourceVersion = s.nextRV()
	s.emit(ResourcePods, watch.Deleted, p.DeepCopy(), s.at(ms))
}

func setCond(p *corev1.Pod, t corev1.PodConditionType, st corev1.ConditionStatus, now metav1.Time, reason, msg string) {
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == t {
			if c.Status != st {
				c.LastTransitionTime = now
			}
			c.Status, c.Reason, c.Message = st, reason, msg
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: st, LastTransitionTime: now, Reason: reason, Message: msg, ObservedGeneration: 1})
}

// bind is the scheduler's bind at ms: the apiserver sets nodeName and PodScheduled (its clock),
// then the scheduler records Scheduled (µs eventTime, after the bind returned).
func (s *sim) bind(name string, ms int) {
	p := s.pods[name]
	p.Spec.NodeName = s.node
	setCond(p, corev1.PodScheduled, corev1.ConditionTrue, secs(s.at(ms)), "", "")
	p.ResourceVersion = s.nextRV()
	s.emit(ResourcePods, watch.Modified, p.DeepCopy(), s.at(ms))
	s.schedulerEvent(name, "Scheduled", "Binding", corev1.EventTypeNormal, fmt.Sprintf("Successfully assigned %s/%s to %s", s.ns, name, s.node), ms+1)
}

func (s *sim) podRef(name, fieldPath string) *corev1.ObjectReference {
	p := s.pods[name]
	return &corev1.ObjectReference{Kind: "Pod", Namespace: s.ns, Name: name, UID: p.UID, APIVersion: "v1", ResourceVersion: p.ResourceVersion, FieldPath: fieldPath}
}

// coreEvent is an event written through client-go's record package (core/v1).
func (s *sim) coreEvent(ref *corev1.ObjectReference, component, host, typ, reason, msg string, ms int) *corev1.Event {
	t := s.at(ms)
	if component == "kubelet" {
		t = t.Add(s.kubeletSkew)
	}
	e := &corev1.Event{
		TypeMeta:            metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", ref.Name, t.UnixNano()), Namespace: s.ns, UID: s.uid("event"), ResourceVersion: s.nextRV(), CreationTimestamp: secs(s.at(ms))},
		InvolvedObject:      *ref,
		Reason:              reason,
		Message:             msg,
		Source:              corev1.EventSource{Component: component, Host: host},
		FirstTimestamp:      secs(t),
		LastTimestamp:       secs(t),
		Count:               1,
		Type:                typ,
		ReportingController: component,
		ReportingInstance:   host,
	}
	s.events[ref.Name+"/"+ref.FieldPath+"/"+reason+"/"+msg] = e
	s.emit(ResourceEvents, watch.Added, e.DeepCopy(), s.at(ms))
	return e
}

// kubeletEvent is a kubelet event about a container (fieldPath) or the Pod (container "").
// A repeat of the same message is a count/lastTimestamp PATCH of the first event, as the
// recorder's dedup does.
func (s *sim) kubeletEvent(name, ctr string, init bool, typ, reason, msg string, ms int) {
	fp := ""
	if ctr != "" {
		fp = "spec.containers{" + ctr + "}"
		if init {
			fp = "spec.initContainers{" + ctr + "}"
		}
	}
	if prev := s.events[name+"/"+fp+"/"+reason+"/"+msg]; prev != nil {
		prev.Count++
		prev.LastTimestamp = secs(s.at(ms).Add(s.kubeletSkew))
		prev.ResourceVersion = s.nextRV()
		s.emit(ResourceEvents, watch.Modified, prev.DeepCopy(), s.at(ms))
		return
	}
	s.coreEvent(s.podRef(name, fp), "kubelet", s.node, typ, reason, msg, ms)
}

// schedulerEvent is written through events.k8s.io/v1 and read back through core/v1, as the
// informer sees it: eventTime in µs, no first/last timestamps, empty source. A repeat sets
// series, as the events.k8s.io recorder does for the second occurrence.
func (s *sim) schedulerEvent(name, reason, action, typ, note string, ms int) {
	key := name + "//" + reason
	if prev := s.events[key]; prev != nil {
		if prev.Series == nil {
			prev.Series = &corev1.EventSeries{Count: 1}
		}
		prev.Series.Count++
		prev.Series.LastObservedTime = metav1.NewMicroTime(s.at(ms).Truncate(time.Microsecond))
		prev.ResourceVersion = s.nextRV()
		s.emit(ResourceEvents, watch.Modified, prev.DeepCopy(), s.at(ms))
		return
	}
	t := s.at(ms)
	e := &corev1.Event{
		TypeMeta:            metav1.TypeMeta{Kind: "Event", APIVersion: "v1"},
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", name, t.UnixNano()+7000), Namespace: s.ns, UID: s.uid("event"), ResourceVersion: s.nextRV(), CreationTimestamp: secs(t)},
		InvolvedObject:      *s.podRef(name, ""),
		Reason:              reason,
		Message:             note,
		Type:                typ,
		EventTime:           metav1.NewMicroTime(t.Truncate(time.Microsecond)),
		Action:              action,
		ReportingController: "default-scheduler",
		ReportingInstance:   "default-scheduler-vm",
	}
	s.events[key] = e
	s.emit(ResourceEvents, watch.Added, e.DeepCopy(), t)
}

// endpoints writes the Service's EndpointSlice with the given Pods, ready or not, at ms.
func (s *sim) endpoints(svc string, ready map[string]bool, ms int) {
	sl := &discoveryv1.EndpointSlice{
		TypeMeta:    metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"},
		ObjectMeta:  metav1.ObjectMeta{Name: svc + "-abcde", Namespace: s.ns, UID: "slice-" + types.UID(svc), ResourceVersion: s.nextRV(), Labels: map[string]string{"kubernetes.io/service-name": svc}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: "Update", Time: ptr.To(secs(s.at(ms)))}}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for name, r := range ready {
		p := s.pods[name]
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{p.Status.PodIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r), Serving: ptr.To(r), Terminating: ptr.To(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: s.ns, Name: name, UID: p.UID},
			NodeName:   ptr.To(s.node),
		})
	}
	s.emit(ResourceEndpointSlices, watch.Modified, sl, s.at(ms))
}

func containerStatus(p *corev1.Pod, name string, init bool) *corev1.ContainerStatus {
	list := &p.Status.ContainerStatuses
	if init {
		list = &p.Status.InitContainerStatuses
	}
	for i := range *list {
		if (*list)[i].Name == name {
			return &(*list)[i]
		}
	}
	*list = append(*list, corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}})
	return &(*list)[len(*list)-1]
}

// kubeletStart is the kubelet's first status (startTime, conditions False) at ms and the
// sandbox ready at sandboxMs (PodReadyToStartContainers=True, the Pod's IP).
func (s *sim) kubeletStart(name string, ms, sandboxMs int) {
	s.update(name, ms, func(p *corev1.Pod, now metav1.Time) {
		p.Status.StartTime = ptr.To(now)
		p.Status.HostIP = "192.0.2.2"
		setCond(p, corev1.PodReadyToStartContainers, corev1.ConditionFalse, now, "", "")
		init := corev1.ConditionTrue
		if len(p.Spec.InitContainers) > 0 {
			init = corev1.ConditionFalse
		}
		setCond(p, corev1.PodInitialized, init, now, "", "")
		setCond(p, corev1.PodReady, corev1.ConditionFalse, now, "ContainersNotReady", "containers with unready status: [web]")
		setCond(p, corev1.ContainersReady, corev1.ConditionFalse, now, "ContainersNotReady", "containers with unready status: [web]")
		for _, c := range p.Spec.InitContainers {
			containerStatus(p, c.Name, true)
		}
		for _, c := range p.Spec.Containers {
			containerStatus(p, c.Name, false)
		}
	})
	s.update(name, sandboxMs, func(p *corev1.Pod, now metav1.Time) {
		setCond(p, corev1.PodReadyToStartContainers, corev1.ConditionTrue, now, "", "")
		p.Status.PodIP = "10.88.77.7"
		p.Status.PodIPs = []corev1.PodIP{{IP: "10.88.77.7"}}
	})
}

// run pulls (cold: Pulling then Pulled after pullMs; warm: "already present"), creates and
// starts a container beginning at ms, and returns when it started.
func (s *sim) run(name, ctr string, init bool, cold bool, pullMs, ms int) int {
	p := s.pods[name]
	image := ""
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name == ctr {
			image = c.Image
		}
	}
	t := ms
	if cold {
		s.kubeletEvent(name, ctr, init, corev1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", image), t)
		t += pullMs
		d := time.Duration(pullMs) * time.Millisecond
		s.kubeletEvent(name, ctr, init, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q in %v (%v including waiting). Image size: 34704198 bytes.", image, d-time.Millisecond, d), t)
	} else {
		t += 2
		s.kubeletEvent(name, ctr, init, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine and can be accessed by the pod", image), t)
	}
	t += 40
	s.kubeletEvent(name, ctr, init, corev1.EventTypeNormal, "Created", "Container created", t)
	t += 120
	s.kubeletEvent(name, ctr, init, corev1.EventTypeNormal, "Started", "Container started", t)
	return t
}

// running reports the container running (PLEG relist, ~1 s later) at ms, started at startedMs.
func (s *sim) running(name, ctr string, init bool, startedMs, ms int, ready bool) {
	s.update(name, ms, func(p *corev1.Pod, now metav1.Time) {
		cs := containerStatus(p, ctr, init)
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: secs(s.at(startedMs).Add(s.kubeletSkew))}}
		cs.Started = ptr.To(true)
		cs.Ready = ready
		cs.Image, cs.ImageID = "127.0.0.1:5000/test/busybox:1.35", "127.0.0.1:5000/test/busybox@sha256:aa01"
		cs.ContainerID = "containerd://b0a06fe2"
		if !init {
			p.Status.Phase = corev1.PodRunning
		}
	})
}

// ready marks containers ready and the Pod Ready at ms.
func (s *sim) ready(name string, ms int) {
	s.update(name, ms, func(p *corev1.Pod, now metav1.Time) {
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].Ready = true
		}
		setCond(p, corev1.ContainersReady, corev1.ConditionTrue, now, "", "")
		setCond(p, corev1.PodReady, corev1.ConditionTrue, now, "", "")
	})
}

// auditWrite is the kube-apiserver's audit event for a client's write of a Deployment or a
// named Pod: received at receivedMs, answered at doneMs.
func (s *sim) auditWrite(resource, group, name, verb, userAgent string, receivedMs, doneMs int) {
	line := fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Request","auditID":"a%d","stage":"ResponseComplete","requestURI":"/apis/%s/v1/namespaces/%s/%s","verb":%q,"user":{"username":"admin"},"sourceIPs":["127.0.0.1"],"userAgent":%q,"objectRef":{"resource":%q,"namespace":%q,"name":%q,"apiGroup":%q,"apiVersion":"v1"},"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":%q,"stageTimestamp":%q}`,
		receivedMs, group, s.ns, resource, verb, userAgent, resource, s.ns, name, group,
		s.at(receivedMs).Format("2006-01-02T15:04:05.000000Z07:00"), s.at(doneMs).Format("2006-01-02T15:04:05.000000Z07:00"))
	a, err := Kinds.ParseAuditLine([]byte(line))
	if err != nil || a == nil {
		s.t.Fatalf("audit line: %v", err)
	}
	s.deltas = append(s.deltas, watch.Delta{Resource: watch.ResourceAudit, Type: watch.Added, Audit: a, Recv: s.at(doneMs + 50)})
}

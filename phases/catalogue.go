package phases

// The catalogue of spans: every span name a Pod trace holds below its phases, one constant each,
// with what a view needs to know of it. The builder draws these names and nothing else; views,
// the rollout model and the exporters ask the catalogue rather than matching names of their own.
const (
	SpanControllersDeployment = "controllers.deployment" // Deployment persisted → its ReplicaSet scaled
	SpanControllersReplicaSet = "controllers.replicaset" // ReplicaSet scaled → the Pod created
	// A workload controller's own step: its cause (Pod.Trigger) → the Pod created.
	SpanControllersStatefulSet = "controllers.statefulset"
	SpanControllersDaemonSet   = "controllers.daemonset"
	SpanControllersJob         = "controllers.job"
	SpanControllersCronJob     = "controllers.cronjob" // the schedule time → the Job created

	// SpanSchedulingVolumeBinding is one PersistentVolumeClaim of the Pod bound while the Pod
	// waited to be bound: the scheduler's VolumeBinding plugin holds the Pod in PreBind until the
	// PV controller has bound the claim (WaitForFirstConsumer), and rejects it while an
	// Immediate claim is unbound. Its end is the claim seen Bound (volumes.go).
	SpanSchedulingVolumeBinding = "scheduling.volume_binding"

	// SpanSchedulingGated: the Pod created → its last scheduling gate removed (spec.schedulingGates):
	// time the scheduler was not allowed to place it.
	SpanSchedulingGated = "scheduling.gated"
	// SpanSchedulingWaitingForNode: the Pod found no node (or an autoscaler said it would add one)
	// → the new Node it was bound to turned Ready.
	SpanSchedulingWaitingForNode = "scheduling.waiting_for_node"

	SpanKubeletSandbox = "kubelet.sandbox" // the Pod on its node → its sandbox ready (volumes, CNI)
	// SpanKubeletVolumes is the part of the sandbox step the kubelet spent waiting for the Pod's
	// volumes to attach and mount, drawn only where the API shows such a wait (volumes.go).
	SpanKubeletVolumes = "kubelet.volumes"

	SpanContainer        = "container"         // one app container: its turn → Ready
	SpanContainerInit    = "container.init"    // one init container: its turn → terminated
	SpanContainerSidecar = "container.sidecar" // one sidecar (init, restartPolicy Always): its turn → started

	SpanImagePull         = "container.image_pull"          // Pulling → Pulled (queue wait included)
	SpanImagePullTransfer = "container.image_pull.transfer" // the transfer alone, as the Pulled message states it
	SpanCreate            = "container.create"
	SpanStart             = "container.start"
	SpanPostStart         = "container.post_start"
	SpanStartupProbe      = "container.startup_probe"
	SpanRestart           = "container.restart" // the kubelet killed it (probe, hook) → its latest run started
	SpanRun               = "container.run"     // an init container running to completion
	SpanReadiness         = "container.readiness"

	SpanStatusRunning   = "status.running"
	SpanStatusReady     = "status.ready"
	SpanStatusEndpoints = "status.endpoints"
)

// The components' own spans, copied into a Pod's trace when readyspan receives them
// (readyspan run --otlp-receive; join.go): each is a copy of one span the component exported, its
// start and end the component's (time source component-span), linked to the original. The
// request spans are named by the role of the request in the Pod's startup and lie under the
// phase of that role; the apiserver's steps inside a request lie under their request.
const (
	SpanAPIRequest        = "apiserver.request"        // the user's request that created a bare Pod
	SpanAPIPodCreate      = "controllers.pod_create"   // the controller's request that created the Pod
	SpanAPIBinding        = "scheduling.binding"       // the scheduler's Binding of the Pod to its node
	SpanAPIStatusWrite    = "status.write"             // the kubelet's write of the Pod's status
	SpanAPIAuthn          = "apiserver.authentication" // the apiserver's filters, each around the rest of its request
	SpanAPIFairness       = "apiserver.priority_and_fairness"
	SpanAPIAuthz          = "apiserver.authorization"
	SpanAPIHandler        = "apiserver.handler"                    // the request's handler (Create, Update, Patch)
	SpanAPIMutatingHook   = "apiserver.admission.mutating_webhook" // one call of a mutating admission webhook
	SpanAPIValidatingHook = "apiserver.admission.validating_webhook"
	SpanAPIStorage        = "apiserver.etcd" // the write to etcd (Create, GuaranteedUpdate)

	SpanKubeletSyncPod         = "kubelet.sync_pod" // the kubelet's syncPod that started the Pod
	SpanCRIRunPodSandbox       = "kubelet.cri.run_pod_sandbox"
	SpanCRIPullImage           = "kubelet.cri.pull_image"
	SpanCRICreateContainer     = "kubelet.cri.create_container"
	SpanCRIStartContainer      = "kubelet.cri.start_container"
	SpanContainerdSandbox      = "containerd.sandbox.run"   // containerd's sandbox start, beneath RunPodSandbox
	SpanContainerdNetworkSetup = "containerd.network.setup" // the CNI plugins' setup of the Pod's network
	SpanContainerdImageUnpack  = "containerd.image.unpack"  // unpacking the pulled layers, beneath PullImage
)

// Category is the kind of time a span stands for, where views tell kinds of time apart (the
// rollout Gantt's letters and colours, the critical path's shares).
type Category string

const (
	CategoryNone      Category = ""
	CategoryImagePull Category = "image_pull"
	CategoryReadiness Category = "readiness"
	// CategoryVolumes is the kubelet's wait for volumes: the rollout row counts it as failing
	// from the Pod's first failed mount on, as it counts pulls and readiness.
	CategoryVolumes Category = "volumes"
)

// SpanInfo is what the catalogue knows of one span name.
type SpanInfo struct {
	Name  string
	Phase string // the phase it lies under
	// Container: the span stands for one container (its name in AttrContainerName).
	Container bool
	Category  Category
}

// Catalogue lists every span name below the phases, in the order the builder draws them.
var Catalogue = []SpanInfo{
	{Name: SpanControllersDeployment, Phase: PhaseControllers},
	{Name: SpanControllersReplicaSet, Phase: PhaseControllers},
	{Name: SpanControllersCronJob, Phase: PhaseControllers},
	{Name: SpanControllersStatefulSet, Phase: PhaseControllers},
	{Name: SpanControllersDaemonSet, Phase: PhaseControllers},
	{Name: SpanControllersJob, Phase: PhaseControllers},
	{Name: SpanSchedulingVolumeBinding, Phase: PhaseScheduling},
	{Name: SpanSchedulingGated, Phase: PhaseScheduling},
	{Name: SpanSchedulingWaitingForNode, Phase: PhaseScheduling},
	{Name: SpanKubeletSandbox, Phase: PhaseKubelet},
	{Name: SpanKubeletVolumes, Phase: PhaseKubelet, Category: CategoryVolumes},
	{Name: SpanContainerInit, Phase: PhaseKubelet, Container: true},
	{Name: SpanContainerSidecar, Phase: PhaseKubelet, Container: true},
	{Name: SpanContainer, Phase: PhaseKubelet, Container: true},
	{Name: SpanImagePull, Phase: PhaseKubelet, Category: CategoryImagePull},
	{Name: SpanImagePullTransfer, Phase: PhaseKubelet, Category: CategoryImagePull},
	{Name: SpanCreate, Phase: PhaseKubelet},
	{Name: SpanStart, Phase: PhaseKubelet},
	{Name: SpanPostStart, Phase: PhaseKubelet},
	{Name: SpanStartupProbe, Phase: PhaseKubelet},
	{Name: SpanRestart, Phase: PhaseKubelet},
	{Name: SpanRun, Phase: PhaseKubelet},
	{Name: SpanReadiness, Phase: PhaseKubelet, Category: CategoryReadiness},
	{Name: SpanStatusRunning, Phase: PhaseStatus},
	{Name: SpanStatusReady, Phase: PhaseStatus},
	{Name: SpanStatusEndpoints, Phase: PhaseStatus},
	{Name: SpanAPIRequest, Phase: PhaseAPIServer},
	{Name: SpanAPIPodCreate, Phase: PhaseControllers},
	{Name: SpanAPIBinding, Phase: PhaseScheduling},
	{Name: SpanAPIStatusWrite, Phase: PhaseStatus},
	{Name: SpanAPIAuthn, Phase: PhaseAPIServer},
	{Name: SpanAPIFairness, Phase: PhaseAPIServer},
	{Name: SpanAPIAuthz, Phase: PhaseAPIServer},
	{Name: SpanAPIHandler, Phase: PhaseAPIServer},
	{Name: SpanAPIMutatingHook, Phase: PhaseAPIServer},
	{Name: SpanAPIValidatingHook, Phase: PhaseAPIServer},
	{Name: SpanAPIStorage, Phase: PhaseAPIServer},
	{Name: SpanKubeletSyncPod, Phase: PhaseKubelet},
	{Name: SpanCRIRunPodSandbox, Phase: PhaseKubelet},
	{Name: SpanCRIPullImage, Phase: PhaseKubelet, Category: CategoryImagePull},
	{Name: SpanCRICreateContainer, Phase: PhaseKubelet},
	{Name: SpanCRIStartContainer, Phase: PhaseKubelet},
	{Name: SpanContainerdSandbox, Phase: PhaseKubelet},
	{Name: SpanContainerdNetworkSetup, Phase: PhaseKubelet},
	{Name: SpanContainerdImageUnpack, Phase: PhaseKubelet, Category: CategoryImagePull},
}

var catalogueByName = func() map[string]SpanInfo {
	m := make(map[string]SpanInfo, len(Catalogue))
	for _, s := range Catalogue {
		m[s.Name] = s
	}
	return m
}()

// Catalogued returns what the catalogue knows of a span name; ok is false for the root, the phases
// and names it does not hold.
func Catalogued(name string) (SpanInfo, bool) {
	s, ok := catalogueByName[name]
	return s, ok
}

// IsContainerSpan reports whether a span stands for one container.
func IsContainerSpan(name string) bool { return catalogueByName[name].Container }

// CategoryOf is the kind of time a span stands for (CategoryNone for most).
func CategoryOf(name string) Category { return catalogueByName[name].Category }

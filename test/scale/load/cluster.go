package load

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// CreateNodes creates n fake nodes for KWOK (annotated kwok.x-k8s.io/node=fake, labelled
// type=kwok, tainted so that only the driver's Pods go there) and waits until they are Ready.
func CreateNodes(ctx context.Context, client kubernetes.Interface, n int, timeout time.Duration) error {
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("kwok-node-%04d", i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{NodeAnnotation: "fake"},
				Labels: map[string]string{NodeLabel: "kwok", DriverLabel: "1", "kubernetes.io/hostname": name,
					"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "kubernetes.io/role": "agent"},
			},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: NodeAnnotation, Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
		}
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", name, err)
		}
	}
	return wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: NodeLabel + "=kwok"})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, node := range nodes.Items {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= n, nil
	})
}

// Watcher users: readyspan and the baseline each watch as a user of their own (through
// impersonation in their kubeconfigs), allowed to read everything, and each with a FlowSchema of
// its own, so the apiserver's apiserver_flowcontrol_dispatched_requests_total counts their
// requests apart.
const (
	ReadyspanUser = "readyspan-scale"
	BaselineUser  = "readyspan-scale-baseline"
	// BaselineJSONUser is the second baseline's, over JSON, when one runs beside the first.
	BaselineJSONUser = "readyspan-scale-baseline-json"
	priorityLevel    = "readyspan-scale"
)

// WatcherUsers are the watchers' users, each with its FlowSchema.
var WatcherUsers = []string{ReadyspanUser, BaselineUser, BaselineJSONUser}

// SetUpWatchers creates the users' read-only access and their FlowSchemas.
func SetUpWatchers(ctx context.Context, client kubernetes.Interface) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "readyspan-scale-read"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create clusterrole %s: %w", role.Name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "readyspan-scale-read"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
	}
	for _, user := range WatcherUsers {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user})
	}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create clusterrolebinding %s: %w", binding.Name, err)
	}
	// Shares enough that neither watcher ever waits in a queue on this cluster.
	pl := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: priorityLevel},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To(int32(100)),
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 16, HandSize: 4, QueueLengthLimit: 100}},
			},
		},
	}
	if _, err := client.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, pl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create prioritylevelconfiguration %s: %w", pl.Name, err)
	}
	for _, user := range WatcherUsers {
		fs := &flowcontrolv1.FlowSchema{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			Spec: flowcontrolv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: priorityLevel},
				MatchingPrecedence:         500,
				DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
				Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
					Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: user}}},
					ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
						Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, ClusterScope: true, Namespaces: []string{"*"},
					}},
					NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
				}},
			},
		}
		if _, err := client.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create flowschema %s: %w", fs.Name, err)
		}
	}
	return nil
}

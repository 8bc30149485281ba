package tracer

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/readyspan/readyspan/watch"
)

// manifests is where the in-cluster RBAC lives, from this package.
const manifests = "../deploy/kubernetes/base"

// grant is one verb on one resource of one group, the unit RBAC rules are checked in.
type grant struct{ group, resource, verb string }

func (g grant) String() string {
	group := g.group
	if group == "" {
		group = `""`
	}
	return fmt.Sprintf("%s on %s/%s", g.verb, group, g.resource)
}

// grants expands RBAC rules into their grants. A wildcard stays a "*": it grants more than any
// list of kinds, so it is never what the registry asks for.
func grants(rules []rbacv1.PolicyRule) map[grant]bool {
	out := map[grant]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out[grant{g, res, v}] = true
				}
			}
		}
	}
	return out
}

// registryGrants is what the registry says readyspan reads, with the webhook configurations
// (watch.WebhookReads) the OTLP input's webhook label is read from.
func registryGrants() map[grant]bool {
	out := map[grant]bool{}
	for _, k := range kinds {
		for _, v := range k.Verbs {
			out[grant{k.GVR.Group, k.GVR.Resource, v}] = true
		}
	}
	for gvr, verbs := range watch.WebhookReads() {
		for _, v := range verbs {
			out[grant{gvr.Group, gvr.Resource, v}] = true
		}
	}
	return out
}

func readManifest(t *testing.T, name string, into any) {
	t.Helper()
	f, err := os.Open(filepath.Join(manifests, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// diff lists the grants of a that b lacks, sorted.
func diff(a, b map[grant]bool) []string {
	var out []string
	for g := range a {
		if !b[g] {
			out = append(out, g.String())
		}
	}
	sort.Strings(out)
	return out
}

// TestClusterRoleMatchesRegistry holds deploy/kubernetes/base/clusterrole.yaml to the registry
// of kinds and the webhook configurations, both ways: every kind's verbs are granted on its
// group and resource (else its watch is forbidden and readyspan is never ready, or its webhooks
// are all "other"), and nothing else is (a kind dropped from the registry must leave the
// ClusterRole too: it grants read access to the whole cluster).
func TestClusterRoleMatchesRegistry(t *testing.T) {
	var role rbacv1.ClusterRole
	readManifest(t, "clusterrole.yaml", &role)
	if role.Kind != "ClusterRole" || role.Name != "readyspan" {
		t.Fatalf("clusterrole.yaml holds %s %q, want the ClusterRole readyspan", role.Kind, role.Name)
	}
	for _, r := range role.Rules {
		if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
			t.Errorf("a rule the registry cannot say: %+v", r)
		}
	}
	have, want := grants(role.Rules), registryGrants()
	if missing := diff(want, have); len(missing) > 0 {
		t.Errorf("the registry of kinds needs, and clusterrole.yaml does not grant: %v", missing)
	}
	if extra := diff(have, want); len(extra) > 0 {
		t.Errorf("clusterrole.yaml grants what no kind of the registry reads: %v", extra)
	}
}

// beyondRegistry is what readyspan is granted that is not a watched kind: the Lease its
// replicas elect a leader with (leader/election.go: client-go's LeaseLock gets, creates and
// updates it), in its own namespace only (role.yaml). The ClusterRole holds nothing beyond the
// registry.
var beyondRegistry = map[grant]bool{
	{"coordination.k8s.io", "leases", "get"}:    true,
	{"coordination.k8s.io", "leases", "create"}: true,
	{"coordination.k8s.io", "leases", "update"}: true,
}

// TestLeaderElectionRole checks role.yaml, the one Role beside the ClusterRole: exactly the
// Lease's verbs, and no watched kind (those are cluster-wide, in the ClusterRole).
func TestLeaderElectionRole(t *testing.T) {
	var role rbacv1.Role
	readManifest(t, "role.yaml", &role)
	if role.Kind != "Role" {
		t.Fatalf("role.yaml holds a %s, want a Role", role.Kind)
	}
	have := grants(role.Rules)
	if missing := diff(beyondRegistry, have); len(missing) > 0 {
		t.Errorf("role.yaml does not grant leader election: %v", missing)
	}
	if extra := diff(have, beyondRegistry); len(extra) > 0 {
		t.Errorf("role.yaml grants more than leader election needs: %v", extra)
	}
	reg := registryGrants()
	for g := range beyondRegistry {
		if reg[g] {
			t.Errorf("%s is both a watched kind's and leader election's", g)
		}
	}
}

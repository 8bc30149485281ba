package krew

import (
	"bytes"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// plugin is the part of krew's Plugin type (sigs.k8s.io/krew/pkg/index) the manifest uses. It is
// decoded strictly, so a misspelt field fails here rather than being ignored by krew.
type plugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string     `json:"version"`
		Homepage         string     `json:"homepage"`
		ShortDescription string     `json:"shortDescription"`
		Description      string     `json:"description"`
		Caveats          string     `json:"caveats"`
		Platforms        []platform `json:"platforms"`
	} `json:"spec"`
}

type platform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	Files  []struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"files"`
	Bin string `json:"bin"`
}

func parseManifest(t *testing.T, data []byte) plugin {
	t.Helper()
	var p plugin
	if err := utilyaml.UnmarshalStrict(data, &p); err != nil {
		t.Fatalf("parse manifest: %v\n%s", err, data)
	}
	return p
}

const (
	sumA = "1111111111111111111111111111111111111111111111111111111111111111"
	sumB = "2222222222222222222222222222222222222222222222222222222222222222"
	sumC = "3333333333333333333333333333333333333333333333333333333333333333"
)

// The archives come out in a fixed order whatever order sha256sum listed them in, so the manifest
// does not change with the order make dist built them.
func TestParseSumsOrdersByPlatform(t *testing.T) {
	in := sumA + "  readyspan_v1.2.3_linux_arm64.tar.gz\n" +
		sumB + " *readyspan_v1.2.3_darwin_amd64.tar.gz\n" +
		"\n" +
		sumC + "  readyspan_v1.2.3_linux_amd64.tar.gz\n"
	got, err := ParseSums(strings.NewReader(in), "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	want := []Archive{
		{OS: "darwin", Arch: "amd64", File: "readyspan_v1.2.3_darwin_amd64.tar.gz", SHA256: sumB},
		{OS: "linux", Arch: "amd64", File: "readyspan_v1.2.3_linux_amd64.tar.gz", SHA256: sumC},
		{OS: "linux", Arch: "arm64", File: "readyspan_v1.2.3_linux_arm64.tar.gz", SHA256: sumA},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("archive %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestParseSumsRejects(t *testing.T) {
	for name, tc := range map[string]struct{ version, sums, want string }{
		"another release's archive": {"v1.2.3", sumA + "  readyspan_v1.2.2_linux_amd64.tar.gz\n", "is not readyspan_v1.2.3_<os>_<arch>.tar.gz"},
		"not an archive":            {"v1.2.3", sumA + "  readyspan\n", "is not readyspan_v1.2.3"},
		"no arch":                   {"v1.2.3", sumA + "  readyspan_v1.2.3_linux.tar.gz\n", "is not readyspan_v1.2.3"},
		"short digest":              {"v1.2.3", "abc  readyspan_v1.2.3_linux_amd64.tar.gz\n", "want \"<sha256>  <file>\""},
		"uppercase digest":          {"v1.2.3", strings.Repeat("AB", 32) + "  readyspan_v1.2.3_linux_amd64.tar.gz\n", "want \"<sha256>  <file>\""},
		"two for one platform":      {"v1.2.3", sumA + "  readyspan_v1.2.3_linux_amd64.tar.gz\n" + sumB + "  readyspan_v1.2.3_linux_amd64.tar.gz\n", "two archives for linux/amd64"},
		"empty":                     {"v1.2.3", "\n", "no archive of v1.2.3"},
		"version without v":         {"1.2.3", sumA + "  readyspan_1.2.3_linux_amd64.tar.gz\n", "not semver with a leading v"},
		"version not semver":        {"v1.2", sumA + "  readyspan_v1.2_linux_amd64.tar.gz\n", "not semver with a leading v"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseSums(strings.NewReader(tc.sums), tc.version)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// The rendered manifest is YAML krew can read: every archive becomes one platform with the release
// URI, the digest, the binary and the license krew-index requires.
func TestRender(t *testing.T) {
	archives := []Archive{
		{OS: "darwin", Arch: "arm64", File: "readyspan_v1.2.3-rc.1_darwin_arm64.tar.gz", SHA256: sumA},
		// Digits YAML would read as a number: an arch of 386, a digest that is a float.
		{OS: "linux", Arch: "386", File: "readyspan_v1.2.3-rc.1_linux_386.tar.gz", SHA256: "1e" + sumB[2:]},
		{OS: "linux", Arch: "amd64", File: "readyspan_v1.2.3-rc.1_linux_amd64.tar.gz", SHA256: strings.Repeat("ab", 32)},
	}
	var buf bytes.Buffer
	if err := Render(&buf, "v1.2.3-rc.1", archives); err != nil {
		t.Fatal(err)
	}
	p := parseManifest(t, buf.Bytes())
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" || p.Metadata.Name != "readyspan" {
		t.Errorf("header: got %s %s %s", p.APIVersion, p.Kind, p.Metadata.Name)
	}
	if p.Spec.Version != "v1.2.3-rc.1" || p.Spec.Homepage != Homepage || p.Spec.ShortDescription == "" {
		t.Errorf("spec: got version %q homepage %q shortDescription %q", p.Spec.Version, p.Spec.Homepage, p.Spec.ShortDescription)
	}
	for _, cmd := range []string{"kubectl readyspan explain deployment/NAME", "kubectl readyspan watch"} {
		if !strings.Contains(p.Spec.Description, cmd) {
			t.Errorf("description does not show %q:\n%s", cmd, p.Spec.Description)
		}
	}
	if len(p.Spec.Platforms) != len(archives) {
		t.Fatalf("got %d platforms, want %d", len(p.Spec.Platforms), len(archives))
	}
	for i, a := range archives {
		pl := p.Spec.Platforms[i]
		if l := pl.Selector.MatchLabels; len(l) != 2 || l["os"] != a.OS || l["arch"] != a.Arch {
			t.Errorf("platform %d: selector %v, want os %s arch %s", i, l, a.OS, a.Arch)
		}
		if want := "https://github.com/readyspan/readyspan/releases/download/v1.2.3-rc.1/" + a.File; pl.URI != want {
			t.Errorf("platform %d: uri %s, want %s", i, pl.URI, want)
		}
		if pl.SHA256 != a.SHA256 || pl.Bin != "readyspan" {
			t.Errorf("platform %d: sha256 %s bin %s", i, pl.SHA256, pl.Bin)
		}
		if len(pl.Files) != 2 || pl.Files[0].From != "readyspan" || pl.Files[1].From != "LICENSE" || pl.Files[0].To != "." || pl.Files[1].To != "." {
			t.Errorf("platform %d: files %+v", i, pl.Files)
		}
	}
}

func TestRenderRejects(t *testing.T) {
	good := Archive{OS: "linux", Arch: "amd64", File: "readyspan_v1.0.0_linux_amd64.tar.gz", SHA256: sumA}
	for name, tc := range map[string]struct {
		version  string
		archives []Archive
	}{
		"no archives":          {"v1.0.0", nil},
		"bad version":          {"1.0.0", []Archive{good}},
		"file of another":      {"v1.0.1", []Archive{good}},
		"digest not hex":       {"v1.0.0", []Archive{{OS: "linux", Arch: "amd64", File: good.File, SHA256: strings.Repeat("z", 64)}}},
		"os needing quotation": {"v1.0.0", []Archive{{OS: "linux: x", Arch: "amd64", File: "readyspan_v1.0.0_linux: x_amd64.tar.gz", SHA256: sumA}}},
	} {
		t.Run(name, func(t *testing.T) {
			if err := Render(&bytes.Buffer{}, tc.version, tc.archives); err == nil {
				t.Error("rendered, want an error")
			}
		})
	}
}

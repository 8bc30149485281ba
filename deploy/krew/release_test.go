package krew

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// The platforms a release must have an archive (and a krew platform entry) for.
var releasePlatforms = []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64"}

// make dist builds what the Makefile's DIST_PLATFORMS names, and the manifest gets one platform
// entry per archive: a platform dropped there would silently leave krew users without a build.
func TestDistBuildsEveryReleasePlatform(t *testing.T) {
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatalf("read Makefile: %v", err)
	}
	var got []string
	for _, line := range strings.Split(string(makefile), "\n") {
		if rest, ok := strings.CutPrefix(line, "DIST_PLATFORMS :="); ok {
			got = strings.Fields(rest)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, releasePlatforms) {
		t.Errorf("Makefile DIST_PLATFORMS is %v, want exactly %v", got, releasePlatforms)
	}
}

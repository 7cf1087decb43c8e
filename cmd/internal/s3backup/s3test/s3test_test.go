package s3test

import (
	"os"
	"strings"
	"testing"
)

// TestInstallScriptMatches: the script make test runs to install the
// gateway in the background installs the release the tests look for.
func TestInstallScriptMatches(t *testing.T) {
	b, err := os.ReadFile("../../../../scripts/install-versitygw.sh")
	if err != nil {
		t.Fatal(err)
	}
	if want := "\nmodule=" + Module + "\n"; !strings.Contains(string(b), want) {
		t.Fatalf("scripts/install-versitygw.sh does not install %s", Module)
	}
}

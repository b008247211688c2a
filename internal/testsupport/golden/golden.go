package golden

import (
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files instead of comparing with them")

// Update reports whether the test binary was run with -update.
func Update() bool { return *update }

// Load returns the content of the golden file at path. With -update it
// first writes got there, so that the caller's comparison passes and the
// file holds the new output. A missing file without -update fails the
// test, saying how to create it.
func Load(t testing.TB, path string, got []byte) []byte {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("rewrite golden file: %v", err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
	}
	return want
}

// Check compares got with the golden file at path and reports the
// difference as a test error; with -update it rewrites the file instead.
func Check(t testing.TB, path, got string) {
	t.Helper()
	want := Load(t, path, []byte(got))
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; go test -update rewrites it):\n%s", path, diff)
	}
}

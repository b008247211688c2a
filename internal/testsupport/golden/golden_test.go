package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	errors []string
	fatal  bool
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, format)
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.errors = append(r.errors, format)
	r.fatal = true
}

// TestCheck: equal output passes, different output is an error naming
// the file, a missing file fails, and -update rewrites the file.
func TestCheck(t *testing.T) {
	tests := []struct {
		name      string
		file      *string // nil: no file
		got       string
		update    bool
		wantFail  bool
		wantAfter string
	}{
		{name: "equal output passes", file: ptr("a\n"), got: "a\n", wantAfter: "a\n"},
		{name: "different output is an error", file: ptr("a\n"), got: "b\n", wantFail: true, wantAfter: "a\n"},
		{name: "a missing file fails", got: "a\n", wantFail: true},
		{name: "-update rewrites the file", file: ptr("a\n"), got: "b\n", update: true, wantAfter: "b\n"},
		{name: "-update creates a missing file", got: "b\n", update: true, wantAfter: "b\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.golden")
			if tc.file != nil {
				if err := os.WriteFile(path, []byte(*tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			old := *update
			*update = tc.update
			defer func() { *update = old }()
			r := &recorder{TB: t}
			Check(r, path, tc.got)
			if failed := len(r.errors) > 0; failed != tc.wantFail {
				t.Errorf("failed = %v (%s), want %v", failed, strings.Join(r.errors, "; "), tc.wantFail)
			}
			if tc.wantAfter == "" {
				return
			}
			if after, err := os.ReadFile(path); err != nil || string(after) != tc.wantAfter {
				t.Errorf("file after = %q, %v; want %q", after, err, tc.wantAfter)
			}
		})
	}
}

func ptr(s string) *string { return &s }

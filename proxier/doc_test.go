package proxier

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// traceStep is one numbered step of doc.go's trace: its file, the
// functions it names in parentheses (Recv.Method or Func) and its text.
type traceStep struct {
	file  string
	funcs []string
	text  string
}

var (
	stepStart = regexp.MustCompile(`^//\s+(\d+)\. (\S+\.go) \(([^)]*)\):(.*)$`)
	goFile    = regexp.MustCompile(`[\w/]+\.go\b`)
)

// readTrace returns the steps of doc.go's trace.
func readTrace(t *testing.T) []traceStep {
	t.Helper()
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var steps []traceStep
	for line := range strings.SplitSeq(string(b), "\n") {
		if m := stepStart.FindStringSubmatch(line); m != nil {
			var funcs []string
			for f := range strings.SplitSeq(m[3], ",") {
				funcs = append(funcs, strings.TrimSpace(f))
			}
			steps = append(steps, traceStep{file: m[2], funcs: funcs, text: m[4]})
			continue
		}
		if len(steps) > 0 && strings.HasPrefix(line, "//     ") {
			steps[len(steps)-1].text += " " + strings.TrimSpace(strings.TrimPrefix(line, "//"))
		}
	}
	return steps
}

// declared returns the functions and methods of a Go file, as Func and
// Recv.Method, and the identifiers it uses.
func declared(t *testing.T, path string) (decls, idents map[string]bool) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	decls, idents = map[string]bool{}, map[string]bool{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			typ := fd.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				name = id.Name + "." + name
			}
		}
		decls[name] = true
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			idents[id.Name] = true
		}
		return true
	})
	return decls, idents
}

// TestTraceMatchesTheCode holds doc.go's trace of one Service to the
// code: at most eight files, each existing and declaring the functions
// its step names; every other file the trace names exists; and each
// step's first function is used in the step before's file or in a file
// that step names (as the runner's function is set in loop.go).
func TestTraceMatchesTheCode(t *testing.T) {
	steps := readTrace(t)
	if len(steps) < 2 || len(steps) > 8 {
		t.Fatalf("doc.go's trace has %d steps, want 2 to 8", len(steps))
	}
	root := ".."
	uses := make([]map[string]bool, len(steps))
	for i, s := range steps {
		decls, idents := declared(t, filepath.Join(root, s.file))
		for _, f := range s.funcs {
			if !decls[f] {
				t.Errorf("step %d: %s declares no %s", i+1, s.file, f)
			}
		}
		uses[i] = idents
		for _, other := range goFile.FindAllString(s.text, -1) {
			path := filepath.Join(root, other)
			if !strings.Contains(other, "/") {
				path = filepath.Join(root, filepath.Dir(s.file), other)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("step %d names %s: %v", i+1, other, err)
				continue
			}
			_, more := declared(t, path)
			for id := range more {
				uses[i][id] = true
			}
		}
	}
	for i := 1; i < len(steps); i++ {
		first := steps[i].funcs[0]
		name := first[strings.LastIndex(first, ".")+1:]
		if !uses[i-1][name] {
			t.Errorf("step %d's %s is not used in step %d's files", i+1, first, i)
		}
	}
}

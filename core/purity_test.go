// Guards the layering rule: the engine never imports cgo and never names a
// CPython API, so it builds and tests without a C compiler or Python.

package core_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// cpythonName matches the C API's names (PyObject, Py_DECREF, _PyRun...,
// PyGILState_Ensure) and its header; plain "Python" in prose does not match.
var cpythonName = regexp.MustCompile(`\b_?Py[A-Z_][A-Za-z0-9_]*|Python\.h`)

// coreSources lists every non-test Go file under core/ (this directory).
func coreSources(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found only %d source files under core/: %v", len(files), files)
	}
	return files
}

func TestCoreImportsNoCgo(t *testing.T) {
	fset := token.NewFileSet()
	for _, path := range coreSources(t) {
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "C" || strings.Contains(p, "cgo") {
				t.Errorf("%s imports %q: core must build with CGO_ENABLED=0", fset.Position(imp.Pos()), p)
			}
		}
	}
}

func TestCoreNamesNoCPythonAPI(t *testing.T) {
	fset := token.NewFileSet()
	for _, path := range coreSources(t) {
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var text string
			switch n := n.(type) {
			case *ast.Ident:
				text = n.Name
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					text = n.Value
				}
			}
			if m := cpythonName.FindString(text); m != "" {
				t.Errorf("%s names the CPython API (%s)", fset.Position(n.Pos()), m)
			}
			return true
		})
		// A cgo preamble or directive hides in comments.
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if strings.Contains(c.Text, "#include") || strings.HasPrefix(c.Text, "//export ") || strings.Contains(c.Text, "#cgo") {
					t.Errorf("%s: cgo directive in a comment: %s", fset.Position(c.Pos()), c.Text)
				}
			}
		}
	}
}

// goTool finds the go command that runs these tests.
func goTool(t *testing.T) string {
	t.Helper()
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func TestCoreBuildsWithoutCgo(t *testing.T) {
	cmd := exec.Command(goTool(t), "build", "./...")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./core/...: %v\n%s", err, out)
	}
}

// With cgo enabled, files importing "C" would be built too; no package core
// depends on (besides the standard library's optional ones) may have any.
// The conformance suite (poll/polltest) is left out: only test binaries
// link it, and it uses the net package, whose resolver may use cgo.
func TestCoreDependsOnNoCgoPackage(t *testing.T) {
	list := exec.Command(goTool(t), "list", "./...")
	all, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	args := []string{"list", "-deps", "-f", "{{if .CgoFiles}}{{.ImportPath}}{{end}}"}
	for _, pkg := range strings.Fields(string(all)) {
		if !strings.HasSuffix(pkg, "/polltest") {
			args = append(args, pkg)
		}
	}
	cmd := exec.Command(goTool(t), args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Fatalf("core depends on packages with cgo files:\n%s", s)
	}
}

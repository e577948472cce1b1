// Package layering checks the order of the C adapter's files: a C file in
// capi/ may call functions defined in its own file or in files of lower
// layers, never in higher ones, so that the adapter has no circle of files.
// The order is the table in capi/zl.h's opening comment, which this test
// reads; functions defined inline in the headers (zl.h, bridge.h) are
// accessors any file may call. It reads the sources only: no cgo, no
// Python.
package layering

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// layerTable reads zl.h's "layers" table: a file's rank is the place of
// its row (" *     <file>.c  <what>") among the table's rows; heading rows
// name no file.
func layerTable(t *testing.T) map[string]int {
	t.Helper()
	src, err := os.ReadFile("../zl.h")
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	start := strings.Index(text, "The files, lowest layer first")
	end := strings.Index(text, "*/")
	if start < 0 || end < start {
		t.Fatal("capi/zl.h's opening comment has no layers table")
	}
	row := regexp.MustCompile(`(?m)^ \*\s+(\w+\.c)\s`)
	ranks := map[string]int{}
	for i, m := range row.FindAllStringSubmatch(text[start:end], -1) {
		if _, twice := ranks[m[1]]; twice {
			t.Fatalf("capi/zl.h's layers table names %s twice", m[1])
		}
		ranks[m[1]] = i + 1
	}
	if len(ranks) == 0 {
		t.Fatal("capi/zl.h has no layers table")
	}
	return ranks
}

var (
	// a definition: a line starting with a return type and a zl_ name,
	// not static (static functions are private to their file)
	definition = regexp.MustCompile(`(?m)^(?:[A-Za-z_][\w \t\*]*?[\s\*])(zl_\w+)\s*\([^;]*$`)
	call       = regexp.MustCompile(`\b(zl_\w+)\s*\(`)
	comment    = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	stringLit  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
)

func sources(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../*.c")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		code := comment.ReplaceAllString(string(src), "")
		out[filepath.Base(f)] = stringLit.ReplaceAllString(code, `""`)
	}
	return out
}

// TestEveryFileHasALayer: a new C file must be placed in the table.
func TestEveryFileHasALayer(t *testing.T) {
	ranks := layerTable(t)
	for name := range sources(t) {
		if _, ok := ranks[name]; !ok {
			t.Errorf("capi/%s is not in capi/zl.h's layers table", name)
		}
	}
	for name := range ranks {
		if _, err := os.Stat(filepath.Join("..", name)); err != nil {
			t.Errorf("capi/zl.h's layers table names %s, which does not exist", name)
		}
	}
}

// TestNoFileCallsAHigherLayer is the check itself.
func TestNoFileCallsAHigherLayer(t *testing.T) {
	ranks := layerTable(t)
	srcs := sources(t)
	// A function may be defined once per platform (files_posix.c and
	// files_windows.c, which the build constraints never compile together):
	// every file that defines it, each checked against the caller.
	definedIn := map[string][]string{}
	for name, code := range srcs {
		for _, m := range definition.FindAllStringSubmatch(code, -1) {
			if strings.HasPrefix(strings.TrimSpace(m[0]), "static") {
				continue
			}
			definedIn[m[1]] = append(definedIn[m[1]], name)
		}
	}
	if len(definedIn) < 50 {
		t.Fatalf("found only %d function definitions: the pattern no longer matches the code", len(definedIn))
	}
	var problems []string
	for name, code := range srcs {
		seen := map[string]bool{}
		for _, m := range call.FindAllStringSubmatch(code, -1) {
			callee := m[1]
			owners := definedIn[callee]
			if len(owners) == 0 || slices.Contains(owners, name) || seen[callee] {
				continue
			}
			seen[callee] = true
			for _, owner := range owners {
				if ranks[owner] > ranks[name] {
					problems = append(problems, name+" (layer "+strconv.Itoa(ranks[name])+") calls "+
						callee+" of "+owner+" (layer "+strconv.Itoa(ranks[owner])+")")
				}
			}
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

package holdfast_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestExamplesCompileWhenCopied holds the promise of the Examples: the body
// of each one, copied with its imports into an empty module, compiles. It
// writes every Example of the module (files named *example*_test.go) as the
// main function of a program of its own, keeping the imports the body uses,
// in one temporary module that requires this one by a replace directive,
// and vets them all in one run. A body that calls a helper of a test file,
// or uses a type or constant declared beside it, does not compile there.
//
// The files in wholeFiles are meant to be copied whole (as a _test.go file
// of the reader's package); they are copied whole and vetted as tests.
//
// A canary program calls a helper no module defines: the run must fail on
// it, and on it alone, or the check proves nothing.
//
// It builds offline from the module cache (GOPROXY=off) with this module's
// go.sum, so it needs no more than `go test` of this module fetched.
func TestExamplesCompileWhenCopied(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the copied examples: %v", err)
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	programs := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || exists(filepath.Join(p, "go.mod"))) {
				return filepath.SkipDir // another module, or not Go code
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), "_test.go") || !strings.Contains(d.Name(), "example") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if slices.Contains(wholeFiles, filepath.ToSlash(rel)) {
			programs++
			return copyWholeFile(dir, rel, src)
		}
		n, err := copyExamples(dir, rel, src, func(msg string) { t.Error(msg) })
		programs += n
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if programs < 20 {
		t.Fatalf("found %d examples to copy: has the layout of the examples changed?", programs)
	}
	canary := "package main\n\nfunc main() {\n\texampleClient()\n}\n"
	writeFile(t, filepath.Join(dir, "canary", "main.go"), canary)

	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	modText := regexp.MustCompile(`(?m)^module .*$`).ReplaceAllString(string(mod), "module examplecopy")
	modText += "\nrequire github.com/holdfast/holdfast v0.0.0\n\nreplace github.com/holdfast/holdfast => " + strconv.Quote(root) + "\n"
	writeFile(t, filepath.Join(dir, "go.mod"), modText)
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "go.sum"), string(sum))

	cmd := exec.Command(goBin, "vet", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("go vet passed the canary, which calls an undefined helper: the check proves nothing\n%s", out)
	}
	if !bytes.Contains(out, []byte("undefined: exampleClient")) {
		t.Fatalf("go vet failed, but not on the canary's undefined helper:\n%s", out)
	}
	// Every other program that vet names is a copied example that does not
	// compile (or that vet finds fault with).
	bad := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)(?:examplecopy/|^vet: |^)(\w+)/[\w.]+\.go:`).FindAllStringSubmatch(string(out), -1) {
		bad[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`(?m)^# \[?examplecopy/(\w+)`).FindAllStringSubmatch(string(out), -1) {
		bad[m[1]] = true
	}
	delete(bad, "canary")
	if len(bad) > 0 {
		names := slices.Sorted(maps.Keys(bad))
		t.Errorf("copied into a module of their own, %d examples do not compile or fail go vet "+
			"(each program is named after its file and Example):\n%s\n\nfull output:\n%s",
			len(bad), strings.Join(names, "\n"), out)
	}
	t.Logf("%d examples copied and vetted", programs)
}

// wholeFiles are the example files meant to be copied whole, as they say.
var wholeFiles = []string{"sim/example_rapid_test.go"}

// copyExamples writes each Example of the file rel (source src) as the main
// function of a program in dir, with the imports its body uses, and returns
// how many it wrote. An example of which go/doc makes no program goes to
// fail.
func copyExamples(dir, rel string, src []byte, fail func(string)) (int, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.ParseComments)
	if err != nil {
		return 0, err
	}
	// The package site shows an example as the program go/doc makes of it
	// (its Play), or as its bare body when go/doc cannot make one.
	for _, ex := range doc.Examples(f) {
		if ex.Play == nil {
			fail(fmt.Sprintf("%s: go/doc makes no whole program of Example%s: it uses something the file does not declare", rel, ex.Name))
		}
	}
	n := 0
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Example") || fn.Body == nil {
			continue
		}
		used := map[string]bool{}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok {
					used[id.Name] = true
				}
			}
			return true
		})
		var b strings.Builder
		b.WriteString("// " + fn.Name.Name + " of " + filepath.ToSlash(rel) + ", copied.\npackage main\n\nimport (\n")
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			name := importName(p)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			if used[name] {
				b.WriteString("\t" + importSpec(imp) + "\n")
			}
		}
		b.WriteString(")\n\nfunc main() ")
		b.Write(src[fset.Position(fn.Body.Lbrace).Offset : fset.Position(fn.Body.Rbrace).Offset+1])
		b.WriteString("\n")
		prog := strings.NewReplacer("/", "_", ".", "_").Replace(strings.TrimSuffix(filepath.ToSlash(rel), "_test.go")) + "_" + fn.Name.Name
		if err := writeFileErr(filepath.Join(dir, prog, "main.go"), b.String()); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// copyWholeFile writes the test file rel as the only file of a package of
// its own in dir.
func copyWholeFile(dir, rel string, src []byte) error {
	text := regexp.MustCompile(`(?m)^package \w+`).ReplaceAllString(string(src), "package copied")
	prog := strings.NewReplacer("/", "_", ".", "_").Replace(strings.TrimSuffix(filepath.ToSlash(rel), "_test.go"))
	return writeFileErr(filepath.Join(dir, prog, "copied_test.go"), text)
}

// importName is the name a package is imported by without a name of its
// own: its path's last element, or the one before a major version suffix.
func importName(p string) string {
	base := path.Base(p)
	if regexp.MustCompile(`^v[0-9]+$`).MatchString(base) && strings.Contains(p, "/") {
		base = path.Base(path.Dir(p))
	}
	return base
}

func importSpec(imp *ast.ImportSpec) string {
	if imp.Name != nil {
		return imp.Name.Name + " " + imp.Path.Value
	}
	return imp.Path.Value
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func writeFileErr(p, text string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(text), 0o644)
}

func writeFile(t *testing.T, p, text string) {
	t.Helper()
	if err := writeFileErr(p, text); err != nil {
		t.Fatal(err)
	}
}

package holdfast_test

import (
	"cmp"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// These tests keep README's facts about the code from drifting: the test
// command's property-test counts, the list of lock kinds, the list of
// errors, and its links. (acl_test.go does the same for the ACL line.)

// readme returns README.md as it is, and with every run of white space
// made one space, so that a statement reads the same however its lines
// wrap.
func readme(t *testing.T) (raw, flat string) {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b), strings.Join(strings.Fields(string(b)), " ")
}

// TestREADMEStatesTheTestCommandsCounts: every test that scripts/test.sh
// runs with -rapid.checks is named in README with its count ("`TestX`
// 10,000 times"), and every such count README states is one test.sh runs. A
// new -rapid.checks line in test.sh fails this test until README describes
// it.
func TestREADMEStatesTheTestCommandsCounts(t *testing.T) {
	script, err := os.ReadFile("scripts/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	runs := rapidRuns(t, string(script))
	if len(runs) == 0 {
		t.Fatal("scripts/test.sh runs no test with -rapid.checks=N: has its form changed? (update rapidRuns)")
	}
	_, text := readme(t)
	for name, checks := range runs {
		if want := "`" + name + "` " + thousands(checks) + " times"; !strings.Contains(text, want) {
			t.Errorf("scripts/test.sh runs %s with -rapid.checks=%d, but README.md does not say %q (in \"Running the tests\")", name, checks, want)
		}
	}
	for _, m := range regexp.MustCompile("`(Test\\w+)` ([0-9][0-9,]*) times").FindAllStringSubmatch(text, -1) {
		n, err := strconv.Atoi(strings.ReplaceAll(m[2], ",", ""))
		if err != nil || runs[m[1]] != n {
			t.Errorf("README.md says %q, but scripts/test.sh runs %s with -rapid.checks=%d (0: not at all)", m[0], m[1], runs[m[1]])
		}
	}
}

// rapidRuns reads the `go test ... -run PATTERN -rapid.checks=N ... PKG`
// lines of a shell script and returns, for every test function of PKG that
// PATTERN matches, N. A line whose pattern matches no test, or whose parts
// cannot be found, fails t: it would run nothing, silently.
func rapidRuns(t *testing.T, script string) map[string]int {
	t.Helper()
	runs := map[string]int{}
	for i, line := range strings.Split(script, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") || !strings.Contains(line, "-rapid.checks") {
			continue
		}
		where := "scripts/test.sh:" + strconv.Itoa(i+1)
		fields := strings.Fields(line)
		var pattern, pkg string
		checks := -1
		for j := 0; j < len(fields); j++ {
			f := strings.Trim(fields[j], `'"`)
			switch {
			case f == "-run" && j+1 < len(fields):
				j++
				pattern = strings.Trim(fields[j], `'"`)
			case strings.HasPrefix(f, "-run="):
				pattern = strings.TrimPrefix(f, "-run=")
			case strings.HasPrefix(f, "-rapid.checks="):
				n, err := strconv.Atoi(strings.TrimPrefix(f, "-rapid.checks="))
				if err != nil {
					t.Fatalf("%s: %q: %v", where, f, err)
				}
				checks = n
			case f == "$@" || strings.HasPrefix(f, "-"):
			default:
				pkg = f // the last plain word: go test's package
			}
		}
		if pattern == "" || checks < 0 || pkg == "" {
			t.Fatalf("%s: cannot find -run PATTERN, -rapid.checks=N and the package in %q", where, line)
		}
		re, err := regexp.Compile(strings.SplitN(pattern, "/", 2)[0])
		if err != nil {
			t.Fatalf("%s: -run %q: %v", where, pattern, err)
		}
		matched := 0
		for _, name := range testFuncs(t, pkg) {
			if re.MatchString(name) {
				if n, ok := runs[name]; ok && n != checks {
					t.Errorf("%s: %s runs again with -rapid.checks=%d after %d", where, name, checks, n)
				}
				runs[name] = checks
				matched++
			}
		}
		if matched == 0 {
			t.Errorf("%s: -run %q matches no test of %s", where, pattern, pkg)
		}
	}
	return runs
}

// testFuncs returns the names of the test functions in the _test.go files
// of the package directory dir ("." or "./x").
func testFuncs(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files in %s (%v)", dir, err)
	}
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(\w+ \*testing\.T\)`)
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllSubmatch(b, -1) {
			names = append(names, string(m[1]))
		}
	}
	return names
}

// thousands writes n with commas between groups of three digits, as README
// writes its numbers.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 100: "100", 1000: "1,000", 10000: "10,000", 1234567: "1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestREADMEListsTheLockKinds: README's list of lock kinds and its
// comparison with Redisson name exactly the kinds the package has — its
// exported functions and Client methods that return a *Lock.
func TestREADMEListsTheLockKinds(t *testing.T) {
	kinds := lockKinds(t)
	if len(kinds) == 0 {
		t.Fatal("found no function returning *Lock: has the API's form changed? (update lockKinds)")
	}
	raw, text := readme(t)
	const head = "- the **lock kinds**"
	start := strings.Index(text, head)
	if start < 0 {
		t.Fatalf("README.md has no bullet starting %q", head)
	}
	bullet := text[start+len(head):]
	if end := strings.Index(bullet, " - "); end >= 0 {
		bullet = bullet[:end]
	}
	var listed []string
	for _, m := range regexp.MustCompile("`([A-Z]\\w*)`").FindAllStringSubmatch(bullet, -1) {
		listed = append(listed, m[1])
	}
	slices.Sort(listed)
	if !slices.Equal(slices.Compact(listed), kinds) {
		t.Errorf("README.md's lock kinds are %v; the package's are %v", listed, kinds)
	}

	row := ""
	for _, line := range strings.Split(raw, "\n") {
		if strings.HasPrefix(line, "| **Redisson**") {
			row = line
		}
	}
	if row == "" {
		t.Fatal(`README.md's "Choosing a lock" table has no Redisson row`)
	}
	for _, k := range kinds {
		if !strings.Contains(row, "`"+k+"`") {
			t.Errorf("README.md's Redisson row does not name the kind `%s`", k)
		}
	}
}

// lockKinds returns, sorted, the exported functions and *Client methods of
// package holdfast whose one result is a *Lock: the lock kinds.
func lockKinds(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var kinds []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() || fn.Type.Results == nil || len(fn.Type.Results.List) != 1 || !isPtrTo(fn.Type.Results.List[0].Type, "Lock") {
				continue
			}
			if fn.Recv != nil && !isPtrTo(fn.Recv.List[0].Type, "Client") {
				continue
			}
			kinds = append(kinds, fn.Name.Name)
		}
	}
	slices.Sort(kinds)
	return kinds
}

func isPtrTo(e ast.Expr, name string) bool {
	star, ok := e.(*ast.StarExpr)
	if !ok {
		return false
	}
	id, ok := star.X.(*ast.Ident)
	return ok && id.Name == name
}

// TestREADMEListsEveryError: the Quickstart's error table names every
// exported error of errors.go, so that a new sentinel cannot go unlisted.
func TestREADMEListsEveryError(t *testing.T) {
	raw, _ := readme(t)
	start := strings.Index(raw, "\n### Errors\n")
	if start < 0 {
		t.Fatal(`README.md has no "### Errors" section`)
	}
	section := raw[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "errors.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, spec := range g.Specs {
			for _, id := range spec.(*ast.ValueSpec).Names {
				if id.IsExported() && strings.HasPrefix(id.Name, "Err") {
					names = append(names, id.Name)
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("found no exported Err… variable in errors.go: has its form changed?")
	}
	for _, name := range names {
		if !strings.Contains(section, "| `"+name+"` |") {
			t.Errorf("README.md's error table (### Errors) has no row for %s", name)
		}
	}
}

// TestREADMELinksResolve: every link of README.md to a section (#anchor),
// to a file of the repository, or to a section of one of its Markdown
// files, finds its target, so that moving a section cannot leave the
// contents list or a "see …" pointing nowhere.
func TestREADMELinksResolve(t *testing.T) {
	raw, _ := readme(t)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, m := range link.FindAllStringSubmatch(raw, -1) {
		target := m[1]
		if strings.Contains(target, "://") {
			continue
		}
		file, anchor, _ := strings.Cut(target, "#")
		text := raw
		if file != "" {
			b, err := os.ReadFile(filepath.FromSlash(file))
			if err != nil {
				t.Errorf("README.md links to %s: %v", target, err)
				continue
			}
			text = string(b)
		}
		if anchor != "" && !slices.Contains(headingAnchors(text), anchor) {
			t.Errorf("README.md links to %s, but %s has no heading with that anchor", target, cmp.Or(file, "README.md"))
		}
	}
}

// headingAnchors returns the anchors GitHub gives the Markdown headings of
// text: lower case, punctuation dropped, spaces made hyphens, and -1, -2, …
// after a repeated one. Fenced code blocks hold no headings.
func headingAnchors(text string) []string {
	var anchors []string
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		anchors = append(anchors, a)
	}
	return anchors
}

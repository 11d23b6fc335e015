package holdfast_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// These tests keep the user docs (README.md, CONTRIBUTING.md, CHANGELOG.md
// and docs/*.md) true to the code: the test command's property-test counts,
// the lock kinds and errors they list, the README's program, the tests they
// name, and their links; and they keep the docs speaking of the product, not
// of its history. (acl_test.go does the same for the ACL line.)

// readDoc returns the Markdown file path as it is, and with every run of
// white space made one space, so that a statement reads the same however
// its lines wrap.
func readDoc(t *testing.T, path string) (raw, flat string) {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b), strings.Join(strings.Fields(string(b)), " ")
}

// benchReport is the benchmark report, which the bench module's run
// writes.
const benchReport = "docs/benchmarks.md"

// userDocs lists the user docs: README.md, CONTRIBUTING.md, CHANGELOG.md
// and every docs/*.md.
func userDocs(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md (%v)", err)
	}
	docs := []string{"README.md", "CONTRIBUTING.md", "CHANGELOG.md"}
	for _, p := range pages {
		docs = append(docs, filepath.ToSlash(p))
	}
	return docs
}

// TestDocsStateTheTestCommandsCounts: every test that scripts/test.sh runs
// with -rapid.checks is named in CONTRIBUTING.md with its count ("`TestX`
// 10,000 times"), and every such count it states is one test.sh runs. A new
// -rapid.checks line in test.sh fails this test until CONTRIBUTING.md
// describes it.
func TestDocsStateTheTestCommandsCounts(t *testing.T) {
	script, err := os.ReadFile("scripts/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	runs := rapidRuns(t, string(script))
	if len(runs) == 0 {
		t.Fatal("scripts/test.sh runs no test with -rapid.checks=N: has its form changed? (update rapidRuns)")
	}
	_, text := readDoc(t, "CONTRIBUTING.md")
	for name, checks := range runs {
		if want := "`" + name + "` " + thousands(checks) + " times"; !strings.Contains(text, want) {
			t.Errorf("scripts/test.sh runs %s with -rapid.checks=%d, but CONTRIBUTING.md does not say %q (in \"Running the tests\")", name, checks, want)
		}
	}
	for _, m := range regexp.MustCompile("`(Test\\w+)` ([0-9][0-9,]*) times").FindAllStringSubmatch(text, -1) {
		n, err := strconv.Atoi(strings.ReplaceAll(m[2], ",", ""))
		if err != nil || runs[m[1]] != n {
			t.Errorf("CONTRIBUTING.md says %q, but scripts/test.sh runs %s with -rapid.checks=%d (0: not at all)", m[0], m[1], runs[m[1]])
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

// TestDocsListTheLockKinds: the kinds README's "Choose a kind" table and
// the package doc's table list are exactly the package's lock kinds — its
// exported functions and Client methods that return a *Lock — and the
// Redisson row of docs/comparison.md names each of them.
func TestDocsListTheLockKinds(t *testing.T) {
	kinds := lockKinds(t)
	if len(kinds) == 0 {
		t.Fatal("found no function returning *Lock: has the API's form changed? (update lockKinds)")
	}
	methods := clientMethods(t)

	// README: the first column of each row of the table under "## Choose a kind".
	raw, _ := readDoc(t, "README.md")
	section := markdownSection(t, raw, "README.md", "## Choose a kind")
	var listed []string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
		for _, m := range regexp.MustCompile("`([A-Z]\\w*)`").FindAllStringSubmatch(first, -1) {
			switch {
			case slices.Contains(kinds, m[1]):
				listed = append(listed, m[1])
			case !slices.Contains(methods, m[1]):
				t.Errorf("README.md's kind table names `%s`, which is neither a lock kind nor a Client method", m[1])
			}
		}
	}
	if got := sortedSet(listed); !slices.Equal(got, kinds) {
		t.Errorf("README.md's kind table lists %v; the package's kinds are %v", got, kinds)
	}

	// doc.go: the first word of each line of the table that opens the
	// package doc ("Client.Lock  one holder ..."), continuation lines aside.
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "doc.go", nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	head, rest, _ := strings.Cut(doc, "\n# ")
	firstSection, _, _ := strings.Cut(rest, "\n# ")
	listed = nil
	for _, line := range strings.Split(head, "\n") {
		if !strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "\t ") {
			continue
		}
		word := strings.TrimPrefix(strings.Fields(line)[0], "Client.")
		if slices.Contains(kinds, word) {
			listed = append(listed, word)
		}
	}
	if got := sortedSet(listed); !slices.Equal(got, kinds) {
		t.Errorf("the package doc's kind table (doc.go) lists %v; the package's kinds are %v", got, kinds)
	}
	if !strings.Contains(head+firstSection, "WithWait") {
		t.Error("the package doc (doc.go) does not state the ctx-versus-WithWait rule by the end of its first section")
	}

	// docs/comparison.md: the Redisson row.
	raw, _ = readDoc(t, "docs/comparison.md")
	row := ""
	for _, line := range strings.Split(raw, "\n") {
		if strings.HasPrefix(line, "| **Redisson**") {
			row = line
		}
	}
	if row == "" {
		t.Fatal("docs/comparison.md's table has no Redisson row")
	}
	for _, k := range kinds {
		if !strings.Contains(row, "`"+k+"`") {
			t.Errorf("docs/comparison.md's Redisson row does not name the kind `%s`", k)
		}
	}
}

func sortedSet(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// markdownSection returns the part of a Markdown text from the heading line
// head to the next heading of the same or a higher level.
func markdownSection(t *testing.T, raw, file, head string) string {
	t.Helper()
	start := strings.Index(raw, "\n"+head+"\n")
	if start < 0 {
		t.Fatalf("%s has no %q heading", file, head)
	}
	section := raw[start+1:]
	level := head[:strings.Index(head, " ")+1] // "## "
	for i := len(head); i < len(section); {
		j := strings.Index(section[i:], "\n#")
		if j < 0 {
			break
		}
		i += j + 1
		if hashes, _, _ := strings.Cut(section[i:], " "); len(hashes) <= len(level)-1 && strings.Trim(hashes, "#") == "" {
			return section[:i]
		}
	}
	return section
}

// packageFuncs returns the function declarations of package holdfast's
// non-test files.
func packageFuncs(t *testing.T) []*ast.FuncDecl {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var fns []*ast.FuncDecl
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok {
				fns = append(fns, fn)
			}
		}
	}
	return fns
}

// lockKinds returns, sorted, the exported functions and *Client methods of
// package holdfast whose one result is a *Lock: the lock kinds.
func lockKinds(t *testing.T) []string {
	t.Helper()
	var kinds []string
	for _, fn := range packageFuncs(t) {
		if !fn.Name.IsExported() || fn.Type.Results == nil || len(fn.Type.Results.List) != 1 || !isPtrTo(fn.Type.Results.List[0].Type, "Lock") {
			continue
		}
		if fn.Recv != nil && !isPtrTo(fn.Recv.List[0].Type, "Client") {
			continue
		}
		kinds = append(kinds, fn.Name.Name)
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

// clientMethods returns the exported methods of *Client.
func clientMethods(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, fn := range packageFuncs(t) {
		if fn.Recv != nil && fn.Name.IsExported() && isPtrTo(fn.Recv.List[0].Type, "Client") {
			names = append(names, fn.Name.Name)
		}
	}
	return names
}

// TestDocsListEveryError: the error table of docs/locks.md names every
// exported error of errors.go, so that a new sentinel cannot go unlisted.
func TestDocsListEveryError(t *testing.T) {
	raw, _ := readDoc(t, "docs/locks.md")
	section := markdownSection(t, raw, "docs/locks.md", "## Errors")
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
			t.Errorf("docs/locks.md's error table (## Errors) has no row for %s", name)
		}
	}
}

// TestDocsLinksResolve: every link of a user doc to a section (#anchor), to
// a file of the repository, or to a section of one of its Markdown files,
// finds its target, so that moving a section cannot leave a "see …"
// pointing nowhere.
func TestDocsLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, doc := range userDocs(t) {
		raw, _ := readDoc(t, doc)
		for _, m := range link.FindAllStringSubmatch(raw, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			text, where := raw, doc
			if file != "" {
				where = path.Join(path.Dir(doc), file)
				st, err := os.Stat(filepath.FromSlash(where))
				if err != nil {
					t.Errorf("%s links to %s: %v", doc, target, err)
					continue
				}
				if st.IsDir() {
					if anchor != "" {
						t.Errorf("%s links to %s: an anchor in a directory", doc, target)
					}
					continue
				}
				b, err := os.ReadFile(filepath.FromSlash(where))
				if err != nil {
					t.Fatal(err)
				}
				text = string(b)
			}
			if anchor != "" && !slices.Contains(headingAnchors(text), anchor) {
				t.Errorf("%s links to %s, but %s has no heading with that anchor", doc, target, where)
			}
		}
	}
}

// TestREADMEIsAFrontPage: README.md stays a front page — at most 300 lines,
// with the install lines, the two set-up commands, a link to every other
// user doc and to the license — and its Go program is the quickstart
// program that the repository builds (examples/quickstart), so that it
// compiles.
func TestREADMEIsAFrontPage(t *testing.T) {
	raw, _ := readDoc(t, "README.md")
	if n := strings.Count(raw, "\n"); n > 300 {
		t.Errorf("README.md has %d lines; a front page keeps to 300 (move the detail to docs/)", n)
	}
	for _, want := range []string{
		"go get github.com/holdfast/holdfast@v",
		"go install github.com/holdfast/holdfast/cmd/holdfast@v",
		"holdfast demo",
		"./scripts/test.sh",
		"](LICENSE)",
	} {
		if !strings.Contains(raw, want) {
			t.Errorf("README.md does not contain %q", want)
		}
	}
	for _, doc := range userDocs(t) {
		if doc != "README.md" && !strings.Contains(raw, "]("+doc+")") {
			t.Errorf("README.md does not link to %s", doc)
		}
	}

	start := strings.Index(raw, "\n```go\n")
	if start < 0 {
		t.Fatal("README.md has no Go program")
	}
	program := raw[start+len("\n```go\n"):]
	program = program[:strings.Index(program, "\n```")+1]
	want, err := os.ReadFile(filepath.Join("examples", "quickstart", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if program != string(want) {
		t.Errorf("README.md's first Go block is not examples/quickstart/main.go as it is: copy the file into README (or the change into the file)\n--- README.md\n%s", program)
	}
}

// TestChangelogHasTheFirstRelease: CHANGELOG.md opens with an [Unreleased]
// section, followed by the 0.1.0 release.
func TestChangelogHasTheFirstRelease(t *testing.T) {
	raw, _ := readDoc(t, "CHANGELOG.md")
	var releases []string
	for _, line := range strings.Split(raw, "\n") {
		if strings.HasPrefix(line, "## [") {
			releases = append(releases, line)
		}
	}
	if len(releases) < 2 || releases[0] != "## [Unreleased]" || releases[len(releases)-1] != "## [0.1.0]" {
		t.Errorf("CHANGELOG.md's releases are %q; want ## [Unreleased] first and ## [0.1.0] last", releases)
	}
}

// TestDocsSpeakOfTheProduct: the user docs say what holdfast is, not how
// it came to be: no issue, round or stop numbers, no commit hashes, no
// documents outside the repository, no "used to" or "new in this version".
// docs/benchmarks.md, the report of one measured run, may name the commit
// it measured.
func TestDocsSpeakOfTheProduct(t *testing.T) {
	history := regexp.MustCompile(`(?i)\b(issue|round|stop) [0-9]+|\bDESIGN\.md|\bREFERENCE\.md|\bused to\b|new in this version`)
	hash := regexp.MustCompile(`\b[0-9a-f]*[a-f][0-9a-f]*[0-9][0-9a-f]*\b|\b[0-9a-f]*[0-9][0-9a-f]*[a-f][0-9a-f]*\b`)
	for _, doc := range userDocs(t) {
		raw, _ := readDoc(t, doc)
		for i, line := range strings.Split(raw, "\n") {
			if m := history.FindString(line); m != "" {
				t.Errorf("%s:%d: %q speaks of the project's history: %s", doc, i+1, m, line)
			}
			if doc == benchReport {
				continue
			}
			for _, w := range hash.FindAllString(line, -1) {
				if len(w) >= 7 && len(w) <= 40 {
					t.Errorf("%s:%d: %q looks like a commit hash: %s", doc, i+1, w, line)
				}
			}
		}
	}
}

// TestDocsNameRealTests: every test, benchmark and example a user doc names
// in backquotes (`TestX`, `BenchmarkX`, `ExampleX`) is a function of some
// _test.go file of the repository, so that a renamed or deleted test cannot
// leave a doc pointing at nothing.
func TestDocsNameRealTests(t *testing.T) {
	funcs := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Example)\w*)\(`)
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, "_test.go") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range decl.FindAllSubmatch(b, -1) {
				funcs[string(m[1])] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile("`((?:Test|Benchmark|Example)[A-Z_]\\w*)`")
	for _, doc := range userDocs(t) {
		raw, _ := readDoc(t, doc)
		for _, m := range named.FindAllStringSubmatch(raw, -1) {
			if !funcs[m[1]] {
				t.Errorf("%s names `%s`, which is no function of any _test.go file", doc, m[1])
			}
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

package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

const versionHelp = `usage: holdfast version   (or holdfast --version)

Print the version of holdfast this binary was built from, on one line: a release
(v1.2.3), a pseudo-version for a build from a checkout, or "(devel)" with the VCS
revision and time when the build stamped no version; then the Go version and
platform it was built with.
`

// modulePath is the module whose version `holdfast version` reports.
const modulePath = "github.com/holdfast/holdfast"

func versionMain(args []string, stdout, _ io.Writer) (int, error) {
	rest, err := parseArgs(newFlagSet("version"), args)
	if err != nil {
		return 0, err
	}
	if len(rest) > 0 {
		return 0, usageError{fmt.Sprintf("version: unexpected %q", rest[0])}
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, versionLine(bi))
	return 0, nil
}

// versionLine is one line: holdfast's version, then the Go toolchain and
// platform. bi may be nil (a binary built without module support).
func versionLine(bi *debug.BuildInfo) string {
	goVersion := runtime.Version()
	version := "(unknown)"
	if bi != nil {
		goVersion = bi.GoVersion
		version = moduleVersion(bi)
	}
	return fmt.Sprintf("holdfast %s %s %s/%s", version, goVersion, runtime.GOOS, runtime.GOARCH)
}

// moduleVersion is the holdfast module's version in bi: the main module's
// (go install ...@v1.2.3 stamps it), or the dependency's when holdfast is
// built into another module. A build from a checkout that stamped no
// version says "(devel)" with the VCS revision, its time, and "+dirty"
// when the work tree had changes.
func moduleVersion(bi *debug.BuildInfo) string {
	m := &bi.Main
	if m.Path != modulePath {
		m = nil
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				m = d
				break
			}
		}
	}
	switch {
	case m == nil:
		return "(unknown)"
	case m.Replace != nil && m.Replace.Version != "":
		return m.Replace.Version
	case m.Replace != nil:
		// Replaced by a directory: its code, not the required version's.
		return "(devel)"
	case m.Version != "" && m.Version != "(devel)":
		return m.Version
	case m != &bi.Main:
		// The VCS settings describe the main module's checkout, not
		// holdfast's.
		return "(devel)"
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	parts := []string{"(devel)"}
	if rev != "" {
		parts = append(parts, rev[:min(len(rev), 12)]+dirty)
	}
	if at != "" {
		parts = append(parts, at)
	}
	return strings.Join(parts, " ")
}

package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionCommand: `holdfast --version` and `holdfast version` print one
// line naming the build's holdfast version and Go version; extra arguments
// are a usage error.
func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		r := runHoldfast(t, args...)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("holdfast %q: exit %d, stderr %q", args, r.code, r.stderr)
		}
		// The test binary is built from this checkout: (devel), or a
		// pseudo-version when the toolchain stamps one.
		f := strings.Fields(r.stdout)
		if strings.Count(r.stdout, "\n") != 1 || len(f) < 4 || f[0] != "holdfast" ||
			!(f[1] == "(devel)" || strings.HasPrefix(f[1], "v")) ||
			f[len(f)-2] != runtime.Version() || f[len(f)-1] != runtime.GOOS+"/"+runtime.GOARCH {
			t.Fatalf("holdfast %q printed %q, want one line: holdfast VERSION %s %s/%s", args, r.stdout, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		}
	}
	if r := runHoldfast(t, "version", "extra"); r.code != exitUsage {
		t.Fatalf("holdfast version extra: exit %d, want %d", r.code, exitUsage)
	}
	if r := runHoldfast(t, "help", "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "usage: holdfast version") || strings.Contains(r.stdout, "--redis") {
		t.Fatalf("holdfast help version: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestModuleVersion: the version comes from the holdfast module wherever it
// sits in the build, and VCS settings only describe a main-module build.
func TestModuleVersion(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-11-27T03:17:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"installed", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.4.2"}}, "v1.4.2"},
		{"checkout", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}, Settings: vcs},
			"(devel) 0123456789ab+dirty 2026-11-27T03:17:00Z"},
		{"no vcs", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, "(devel)"},
		{"dependency", debug.BuildInfo{
			Main:     debug.Module{Path: "example.com/app", Version: "(devel)"},
			Deps:     []*debug.Module{{Path: "example.com/other", Version: "v9.0.0"}, {Path: modulePath, Version: "v1.4.2"}},
			Settings: vcs,
		}, "v1.4.2"},
		{"replaced dependency", debug.BuildInfo{
			Main:     debug.Module{Path: "example.com/app", Version: "(devel)"},
			Deps:     []*debug.Module{{Path: modulePath, Version: "v1.4.2", Replace: &debug.Module{Path: "../holdfast"}}},
			Settings: vcs,
		}, "(devel)"},
		{"missing", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}}, "(unknown)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := moduleVersion(&tc.bi); got != tc.want {
				t.Fatalf("moduleVersion = %q, want %q", got, tc.want)
			}
		})
	}
	if got := versionLine(nil); got != "holdfast (unknown) "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH {
		t.Fatalf("versionLine(nil) = %q", got)
	}
}

// Package buildinfo says which build of duckraft runs: what the Go
// toolchain stamped into the binary (the module's version, or the commit
// it was built from), so that a user, an operator and a metric can tell
// two builds apart.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// stamped is the version the build set (make build: -ldflags -X with git
// describe's answer); empty when it set none.
var stamped string

// Version is the build's version: the one make build stamped, else the
// module version when it was built as a released module, else the commit
// Go recorded ("abc1234", "+dirty" when the work tree had changes), else
// "devel".
func Version() string {
	if stamped != "" {
		return stamped
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return version(info)
}

func version(info *debug.BuildInfo) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	rev = rev[:min(len(rev), 12)]
	if dirty {
		rev += "+dirty"
	}
	return rev
}

// GoVersion is the Go toolchain that built the binary.
func GoVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return strings.TrimPrefix(info.GoVersion, "go")
}

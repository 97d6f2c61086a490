package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	proj "github.com/twpayne/go-proj/v11"

	"github.com/gobatch/gobatch/ring"
)

// version is the release; set with -ldflags "-X main.version=1.2.3".
var version = "0.1.0-dev"

func init() {
	register("version", "print version, ring layout version, Go version and build info", cmdVersion)
}

type versionInfo struct {
	Version       string            `json:"version"`
	LayoutVersion uint32            `json:"layout_version"`
	GoVersion     string            `json:"go_version"`
	Platform      string            `json:"platform"`
	PROJVersion   string            `json:"proj_version"` // the PROJ headers built against (the wheel bundles that library)
	Module        string            `json:"module,omitempty"`
	ModuleVersion string            `json:"module_version,omitempty"`
	Settings      map[string]string `json:"settings,omitempty"` // vcs.revision, -tags, CGO_ENABLED, ...
	Deps          map[string]string `json:"deps,omitempty"`
}

func buildVersionInfo() versionInfo {
	v := versionInfo{
		Version:       version,
		LayoutVersion: ring.LayoutVersion,
		GoVersion:     runtime.Version(),
		Platform:      runtime.GOOS + "/" + runtime.GOARCH,
		PROJVersion:   fmt.Sprintf("%d.%d.%d", proj.VersionMajor, proj.VersionMinor, proj.VersionPatch),
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Module, v.ModuleVersion = bi.Main.Path, bi.Main.Version
		v.Settings = map[string]string{}
		for _, s := range bi.Settings {
			v.Settings[s.Key] = s.Value
		}
		v.Deps = map[string]string{}
		for _, d := range bi.Deps {
			v.Deps[d.Path] = d.Version
		}
	}
	return v
}

func cmdVersion(args []string) int {
	fs := newFlagSet("version", "")
	asJSON := fs.Bool("json", false, "print machine-readable JSON")
	if _, code, ok := fs.parse(args); !ok {
		return code
	}
	v := buildVersionInfo()
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return exitFailure
		}
		return exitOK
	}
	fmt.Printf("shmloader %s\n", v.Version)
	fmt.Printf("ring layout version %d\n", v.LayoutVersion)
	fmt.Printf("%s %s\n", v.GoVersion, v.Platform)
	fmt.Printf("PROJ %s\n", v.PROJVersion)
	if v.Module != "" {
		fmt.Printf("module %s %s\n", v.Module, v.ModuleVersion)
	}
	for _, k := range []string{"vcs.revision", "vcs.time", "vcs.modified", "-race", "-tags", "CGO_ENABLED", "GOAMD64", "GOARM64"} {
		if s, ok := v.Settings[k]; ok {
			fmt.Printf("%s %s\n", k, s)
		}
	}
	return exitOK
}

package profilingreceiver

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readVersions parses versions.env (KEY=value lines, # comments).
func readVersions(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("versions.env")
	require.NoError(t, err)
	defer f.Close()
	out := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, "versions.env: %q is not KEY=value", line)
		out[k] = v
	}
	require.NoError(t, s.Err())
	for _, k := range []string{"COLLECTOR_VERSION", "COLLECTOR_STABLE_VERSION", "COLLECTOR_DIST_VERSION",
		"COLLECTOR_DIST_STABLE_VERSION", "COLLECTOR_OTLP_PROTO_VERSION", "COLLECTOR_RUST_OTLP_PROTO_CRATE"} {
		require.NotEmpty(t, out[k], "versions.env lacks %s", k)
	}
	return out
}

// release is one Collector release: its v0.x and its stable v1.x version.
type release struct{ beta, stable string }

// want is the pinned version of a Collector module of the release: v1.x
// for the stable modules, v0.x for the others.
func (r release) want(got string) string {
	if strings.HasPrefix(got, "v1.") {
		return r.stable
	}
	return r.beta
}

// collectorModule matches a Collector (core or contrib) module and version.
var collectorModule = regexp.MustCompile(`((?:go\.opentelemetry\.io/collector|github\.com/open-telemetry/opentelemetry-collector-contrib)(?:/[\w./-]+)?) (v\d+\.\d+\.\d+\S*)`)

// TestVersionsAgree checks that the module files, the OCB manifests and
// the Rust workspace use the versions pinned in versions.env: the Go side
// must decode what the Rust side encodes (see also the golden payload
// test). The full distribution (builder-config.yaml, go.mod) is at
// COLLECTOR_DIST_VERSION, whose reasons versions.env gives; the core-only
// one (builder-core.yaml, go.core.mod) at COLLECTOR_VERSION.
func TestVersionsAgree(t *testing.T) {
	v := readVersions(t)
	core := release{v["COLLECTOR_VERSION"], v["COLLECTOR_STABLE_VERSION"]}
	dist := release{v["COLLECTOR_DIST_VERSION"], v["COLLECTOR_DIST_STABLE_VERSION"]}

	files := map[string]release{
		"go.mod":                 dist,
		"../builder-config.yaml": dist,
		"go.core.mod":            core,
		"../builder-core.yaml":   core,
	}
	texts := map[string]string{}
	for name, r := range files {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		texts[name] = string(b)
		matches := collectorModule.FindAllStringSubmatch(string(b), -1)
		require.NotEmpty(t, matches, "%s names no Collector module", name)
		for _, m := range matches {
			assert.Equal(t, r.want(m[2]), m[2], "%s: %s", name, m[1])
		}
	}
	assert.Contains(t, texts["go.mod"], "go.opentelemetry.io/collector/pdata/pprofile "+dist.beta)
	assert.Contains(t, texts["go.core.mod"], "go.opentelemetry.io/collector/pdata/pprofile "+core.beta)
	// The core-only distribution has no contrib component.
	assert.NotContains(t, texts["../builder-core.yaml"], "opentelemetry-collector-contrib")
	for _, name := range []string{"../builder-config.yaml", "../builder-core.yaml"} {
		assert.Contains(t, texts[name], "cgo_enabled: true", name)
	}
	// Both module files declare the same requirements, at their releases.
	assert.Equal(t, requiredModules(texts["go.mod"]), requiredModules(texts["go.core.mod"]),
		"go.mod and go.core.mod require different modules")

	// Rust: the workspace requirement and the locked version of the crate
	// that generates the same proto.
	cargoToml, err := os.ReadFile("../Cargo.toml")
	require.NoError(t, err)
	req := regexp.MustCompile(`(?m)^opentelemetry-proto = \{ version = "([^"]+)"`).FindSubmatch(cargoToml)
	require.NotNil(t, req, "Cargo.toml: no opentelemetry-proto in [workspace.dependencies]")
	assert.Equal(t, v["COLLECTOR_RUST_OTLP_PROTO_CRATE"], string(req[1]), "Cargo.toml opentelemetry-proto")
	cargoLock, err := os.ReadFile("../Cargo.lock")
	require.NoError(t, err)
	locked := regexp.MustCompile(`name = "opentelemetry-proto"\nversion = "([^"]+)"`).FindSubmatch(cargoLock)
	require.NotNil(t, locked, "Cargo.lock: opentelemetry-proto is not locked")
	assert.True(t, strings.HasPrefix(string(locked[1]), v["COLLECTOR_RUST_OTLP_PROTO_CRATE"]+"."),
		"Cargo.lock has opentelemetry-proto %s, versions.env pins %s", locked[1], v["COLLECTOR_RUST_OTLP_PROTO_CRATE"])
}

// requiredModules are the direct requirements of a go.mod text, without
// versions.
func requiredModules(goMod string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^\t(\S+) v\S+$`).FindAllStringSubmatch(goMod, -1) {
		out = append(out, m[1])
	}
	return out
}

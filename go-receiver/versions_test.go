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
	for _, k := range []string{"COLLECTOR_VERSION", "COLLECTOR_STABLE_VERSION", "COLLECTOR_OTLP_PROTO_VERSION", "COLLECTOR_RUST_OTLP_PROTO_CRATE"} {
		require.NotEmpty(t, out[k], "versions.env lacks %s", k)
	}
	return out
}

// wantCollectorVersion is the pinned version of a Collector module: v1.x
// for the stable modules, v0.x for the others.
func wantCollectorVersion(v map[string]string, got string) string {
	if strings.HasPrefix(got, "v1.") {
		return v["COLLECTOR_STABLE_VERSION"]
	}
	return v["COLLECTOR_VERSION"]
}

// collectorModule matches a Collector (core or contrib) module and version.
var collectorModule = regexp.MustCompile(`((?:go\.opentelemetry\.io/collector|github\.com/open-telemetry/opentelemetry-collector-contrib)(?:/[\w./-]+)?) (v\d+\.\d+\.\d+\S*)`)

// TestVersionsAgree checks that go.mod, builder-config.yaml and the Rust
// workspace use the versions pinned in versions.env: the Go side must
// decode what the Rust side encodes (see also the golden payload test).
func TestVersionsAgree(t *testing.T) {
	v := readVersions(t)

	goMod, err := os.ReadFile("go.mod")
	require.NoError(t, err)
	builder, err := os.ReadFile("../builder-config.yaml")
	require.NoError(t, err)
	for name, text := range map[string]string{"go.mod": string(goMod), "builder-config.yaml": string(builder)} {
		matches := collectorModule.FindAllStringSubmatch(text, -1)
		require.NotEmpty(t, matches, "%s names no Collector module", name)
		for _, m := range matches {
			assert.Equal(t, wantCollectorVersion(v, m[2]), m[2], "%s: %s", name, m[1])
		}
	}
	assert.Contains(t, string(goMod), "go.opentelemetry.io/collector/pdata/pprofile "+v["COLLECTOR_VERSION"])
	assert.Contains(t, string(builder), "cgo_enabled: true")

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

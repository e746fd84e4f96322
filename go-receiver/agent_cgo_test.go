//go:build linux && cgo

package profilingreceiver

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// startTestAgent starts the library with cfg (validated first). When the
// profiler cannot start here (no BPF, not root) the test is skipped, except
// under CI=true, where that fails; a configuration the library refuses
// always fails.
func startTestAgent(t *testing.T, cfg *Config) agent {
	t.Helper()
	require.NoError(t, cfg.Validate())
	text, err := cfg.agentJSON()
	require.NoError(t, err)
	a, err := startNativeAgent(text)
	if err != nil {
		require.NotContains(t, err.Error(), "invalid configuration")
		require.NotEqual(t, "true", os.Getenv("CI"), "CI: %v", err)
		t.Skipf("the profiler cannot start here: %v", err)
	}
	return a
}

// eachBatch pulls a stopped agent's batches up to the last, handing each
// one, decoded, to f (nil: they are only drained).
func eachBatch(t *testing.T, a agent, f func(pprofile.Profiles)) {
	t.Helper()
	for {
		b, status, err := a.nextBatch(pullTimeout)
		require.NoError(t, err)
		if status == batchStopped {
			return
		}
		if status != batchReady || f == nil {
			continue
		}
		pd, err := decodeProfiles(b)
		require.NoError(t, err)
		f(pd)
	}
}

// The C ABI's error path: bad JSON comes back as an error carrying the
// library's message (read on the same OS thread).
func TestNativeStartWithBadJSON(t *testing.T) {
	a, err := startNativeAgent("{not json")
	require.Nil(t, a)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "invalid configuration: invalid configuration JSON")
}

func TestNativeStartWithUnknownField(t *testing.T) {
	_, err := startNativeAgent(`{"samples_per_secnd": 20}`)
	require.ErrorContains(t, err, "unknown field `samples_per_secnd`")
}

// off_cpu_threshold reaches the library and turns off-CPU profiling on:
// this test process's own threads switch out while it runs, and the
// off-CPU program counts them. Under CI=true the profiler must start.
func TestNativeRunsOffCPUProfiling(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Pids = []int{os.Getpid()}
	cfg.OffCPUThreshold = 1
	a := startTestAgent(t, cfg)
	for i := 0; i < 20; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, a.stop())
	// The last interval's batch carries off_cpu/nanoseconds profiles.
	offCPUSamples := 0
	eachBatch(t, a, func(pd pprofile.Profiles) {
		strs := pd.Dictionary().StringTable()
		for i := 0; i < pd.ResourceProfiles().Len(); i++ {
			sps := pd.ResourceProfiles().At(i).ScopeProfiles()
			for j := 0; j < sps.Len(); j++ {
				profiles := sps.At(j).Profiles()
				for k := 0; k < profiles.Len(); k++ {
					p := profiles.At(k)
					if strs.At(int(p.SampleType().TypeStrindex())) == "off_cpu" {
						assert.Equal(t, "nanoseconds", strs.At(int(p.SampleType().UnitStrindex())))
						offCPUSamples += p.Samples().Len()
					}
				}
			}
		}
	})
	assert.Positive(t, offCPUSamples, "off-CPU samples in the batches")
	warnings, err := a.warnings()
	require.NoError(t, err)
	for _, w := range warnings {
		assert.NotContains(t, w, "off-CPU", "off-CPU profiling runs")
	}
	text, err := a.stats()
	require.NoError(t, err)
	var stats map[string]any
	require.NoError(t, json.Unmarshal([]byte(text), &stats))
	assert.Greater(t, stats["off_cpu_switches"], 0.0, "%s", text)
	assert.Greater(t, stats["off_cpu_sampled"], 0.0, "this process's threads slept: %s", text)
	a.free()
}

// The JSON the receiver writes is accepted by the Rust AgentConfig: the
// start either succeeds or fails for a reason other than the
// configuration (and under CI=true it succeeds).
func TestNativeAcceptsTheReceiversJSON(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Pids = []int{1}
	a := startTestAgent(t, cfg)
	require.NoError(t, a.stop())
	eachBatch(t, a, nil)
	warnings, err := a.warnings()
	require.NoError(t, err)
	t.Logf("warnings: %q", warnings)
	stats, err := a.stats()
	require.NoError(t, err)
	assert.Contains(t, stats, `"samples"`)
	a.free()
}

// libraryInterpreters is the library's list of interpreter unwinders
// (runtime_names() in crates/interpreters/src/lib.rs): every name of it is
// accepted in disabled_interpreters (all of them switched off at once), and
// the names the library lists when it refuses an unknown one are exactly
// these.
func TestLibraryInterpretersAreTheLibrarys(t *testing.T) {
	_, err := startNativeAgent(`{"disabled_interpreters": ["no-such-runtime"]}`)
	require.Error(t, err)
	m := regexp.MustCompile(`unknown interpreter "no-such-runtime" \(known: ([^)]*)\)`).FindStringSubmatch(err.Error())
	require.NotNil(t, m, "%v", err)
	known := strings.Split(m[1], ", ")
	ours := make([]string, 0, len(libraryInterpreters))
	for name := range libraryInterpreters {
		ours = append(ours, name)
	}
	sort.Strings(known)
	sort.Strings(ours)
	assert.Equal(t, known, ours)

	cfg := createDefaultConfig()
	cfg.Pids = []int{os.Getpid()}
	cfg.Tracers = "native"
	require.Equal(t, ours, cfg.unwinderSelection().disabled)
	a := startTestAgent(t, cfg)
	require.NoError(t, a.stop())
	eachBatch(t, a, nil)
	a.free()
}

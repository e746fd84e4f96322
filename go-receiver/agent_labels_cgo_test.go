//go:build linux && cgo

package profilingreceiver

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// labelsHelperEnv makes the test binary, run again as a child, burn CPU
// under pprof labels (TestLabelsHelperProcess) instead of testing.
const labelsHelperEnv = "EP_GO_LABELS_HELPER"

//go:noinline
func labelledLeaf(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i * i
	}
	return s
}

var labelsSink int

// Not a test: the child process of TestNativeEnvVarAndGoLabelReachPdata.
func TestLabelsHelperProcess(t *testing.T) {
	if os.Getenv(labelsHelperEnv) != "1" {
		t.Skip("the child of TestNativeEnvVarAndGoLabelReachPdata")
	}
	runtime.LockOSThread()
	deadline := time.Now().Add(20 * time.Second)
	pprof.Do(context.Background(), pprof.Labels("request", "r1"), func(context.Context) {
		for time.Now().Before(deadline) {
			labelsSink += labelledLeaf(1 << 20)
		}
	})
}

// An environment variable named by include_env_vars and a Go pprof label
// reach the profiles as pdata reads them: the resource attribute
// process.environment_variable.EP_LABELS_TEST_VAR, and the sample
// attribute process.context.label.request on the samples of the labelled
// goroutine. The profiled process is this test binary run again (a cgo
// Go program, the variable in its environment from the start). Under
// CI=true the profiler must start.
func TestNativeEnvVarAndGoLabelReachPdata(t *testing.T) {
	child := exec.Command(os.Args[0], "-test.run=^TestLabelsHelperProcess$")
	child.Env = append(os.Environ(), labelsHelperEnv+"=1", "EP_LABELS_TEST_VAR=blue-42")
	require.NoError(t, child.Start())
	defer func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	}()

	cfg := createDefaultConfig()
	cfg.Pids = []int{child.Process.Pid}
	cfg.SamplesPerSecond = 99
	cfg.IncludeEnvVars = "EP_LABELS_TEST_VAR"
	a := startTestAgent(t, cfg)
	time.Sleep(4 * time.Second)
	require.NoError(t, a.stop())

	envSeen, labelled, samples := false, 0, 0
	eachBatch(t, a, func(pd pprofile.Profiles) {
		e, l, s := envAndLabels(pd, "EP_LABELS_TEST_VAR", "request")
		envSeen = envSeen || e == "blue-42"
		labelled += l["r1"]
		for v, n := range l {
			assert.Equal(t, "r1", v, "%d samples with request=%q", n, v)
		}
		samples += s
	})
	a.free()
	t.Logf("%d of %d samples carry process.context.label.request=r1", labelled, samples)
	assert.True(t, envSeen, "process.environment_variable.EP_LABELS_TEST_VAR = blue-42 in a resource")
	require.Positive(t, samples)
	// The child spends its time in the labelled loop; its other
	// threads (GC, sysmon) carry no labels.
	assert.GreaterOrEqual(t, float64(labelled), 0.8*float64(samples),
		"%d of %d samples carry process.context.label.request=r1", labelled, samples)
}

// The value of the env var's resource attribute (last seen), the
// sample counts by value of the label's sample attribute, and the
// sample count, of every profile in pd.
func envAndLabels(pd pprofile.Profiles, envVar, label string) (string, map[string]int, int) {
	dict := pd.Dictionary()
	strs := dict.StringTable()
	attrs := dict.AttributeTable()
	env, labels, samples := "", map[string]int{}, 0
	for i := 0; i < pd.ResourceProfiles().Len(); i++ {
		rp := pd.ResourceProfiles().At(i)
		if v, ok := rp.Resource().Attributes().Get("process.environment_variable." + envVar); ok {
			env = v.Str()
		}
		sps := rp.ScopeProfiles()
		for j := 0; j < sps.Len(); j++ {
			profiles := sps.At(j).Profiles()
			for k := 0; k < profiles.Len(); k++ {
				p := profiles.At(k)
				for s := 0; s < p.Samples().Len(); s++ {
					sample := p.Samples().At(s)
					count := 1
					if sample.Values().Len() > 0 {
						count = int(sample.Values().At(0))
					}
					samples += count
					idx := sample.AttributeIndices()
					for a := 0; a < idx.Len(); a++ {
						attr := attrs.At(int(idx.At(a)))
						if strs.At(int(attr.KeyStrindex())) == "process.context.label."+label {
							labels[attr.Value().Str()] += count
						}
					}
				}
			}
		}
	}
	return env, labels, samples
}

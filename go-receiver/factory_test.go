package profilingreceiver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/collector/receiver/xreceiver"
)

func TestFactoryTypeAndStability(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, component.MustNewType("profiling"), f.Type())
	xf, ok := f.(xreceiver.Factory)
	require.True(t, ok, "the factory makes profiles receivers")
	assert.Equal(t, component.StabilityLevelAlpha, xf.ProfilesStability())
	assert.Equal(t, component.StabilityLevelUndefined, f.TracesStability())
}

func TestFactoryCreatesProfilesReceiver(t *testing.T) {
	f := NewFactory().(xreceiver.Factory)
	r, err := f.CreateProfiles(context.Background(), receivertest.NewNopSettings(typeStr),
		f.CreateDefaultConfig(), new(consumertest.ProfilesSink))
	require.NoError(t, err)
	require.NotNil(t, r)
	// Shutdown without Start is allowed (the Collector does it when
	// another component fails to start).
	require.NoError(t, r.Shutdown(context.Background()))
}

func TestFactoryRejectsOtherSignals(t *testing.T) {
	f := NewFactory()
	_, err := f.CreateTraces(context.Background(), receivertest.NewNopSettings(typeStr),
		f.CreateDefaultConfig(), consumertest.NewNop())
	require.Error(t, err)
}

// With the real library: either the profiler starts (root, BPF) and
// shuts down cleanly, or Start fails with the library's reason; never a
// crash. Without cgo the stub's message explains the build.
func TestNativeStartFailsCleanlyOrRuns(t *testing.T) {
	f := NewFactory().(xreceiver.Factory)
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.ReporterInterval = 200_000_000 // 200ms
	sink := new(consumertest.ProfilesSink)
	r, err := f.CreateProfiles(context.Background(), receivertest.NewNopSettings(typeStr), cfg, sink)
	require.NoError(t, err)
	err = r.Start(context.Background(), componenttest.NewNopHost())
	if err != nil {
		t.Logf("start failed cleanly: %v", err)
		assert.Contains(t, err.Error(), "profiling receiver: ")
		assert.NotContains(t, err.Error(), "invalid configuration", "Go and Rust must agree on the configuration")
	}
	require.NoError(t, r.Shutdown(context.Background()))
}

package profilingreceiver

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// fakeAgent plays the library: it hands out queued batches, then reports
// STOPPED once stop was called and the queue is empty.
type fakeAgent struct {
	mu       sync.Mutex
	batches  [][]byte
	stopped  bool
	freed    bool
	stopErr  error
	blockFor time.Duration // each nextBatch call sleeps this long
	calls    int
	warns    []string
	// statsJSON is what stats returns (`{"samples":4}` when empty).
	statsJSON string
}

func (a *fakeAgent) nextBatch(timeout time.Duration) ([]byte, batchStatus, error) {
	time.Sleep(a.blockFor)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	if a.freed {
		panic("nextBatch after free")
	}
	if len(a.batches) > 0 {
		b := a.batches[0]
		a.batches = a.batches[1:]
		return b, batchReady, nil
	}
	if a.stopped {
		return nil, batchStopped, nil
	}
	a.mu.Unlock()
	time.Sleep(min(timeout, 10*time.Millisecond))
	a.mu.Lock()
	return nil, batchTimeout, nil
}

func (a *fakeAgent) stats() (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.freed {
		panic("stats after free")
	}
	if a.statsJSON == "" {
		return `{"samples":4}`, nil
	}
	return a.statsJSON, nil
}

func (a *fakeAgent) warnings() ([]string, error) { return a.warns, nil }

func (a *fakeAgent) stop() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopped = true
	return a.stopErr
}

func (a *fakeAgent) free() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.freed = true
}

func goldenBytes(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(goldenPath)
	require.NoError(t, err)
	return b
}

func newTestReceiver(t *testing.T, sink *consumertest.ProfilesSink, a *fakeAgent, startErr error) (*profilingReceiver, *string) {
	t.Helper()
	var gotJSON string
	r, err := newReceiver(createDefaultConfig(), receivertest.NewNopSettings(typeStr), sink,
		func(configJSON string) (agent, error) {
			gotJSON = configJSON
			if startErr != nil {
				return nil, startErr
			}
			return a, nil
		})
	require.NoError(t, err)
	return r, &gotJSON
}

func TestBatchesReachTheConsumer(t *testing.T) {
	sink := new(consumertest.ProfilesSink)
	a := &fakeAgent{batches: [][]byte{goldenBytes(t), goldenBytes(t)}}
	r, gotJSON := newTestReceiver(t, sink, a, nil)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	assert.Contains(t, *gotJSON, `"otlp_batches":true`)

	require.Eventually(t, func() bool { return len(sink.AllProfiles()) == 2 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, 10, sink.SampleCount(), "2 golden batches of 5 samples")
	first := sink.AllProfiles()[0]
	pid, ok := first.ResourceProfiles().At(0).Resource().Attributes().Get("process.pid")
	require.True(t, ok)
	assert.Equal(t, int64(1234), pid.Int())

	require.NoError(t, r.Shutdown(context.Background()))
	assert.True(t, a.stopped)
	assert.True(t, a.freed)
	// Idempotent.
	require.NoError(t, r.Shutdown(context.Background()))
}

func TestShutdownDeliversTheLastBatch(t *testing.T) {
	sink := new(consumertest.ProfilesSink)
	a := &fakeAgent{}
	r, _ := newTestReceiver(t, sink, a, nil)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	// The final interval's batch appears as the agent stops.
	a.mu.Lock()
	a.batches = append(a.batches, goldenBytes(t))
	a.mu.Unlock()
	require.NoError(t, r.Shutdown(context.Background()))
	assert.Equal(t, 1, len(sink.AllProfiles()))
	assert.True(t, a.freed)
}

func TestWarningsAreLogged(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	set := receivertest.NewNopSettings(typeStr)
	set.Logger = zap.New(core)
	a := &fakeAgent{warns: []string{"kernel frames will not be named: no kallsyms"}}
	r, err := newReceiver(createDefaultConfig(), set, new(consumertest.ProfilesSink),
		func(string) (agent, error) { return a, nil })
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, r.Shutdown(context.Background()))
	require.Equal(t, 1, logs.FilterMessage("profiler: kernel frames will not be named: no kallsyms").Len())
}

// Interpreter unwinders the library has are switched off as asked; what it
// cannot apply (Go is always unwound, dotnet is not unwound at all) is
// warned about once, naming what is always on.
func TestUnappliedUnwinderSelectionIsLoggedTruthfully(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	set := receivertest.NewNopSettings(typeStr)
	set.Logger = zap.New(core)
	cfg := createDefaultConfig()
	cfg.Tracers = "python,hotspot,dotnet"
	cfg.Interpreters.Python.Disabled = true
	var given string
	r, err := newReceiver(cfg, set, new(consumertest.ProfilesSink),
		func(config string) (agent, error) { given = config; return &fakeAgent{}, nil })
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, r.Shutdown(context.Background()))
	assert.Contains(t, given, `"disabled_interpreters":["beam","perl","php","python","ruby","v8"]`)
	warned := logs.FilterMessage("unwinder settings not applied: the profiler has no such unwinder, " +
		"and always unwinds kernel, native (C, C++, Rust) and Go frames").All()
	require.Len(t, warned, 1, "%v", logs.All())
	assert.Equal(t, []any{"tracers: dotnet", "tracers: go left out"}, warned[0].ContextMap()["settings"])
	assert.Zero(t, logs.FilterMessageSnippet("native and kernel code only").Len())

	// The defaults select everything: no warning.
	core, logs = observer.New(zap.WarnLevel)
	set.Logger = zap.New(core)
	r, err = newReceiver(createDefaultConfig(), set, new(consumertest.ProfilesSink),
		func(string) (agent, error) { return &fakeAgent{}, nil })
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, r.Shutdown(context.Background()))
	assert.Zero(t, logs.FilterMessageSnippet("not applied").Len(), "%v", logs.All())
}

func TestUndecodableBatchIsDroppedNotFatal(t *testing.T) {
	sink := new(consumertest.ProfilesSink)
	a := &fakeAgent{batches: [][]byte{{0xff, 0xff, 0xff}, goldenBytes(t)}}
	r, _ := newTestReceiver(t, sink, a, nil)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	require.Eventually(t, func() bool { return len(sink.AllProfiles()) == 1 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, r.Shutdown(context.Background()))
	assert.Equal(t, uint64(1), r.decodeErrors.Load())
	assert.Equal(t, uint64(2), r.batches.Load())
}

func TestConsumerErrorIsCountedNotFatal(t *testing.T) {
	a := &fakeAgent{batches: [][]byte{goldenBytes(t), goldenBytes(t)}}
	tel := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tel.Shutdown(context.Background())) }()
	set := receivertest.NewNopSettings(typeStr)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	r, err := newReceiver(createDefaultConfig(), set,
		consumertest.NewErr(errors.New("pipeline full")),
		func(string) (agent, error) { return a, nil })
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	require.Eventually(t, func() bool { return r.consumeErrors.Load() == 2 }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, r.Shutdown(context.Background()))
	// The golden payload holds 5 samples (4 on-CPU, 1 off-CPU).
	assert.Equal(t, int64(10), sumMetric(t, tel, "otelcol_receiver_refused_profile_samples"))
}

// sumMetric is the value of a counter the receiver recorded.
func sumMetric(t *testing.T, tel *componenttest.Telemetry, name string) int64 {
	t.Helper()
	m, err := tel.GetMetric(name)
	require.NoError(t, err)
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a sum: %T", name, m.Data)
	var total int64
	for _, dp := range sum.DataPoints {
		total += dp.Value
	}
	return total
}

// Accepted samples show in the Collector's receiver metrics.
func TestAcceptedSamplesAreCounted(t *testing.T) {
	tel := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tel.Shutdown(context.Background())) }()
	set := receivertest.NewNopSettings(typeStr)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	sink := new(consumertest.ProfilesSink)
	a := &fakeAgent{batches: [][]byte{goldenBytes(t)}}
	r, err := newReceiver(createDefaultConfig(), set, sink, func(string) (agent, error) { return a, nil })
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, r.Shutdown(context.Background()))
	assert.Equal(t, int64(5), sumMetric(t, tel, "otelcol_receiver_accepted_profile_samples"))
}

func TestStartErrorIsReturned(t *testing.T) {
	r, _ := newTestReceiver(t, new(consumertest.ProfilesSink), nil, errors.New("the profiler could not start: no BPF"))
	err := r.Start(context.Background(), componenttest.NewNopHost())
	require.EqualError(t, err, "profiling receiver: the profiler could not start: no BPF"+
		" (set error_mode: ignore to run the Collector without profiling)")
	require.NoError(t, r.Shutdown(context.Background()))
}

// error_mode: ignore keeps the Collector up when the profiler cannot
// start: Start succeeds, logs why, and the profiler is not claimed.
func TestStartErrorIsLoggedWithErrorModeIgnore(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	set := receivertest.NewNopSettings(typeStr)
	set.Logger = zap.New(core)
	cfg := createDefaultConfig()
	cfg.ErrorMode = ErrorModeIgnore
	r, err := newReceiver(cfg, set, new(consumertest.ProfilesSink),
		func(string) (agent, error) { return nil, errors.New("loading BPF programs: operation not permitted") })
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	entries := logs.FilterMessage("the profiler could not start; continuing without profiling (error_mode: ignore)").All()
	require.Len(t, entries, 1)
	assert.Equal(t, zap.ErrorLevel, entries[0].Level)
	assert.Equal(t, "loading BPF programs: operation not permitted", entries[0].ContextMap()["error"])
	require.NoError(t, r.Shutdown(context.Background()))

	// Nothing holds the profiler: another receiver may start one.
	other, _ := newTestReceiver(t, new(consumertest.ProfilesSink), &fakeAgent{}, nil)
	require.NoError(t, other.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, other.Shutdown(context.Background()))
}

// Each accepted-but-not-applied key is named in exactly one warning.
func TestNotAppliedKeysWarnOnce(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	set := receivertest.NewNopSettings(typeStr)
	set.Logger = zap.New(core)
	cfg := createDefaultConfig()
	cfg.VerboseMode = true
	cfg.SendErrorFrames = true
	r, err := newReceiver(cfg, set, new(consumertest.ProfilesSink),
		func(string) (agent, error) { return &fakeAgent{}, nil })
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, r.Shutdown(context.Background()))
	entries := logs.FilterMessage("configuration key accepted for compatibility with the reference receiver but not applied").All()
	var keys []string
	for _, e := range entries {
		keys = append(keys, e.ContextMap()["key"].(string))
	}
	assert.Equal(t, []string{"send_error_frames", "verbose_mode"}, keys)
}

func TestOneProfilerPerCollector(t *testing.T) {
	first, _ := newTestReceiver(t, new(consumertest.ProfilesSink), &fakeAgent{}, nil)
	require.NoError(t, first.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { _ = first.Shutdown(context.Background()) })

	set := receivertest.NewNopSettings(typeStr)
	set.ID = component.NewIDWithName(typeStr, "second")
	second, err := newReceiver(createDefaultConfig(), set, new(consumertest.ProfilesSink),
		func(string) (agent, error) { return &fakeAgent{}, nil })
	require.NoError(t, err)
	err = second.Start(context.Background(), componenttest.NewNopHost())
	require.ErrorContains(t, err, `the profiler already runs for receiver "`+first.set.ID.String()+`"`)
	require.NoError(t, second.Shutdown(context.Background()))

	// Once the first stopped, another may start.
	require.NoError(t, first.Shutdown(context.Background()))
	third, _ := newTestReceiver(t, new(consumertest.ProfilesSink), &fakeAgent{}, nil)
	require.NoError(t, third.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, third.Shutdown(context.Background()))
}

func TestStartRejectsInvalidConfig(t *testing.T) {
	r, _ := newTestReceiver(t, new(consumertest.ProfilesSink), &fakeAgent{}, nil)
	r.cfg.SamplesPerSecond = 0
	err := r.Start(context.Background(), componenttest.NewNopHost())
	require.ErrorContains(t, err, "samples_per_second must be between 1 and 10000")
}

func TestStopErrorIsReported(t *testing.T) {
	a := &fakeAgent{stopErr: errors.New("the profiler failed while running: ring buffer")}
	r, _ := newTestReceiver(t, new(consumertest.ProfilesSink), a, nil)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	err := r.Shutdown(context.Background())
	require.EqualError(t, err, "profiling receiver: the profiler failed while running: ring buffer")
	assert.True(t, a.freed)
}

// A shutdown that runs out of time must not free the handle while the
// puller may still be inside the library.
func TestShutdownTimeoutLeaksRatherThanFrees(t *testing.T) {
	a := &fakeAgent{blockFor: 300 * time.Millisecond}
	r, _ := newTestReceiver(t, new(consumertest.ProfilesSink), a, nil)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := r.Shutdown(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	a.mu.Lock()
	assert.False(t, a.freed)
	a.mu.Unlock()
	<-r.done
}

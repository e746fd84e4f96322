package profilingreceiver // import "ebpf-profiler/go-receiver"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/xconsumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
)

// pullTimeout bounds one wait for a batch, and so how long the puller
// takes to notice a shutdown.
const pullTimeout = 250 * time.Millisecond

// batchStatus is what one pull returned.
type batchStatus int

const (
	batchReady batchStatus = iota
	batchTimeout
	batchStopped
)

// agent is the running profiler behind the C ABI (or a fake in tests).
// nextBatch may run concurrently with stop and stats; free runs last.
type agent interface {
	nextBatch(timeout time.Duration) ([]byte, batchStatus, error)
	stats() (string, error)
	// warnings are problems that did not prevent the start.
	warnings() ([]string, error)
	stop() error
	free()
}

// agentStarter starts a profiler from the C ABI's JSON configuration.
type agentStarter func(configJSON string) (agent, error)

type profilingReceiver struct {
	cfg   *Config
	set   receiver.Settings
	next  xconsumer.Profiles
	start agentStarter
	// obs records the Collector's receiver metrics
	// (otelcol_receiver_{accepted,refused,failed}_profile_samples).
	obs *receiverhelper.ObsReport

	// agentMu orders the metrics callback's stats reads with the
	// handle's free at shutdown.
	agentMu sync.Mutex
	agent   agent
	// metrics is the registration of the profiler's own figures.
	metrics metric.Registration
	// ctx is the context of ConsumeProfiles calls; cancelled when a
	// shutdown runs out of time.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	batches       atomic.Uint64
	decodeErrors  atomic.Uint64
	consumeErrors atomic.Uint64
	shutdownOnce  sync.Once
	shutdownErr   error
}

// staticlibSHA256 is the SHA-256 of the Rust library the receiver was
// linked with, set by the link flags of mk/collector.mk (a new library
// changes them, so Go relinks instead of reusing a cached binary).
var staticlibSHA256 = "unknown"

// transport names where the receiver's data comes from in its metrics.
const transport = "ebpf"

// running is held by the receiver whose profiler runs: the profiler samples
// the whole machine, so a second one in the same Collector would only
// double the overhead (and its BPF programs).
var running struct {
	sync.Mutex
	id string
}

func claimProfiler(id string) error {
	running.Lock()
	defer running.Unlock()
	if running.id != "" {
		return fmt.Errorf("the profiler already runs for receiver %q; configure one profiling receiver per Collector", running.id)
	}
	running.id = id
	return nil
}

func releaseProfiler(id string) {
	running.Lock()
	defer running.Unlock()
	if running.id == id {
		running.id = ""
	}
}

func newReceiver(cfg *Config, set receiver.Settings, next xconsumer.Profiles, start agentStarter) (*profilingReceiver, error) {
	obs, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{
		ReceiverID:             set.ID,
		Transport:              transport,
		LongLivedCtx:           true,
		ReceiverCreateSettings: set,
	})
	if err != nil {
		return nil, fmt.Errorf("profiling receiver: %w", err)
	}
	return &profilingReceiver{cfg: cfg, set: set, next: next, start: start, obs: obs}, nil
}

// Start starts the profiler and the goroutine that pulls its batches.
func (r *profilingReceiver) Start(_ context.Context, _ component.Host) error {
	if err := r.cfg.Validate(); err != nil {
		return fmt.Errorf("profiling receiver: %w", err)
	}
	if unapplied := r.cfg.unwinderSelection().unapplied; len(unapplied) > 0 {
		r.set.Logger.Warn("unwinder settings not applied: the profiler has no such unwinder, and always unwinds "+alwaysOn,
			zap.Strings("settings", unapplied))
	}
	for _, key := range r.cfg.notApplied() {
		r.set.Logger.Warn("configuration key accepted for compatibility with the reference receiver but not applied",
			zap.String("key", key))
	}
	configJSON, err := r.cfg.agentJSON()
	if err != nil {
		return fmt.Errorf("profiling receiver: %w", err)
	}
	if err := claimProfiler(r.set.ID.String()); err != nil {
		return fmt.Errorf("profiling receiver: %w", err)
	}
	a, err := r.start(configJSON)
	if err != nil {
		releaseProfiler(r.set.ID.String())
		if r.cfg.ErrorMode == ErrorModeIgnore {
			// A node where BPF cannot load keeps its Collector (and
			// its other pipelines) running.
			r.set.Logger.Error("the profiler could not start; continuing without profiling (error_mode: ignore)",
				zap.Error(err))
			return nil
		}
		return fmt.Errorf("profiling receiver: %w (set error_mode: ignore to run the Collector without profiling)", err)
	}
	r.agentMu.Lock()
	r.agent = a
	r.agentMu.Unlock()
	meter := r.set.TelemetrySettings.MeterProvider.Meter("ebpf-profiler/go-receiver")
	if reg, err := registerStatMetrics(meter, r.liveStats); err != nil {
		r.set.Logger.Warn("the profiler's own metrics are not available", zap.Error(err))
	} else {
		r.metrics = reg
	}
	if warnings, err := a.warnings(); err != nil {
		r.set.Logger.Warn("could not read the profiler's warnings", zap.Error(err))
	} else {
		for _, w := range warnings {
			r.set.Logger.Warn("profiler: " + w)
		}
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.done = make(chan struct{})
	go r.pull()
	r.set.Logger.Info("profiler started",
		zap.String("library_sha256", staticlibSHA256),
		zap.Int("samples_per_second", r.cfg.SamplesPerSecond),
		zap.Duration("reporter_interval", r.cfg.ReporterInterval))
	return nil
}

// liveStats reads the running profiler's stats for the metrics callback.
func (r *profilingReceiver) liveStats() (string, bool, error) {
	r.agentMu.Lock()
	defer r.agentMu.Unlock()
	if r.agent == nil {
		return "", false, nil
	}
	stats, err := r.agent.stats()
	return stats, err == nil, err
}

// pull hands every batch to the next consumer until the agent reports
// that it stopped and was drained.
func (r *profilingReceiver) pull() {
	defer close(r.done)
	for {
		b, status, err := r.agent.nextBatch(pullTimeout)
		if err != nil {
			r.set.Logger.Error("pulling a profile batch failed", zap.Error(err))
			// An error here is a bug in the library; do not spin on it.
			time.Sleep(pullTimeout)
			continue
		}
		switch status {
		case batchReady:
			r.deliver(b)
		case batchStopped:
			return
		}
	}
}

func (r *profilingReceiver) deliver(b []byte) {
	r.batches.Add(1)
	profiles, err := decodeProfiles(b)
	if err != nil {
		r.decodeErrors.Add(1)
		r.set.Logger.Error("dropping a profile batch that does not decode", zap.Error(err), zap.Int("bytes", len(b)))
		return
	}
	ctx := r.obs.StartProfilesOp(r.ctx)
	err = r.next.ConsumeProfiles(ctx, profiles)
	r.obs.EndProfilesOp(ctx, "otlp_proto", profiles.SampleCount(), err)
	if err != nil {
		r.consumeErrors.Add(1)
		r.set.Logger.Warn("the pipeline refused a profile batch", zap.Error(err),
			zap.Int("samples", profiles.SampleCount()))
	}
}

// Shutdown stops the profiler, lets the puller deliver the last batch and
// frees the library's handle. Safe to call without a successful Start.
func (r *profilingReceiver) Shutdown(ctx context.Context) error {
	r.shutdownOnce.Do(func() { r.shutdownErr = r.shutdown(ctx) })
	return r.shutdownErr
}

func (r *profilingReceiver) shutdown(ctx context.Context) error {
	if r.agent == nil {
		return nil
	}
	stopErr := r.agent.stop()
	// Sampling has stopped: another receiver may start a profiler.
	defer releaseProfiler(r.set.ID.String())
	select {
	case <-r.done:
	case <-ctx.Done():
		r.cancel()
		// The puller may still be inside the library: leaking the handle
		// is safe, freeing it under the puller's feet is not.
		return errors.Join(stopErr, fmt.Errorf("profiling receiver: shutdown: %w", ctx.Err()))
	}
	r.cancel()
	if stats, err := r.agent.stats(); err == nil {
		r.set.Logger.Info("profiler stopped", zap.String("stats", stats),
			zap.Uint64("batches", r.batches.Load()),
			zap.Uint64("decode_errors", r.decodeErrors.Load()),
			zap.Uint64("consume_errors", r.consumeErrors.Load()))
	}
	if r.metrics != nil {
		if err := r.metrics.Unregister(); err != nil {
			r.set.Logger.Warn("unregistering the profiler's metrics", zap.Error(err))
		}
	}
	r.agentMu.Lock()
	r.agent.free()
	r.agent = nil
	r.agentMu.Unlock()
	if stopErr != nil {
		return fmt.Errorf("profiling receiver: %w", stopErr)
	}
	return nil
}

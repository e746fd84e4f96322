package profilingreceiver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// statsSample is a stats object as the library writes it: flat counters,
// stop reasons as `unwind_stopped_*` keys, late stops as an object, and
// keys no metric claims.
const statsSample = `{
  "samples": 120, "samples_lost": 3, "samples_dropped": 0, "samples_processed": 117, "samples_malformed": 1,
  "user_stacks_complete": 100, "user_stacks_truncated": 17,
  "unwind_stopped_root": 100, "unwind_stopped_read_error": 5, "unwind_stopped_unknown_pc": 12,
  "late_unwind_stops": {"root": 7, "no_coverage": 2},
  "processes_loaded": 42, "files_loaded": 30, "files_pending": 2, "files_unused": 5,
  "files_refused_too_large": 1, "files_refused_not_regular": 4, "files_failed": 6,
  "process_load_p50_us": 800, "process_load_p99_us": 40000, "process_load_max_us": 90000,
  "unwind_deltas": 1000, "bpf_run_time_ns": 555, "panics_reader": 0, "panics_symbolizer": 1,
  "process_events": 10, "process_events_received": 9, "process_events_lost": 1,
  "symbolizer_load_ms_max": 12
}`

// points returns a metric's data points as attribute value -> value
// (the attribute named attr; "" for a metric without attributes).
func points(t *testing.T, tel *componenttest.Telemetry, name, attr string) map[string]int64 {
	t.Helper()
	m, err := tel.GetMetric(metricPrefix + name)
	require.NoError(t, err)
	got := map[string]int64{}
	add := func(dps []metricdata.DataPoint[int64]) {
		for _, dp := range dps {
			v, _ := dp.Attributes.Value(attribute.Key(attr))
			got[v.AsString()] = dp.Value
		}
	}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		assert.True(t, d.IsMonotonic, "%s is a counter", name)
		add(d.DataPoints)
	case metricdata.Gauge[int64]:
		add(d.DataPoints)
	default:
		t.Fatalf("%s: unexpected data %T", name, m.Data)
	}
	return got
}

// The profiler's figures reach the Collector's internal metrics, each key
// under its metric and attribute; after shutdown nothing reads the freed
// handle (the fake panics if anything does).
func TestProfilerStatsAreInternalMetrics(t *testing.T) {
	tel := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tel.Shutdown(context.Background())) }()
	set := receivertest.NewNopSettings(typeStr)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	a := &fakeAgent{statsJSON: statsSample}
	r, err := newReceiver(createDefaultConfig(), set, new(consumertest.ProfilesSink),
		func(string) (agent, error) { return a, nil })
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))

	assert.Equal(t, map[string]int64{"taken": 120, "lost_in_kernel": 3, "dropped": 0, "processed": 117, "malformed": 1},
		points(t, tel, "samples", "state"))
	assert.Equal(t, map[string]int64{"complete": 100, "truncated": 17}, points(t, tel, "user_stacks", "result"))
	assert.Equal(t, map[string]int64{"root": 100, "read_error": 5, "unknown_pc": 12},
		points(t, tel, "unwind_stops", "reason"))
	assert.Equal(t, map[string]int64{"root": 7, "no_coverage": 2}, points(t, tel, "late_unwind_stops", "reason"))
	assert.Equal(t, map[string]int64{"loaded": 42}, points(t, tel, "processes", "state"))
	assert.Equal(t, map[string]int64{"loaded": 30, "pending": 2, "unused": 5}, points(t, tel, "files", "state"))
	assert.Equal(t, map[string]int64{"too_large": 1, "not_regular": 4, "failed": 6},
		points(t, tel, "files_refused", "reason"))
	assert.Equal(t, map[string]int64{"p50": 800, "p99": 40000, "max": 90000},
		points(t, tel, "process_load_latency", "quantile"))
	assert.Equal(t, map[string]int64{"": 4000}, points(t, tel, "unwind_table_bytes", ""))
	assert.Equal(t, map[string]int64{"": 555}, points(t, tel, "bpf_time", ""))
	assert.Equal(t, map[string]int64{"reader": 0, "symbolizer": 1}, points(t, tel, "panics", "thread"))
	assert.Equal(t, map[string]int64{"sent": 10, "received": 9, "lost_in_kernel": 1},
		points(t, tel, "process_events", "state"))

	require.NoError(t, r.Shutdown(context.Background()))
	_, err = tel.GetMetric(metricPrefix + "samples")
	assert.Error(t, err, "no profiler, no observation after shutdown")
}

// Stop reasons as a nested object (as the library may group them) count
// the same as flat keys.
func TestStatPointsReadNestedStopReasons(t *testing.T) {
	got, err := statPoints(`{"unwind_stops": {"root": 3, "bad_sp": 1}, "samples": "not a number"}`)
	require.NoError(t, err)
	assert.Equal(t, []statPoint{
		{metric: "unwind_stops", attr: "reason", value: "bad_sp", n: 1},
		{metric: "unwind_stops", attr: "reason", value: "root", n: 3},
	}, got)
	_, err = statPoints(`not json`)
	assert.Error(t, err)
}

package profilingreceiver // import "ebpf-profiler/go-receiver"

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The profiler's own figures as the receiver's internal metrics. The
// library reports them as one JSON object of counters and gauges (the
// C ABI's stats, the same the CLI prints at exit); each metric below
// gathers some of its keys, told apart by one attribute. The process's
// memory is the Collector's own `otelcol_process_memory_rss`: the
// profiler runs inside the Collector.

// metricPrefix makes the names read like the Collector's own metrics.
const metricPrefix = "otelcol_ebpf_profiler_"

// statMetric is one instrument fed from the stats object.
type statMetric struct {
	name, unit, description string
	// counter: a cumulative sum; otherwise a gauge (a value now).
	counter bool
	// attr names the attribute that tells the keys apart ("" for none).
	attr string
	// keys maps a stats key to its attribute value.
	keys map[string]string
	// prefix adds every numeric key starting with it, the attribute
	// value being the rest of the key.
	prefix string
	// object adds the entries of a nested object of numbers, the
	// attribute value being the entry's key.
	object string
	// scale multiplies every value (0 means 1).
	scale int64
}

var statMetrics = []statMetric{
	{name: "samples", unit: "{sample}", counter: true, attr: "state",
		description: "Samples taken in the kernel, and what became of them.",
		keys: map[string]string{"samples": "taken", "samples_lost": "lost_in_kernel",
			"samples_dropped": "dropped", "samples_processed": "processed", "samples_malformed": "malformed"}},
	{name: "user_stacks", unit: "{stack}", counter: true, attr: "result",
		description: "Processed user stacks that reached the thread's root or ended early.",
		keys:        map[string]string{"user_stacks_complete": "complete", "user_stacks_truncated": "truncated"}},
	{name: "unwind_stops", unit: "{stack}", counter: true, attr: "reason",
		description: "Why user stacks ended, by reason (root is the good one).",
		prefix:      "unwind_stopped_", object: "unwind_stops"},
	{name: "late_unwind_stops", unit: "{stack}", counter: true, attr: "reason",
		description: "Why stacks unwound late in user space (processes not loaded yet at the sample) ended.",
		object:      "late_unwind_stops"},
	{name: "process_events", unit: "{event}", counter: true, attr: "state",
		description: "Process events (exec, exit, unknown pid or pc) from the kernel.",
		keys: map[string]string{"process_events": "sent", "process_events_received": "received",
			"process_events_lost": "lost_in_kernel", "process_events_dropped": "dropped",
			"process_events_coalesced": "coalesced", "process_events_cancelled": "cancelled",
			"process_events_malformed": "malformed"}},
	{name: "process_load_latency", unit: "us", attr: "quantile",
		description: "Time from a process event to the process's unwind tables being loaded.",
		keys:        map[string]string{"process_load_p50_us": "p50", "process_load_p99_us": "p99", "process_load_max_us": "max"}},
	{name: "processes", unit: "{process}", attr: "state",
		description: "Processes loaded for unwinding now.",
		keys:        map[string]string{"processes_loaded": "loaded"}},
	{name: "files", unit: "{file}", attr: "state",
		description: "Executable files whose unwind tables are held, being analysed, or unused within the budget.",
		keys:        map[string]string{"files_loaded": "loaded", "files_pending": "pending", "files_unused": "unused"}},
	{name: "files_refused", unit: "{file}", counter: true, attr: "reason",
		description: "Mapped files the profiler refused to read or load, by reason.",
		prefix:      "files_refused_",
		keys:        map[string]string{"files_failed": "failed", "files_rejected": "rejected"}},
	{name: "unwind_table_bytes", unit: "By",
		description: "Bytes of stack deltas in the kernel's maps (4 per delta).",
		keys:        map[string]string{"unwind_deltas": ""}, scale: 4},
	{name: "bpf_time", unit: "ns", counter: true,
		description: "Time spent in the sampling BPF programs.",
		keys:        map[string]string{"bpf_run_time_ns": ""}},
	{name: "batches", unit: "{batch}", counter: true, attr: "outcome",
		description: "OTLP batches the library handed out or dropped because nobody pulled them.",
		keys:        map[string]string{"batches_sent": "sent", "batches_dropped": "dropped"}},
	{name: "panics", unit: "{panic}", counter: true, attr: "thread",
		description: "Panics caught in the profiler's threads (each thread restarts or stops cleanly).",
		prefix:      "panics_"},
}

// statSource returns the stats JSON of the running profiler, or ok=false
// when none runs (not started, or stopped and freed).
type statSource func() (stats string, ok bool, err error)

// registerStatMetrics creates the instruments on meter; their values are
// read from source once per collection. The returned registration is
// unregistered at shutdown.
func registerStatMetrics(meter metric.Meter, source statSource) (metric.Registration, error) {
	counters := make(map[string]metric.Int64ObservableCounter)
	gauges := make(map[string]metric.Int64ObservableGauge)
	var instruments []metric.Observable
	for _, m := range statMetrics {
		name := metricPrefix + m.name
		if m.counter {
			c, err := meter.Int64ObservableCounter(name, metric.WithUnit(m.unit), metric.WithDescription(m.description))
			if err != nil {
				return nil, fmt.Errorf("metric %s: %w", name, err)
			}
			counters[m.name] = c
			instruments = append(instruments, c)
		} else {
			g, err := meter.Int64ObservableGauge(name, metric.WithUnit(m.unit), metric.WithDescription(m.description))
			if err != nil {
				return nil, fmt.Errorf("metric %s: %w", name, err)
			}
			gauges[m.name] = g
			instruments = append(instruments, g)
		}
	}
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		stats, ok, err := source()
		if err != nil || !ok {
			return err
		}
		points, err := statPoints(stats)
		if err != nil {
			return err
		}
		for _, p := range points {
			opts := metric.WithAttributes()
			if p.attr != "" {
				opts = metric.WithAttributes(attribute.String(p.attr, p.value))
			}
			if c, ok := counters[p.metric]; ok {
				o.ObserveInt64(c, p.n, opts)
			} else {
				o.ObserveInt64(gauges[p.metric], p.n, opts)
			}
		}
		return nil
	}, instruments...)
}

// statPoint is one observation: metric (statMetric.name), attribute, value.
type statPoint struct {
	metric, attr, value string
	n                   int64
}

// statPoints maps a stats object onto statMetrics, in a stable order.
// Keys no metric claims are left out; a key claimed twice (by a prefix
// and an explicit key) counts once.
func statPoints(stats string) ([]statPoint, error) {
	dec := json.NewDecoder(strings.NewReader(stats))
	dec.UseNumber()
	var fields map[string]any
	if err := dec.Decode(&fields); err != nil {
		return nil, fmt.Errorf("profiler stats: %w", err)
	}
	number := func(v any) (int64, bool) {
		n, ok := v.(json.Number)
		if !ok {
			return 0, false
		}
		i, err := n.Int64()
		return i, err == nil
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var points []statPoint
	for _, m := range statMetrics {
		scale := max(m.scale, 1)
		for _, k := range keys {
			value, explicit := m.keys[k]
			if !explicit && (m.prefix == "" || !strings.HasPrefix(k, m.prefix)) {
				continue
			}
			if !explicit {
				value = strings.TrimPrefix(k, m.prefix)
			}
			if n, ok := number(fields[k]); ok {
				points = append(points, statPoint{metric: m.name, attr: m.attr, value: value, n: n * scale})
			}
		}
		if m.object == "" {
			continue
		}
		nested, _ := fields[m.object].(map[string]any)
		entries := make([]string, 0, len(nested))
		for k := range nested {
			entries = append(entries, k)
		}
		sort.Strings(entries)
		for _, k := range entries {
			if n, ok := number(nested[k]); ok {
				points = append(points, statPoint{metric: m.name, attr: m.attr, value: k, n: n * scale})
			}
		}
	}
	return points, nil
}

package profilingreceiver // import "ebpf-profiler/go-receiver"

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Limits the Rust agent enforces too (crates/agent/src/config.rs); checked
// here so that a bad value fails when the configuration is loaded, with the
// key's name in the message.
const (
	maxSamplesPerSecond   = 10000
	minReporterInterval   = 100 * time.Millisecond
	maxReporterInterval   = time.Hour
	maxBatchQueueCapacity = 1024
	maxPids               = 1024
)

// knownTracers are the values `tracers` accepts, as the reference receiver
// spells them ("all" enables every interpreter tracer; "native" is always on).
var knownTracers = map[string]bool{
	"all": true, "native": true, "perl": true, "php": true, "python": true,
	"hotspot": true, "ruby": true, "v8": true, "dotnet": true, "go": true,
	"labels": true, "beam": true,
}

// supportedUnwinders is what the profiler unwinds, whatever `tracers` and
// `interpreters` say (neither is applied yet): the other interpreters'
// frames show as the native frames of their runtimes.
const supportedUnwinders = "kernel, native (C, C++, Rust), Go and CPython 3.8-3.13"

// InterpreterConfig is one entry of `interpreters`, in the shape of the
// reference receiver (`interpreters: {python: {disabled: true}}`).
type InterpreterConfig struct {
	// Disabled turns this interpreter's unwinder off (not applied yet).
	Disabled bool `mapstructure:"disabled"`

	// Prevent unkeyed literal initialization.
	_ struct{}
}

// Config is the receiver's configuration. Keys and defaults follow the
// reference eBPF profiler receiver where the meaning is the same.
type Config struct {
	// SamplesPerSecond is the sampling frequency per CPU. Default 20.
	SamplesPerSecond int `mapstructure:"samples_per_second"`
	// ReporterInterval is how often aggregated profiles are emitted.
	// Default 5s.
	ReporterInterval time.Duration `mapstructure:"reporter_interval"`
	// Tracers selects the interpreter unwinders: "all" or a comma-separated
	// list (perl, php, python, hotspot, ruby, v8, dotnet, go, labels, beam).
	// Default "all".
	Tracers string `mapstructure:"tracers"`
	// Interpreters configures the interpreter unwinders by name (the
	// names of `tracers` but "all" and "native"), as the reference
	// receiver's current configuration does. Default: none listed.
	Interpreters map[string]InterpreterConfig `mapstructure:"interpreters"`
	// OffCPUThreshold is the share of scheduler switches to sample for
	// off-CPU profiles, in [0, 1]. 0 (the default) disables off-CPU
	// profiling; other values are not supported yet.
	OffCPUThreshold float64 `mapstructure:"off_cpu_threshold"`
	// Pids restricts profiling to these processes. Empty (the default)
	// profiles the whole system.
	Pids []int `mapstructure:"pids"`
	// SymbolizeNative names native frames on the host from ELF symbols and
	// DWARF. Default true.
	SymbolizeNative bool `mapstructure:"symbolize_native"`
	// BatchQueueCapacity is how many profile batches may wait for the
	// pipeline before the oldest is dropped (and counted). Default 16.
	BatchQueueCapacity int `mapstructure:"batch_queue_capacity"`

	// Prevent unkeyed literal initialization.
	_ struct{}
}

func createDefaultConfig() *Config {
	return &Config{
		SamplesPerSecond:   20,
		ReporterInterval:   5 * time.Second,
		Tracers:            "all",
		OffCPUThreshold:    0,
		SymbolizeNative:    true,
		BatchQueueCapacity: 16,
	}
}

// Validate checks every value; the Collector calls it when it loads the
// configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.SamplesPerSecond < 1 || c.SamplesPerSecond > maxSamplesPerSecond {
		errs = append(errs, fmt.Errorf("samples_per_second must be between 1 and %d, got %d",
			maxSamplesPerSecond, c.SamplesPerSecond))
	}
	if c.ReporterInterval < minReporterInterval {
		errs = append(errs, fmt.Errorf("reporter_interval must be at least %s, got %s",
			minReporterInterval, c.ReporterInterval))
	}
	if c.ReporterInterval > maxReporterInterval {
		errs = append(errs, fmt.Errorf("reporter_interval must be at most %s, got %s",
			maxReporterInterval, c.ReporterInterval))
	}
	if _, err := parseTracers(c.Tracers); err != nil {
		errs = append(errs, err)
	}
	for _, name := range sortedKeys(c.Interpreters) {
		if !isInterpreter(name) {
			errs = append(errs, fmt.Errorf("interpreters: unknown interpreter %q (valid: %s)", name,
				strings.Join(interpreterNames(), ", ")))
		}
	}
	switch {
	case c.OffCPUThreshold < 0 || c.OffCPUThreshold > 1:
		errs = append(errs, fmt.Errorf("off_cpu_threshold must be in [0, 1] (0 disables off-CPU profiling), got %v",
			c.OffCPUThreshold))
	case c.OffCPUThreshold != 0:
		errs = append(errs, fmt.Errorf("off_cpu_threshold: off-CPU profiling is not supported yet; set 0, got %v",
			c.OffCPUThreshold))
	}
	if len(c.Pids) > maxPids {
		errs = append(errs, fmt.Errorf("pids: at most %d processes are supported, got %d", maxPids, len(c.Pids)))
	}
	for _, pid := range c.Pids {
		if pid < 1 || pid > 1<<22 {
			errs = append(errs, fmt.Errorf("pids: %d is not a valid process id", pid))
		}
	}
	if c.BatchQueueCapacity < 1 {
		errs = append(errs, fmt.Errorf("batch_queue_capacity must be at least 1, got %d", c.BatchQueueCapacity))
	}
	if c.BatchQueueCapacity > maxBatchQueueCapacity {
		errs = append(errs, fmt.Errorf("batch_queue_capacity must be at most %d, got %d",
			maxBatchQueueCapacity, c.BatchQueueCapacity))
	}
	return errors.Join(errs...)
}

// parseTracers splits and checks the `tracers` list.
func parseTracers(s string) ([]string, error) {
	var names []string
	for _, name := range strings.Split(s, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		if !knownTracers[name] {
			valid := make([]string, 0, len(knownTracers))
			for k := range knownTracers {
				valid = append(valid, k)
			}
			sort.Strings(valid)
			return nil, fmt.Errorf("tracers: unknown tracer %q (valid: %s)", name, strings.Join(valid, ", "))
		}
		names = append(names, name)
	}
	return names, nil
}

// isInterpreter tells whether `interpreters` accepts name: a tracer
// other than "all" and "native".
func isInterpreter(name string) bool {
	return knownTracers[name] && name != "all" && name != "native"
}

// interpreterNames lists what `interpreters` accepts, sorted.
func interpreterNames() []string {
	var names []string
	for name := range knownTracers {
		if isInterpreter(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// unappliedSettings describes the settings given that the profiler does
// not apply yet; empty when there are none.
func (c *Config) unappliedSettings() []string {
	var out []string
	if tracers, _ := parseTracers(c.Tracers); len(tracers) != 1 || tracers[0] != "all" {
		out = append(out, fmt.Sprintf("tracers=%q", c.Tracers))
	}
	for _, name := range sortedKeys(c.Interpreters) {
		if c.Interpreters[name].Disabled {
			out = append(out, fmt.Sprintf("interpreters.%s.disabled=true", name))
		}
	}
	return out
}

// agentConfig is the JSON the C ABI's ebpf_profiler_start reads: the
// fields of the Rust AgentConfig, which rejects unknown ones.
type agentConfig struct {
	SamplesPerSecond   int      `json:"samples_per_second"`
	ReporterIntervalMs int64    `json:"reporter_interval_ms"`
	Pids               []uint32 `json:"pids"`
	OtlpBatches        bool     `json:"otlp_batches"`
	BatchQueueCapacity int      `json:"batch_queue_capacity"`
	SymbolizeNative    bool     `json:"symbolize_native"`
}

// agentJSON renders the configuration for the C ABI. Call after Validate.
func (c *Config) agentJSON() (string, error) {
	pids := make([]uint32, 0, len(c.Pids))
	for _, p := range c.Pids {
		pids = append(pids, uint32(p))
	}
	b, err := json.Marshal(agentConfig{
		SamplesPerSecond:   c.SamplesPerSecond,
		ReporterIntervalMs: c.ReporterInterval.Milliseconds(),
		Pids:               pids,
		OtlpBatches:        true,
		BatchQueueCapacity: c.BatchQueueCapacity,
		SymbolizeNative:    c.SymbolizeNative,
	})
	return string(b), err
}

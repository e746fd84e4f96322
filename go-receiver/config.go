package profilingreceiver // import "ebpf-profiler/go-receiver"

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
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

// libraryInterpreters are the interpreter unwinders the library can switch
// off (its disabled_interpreters names: the lines of ebpf/runtimes.h,
// runtime_names() in crates/interpreters/src/lib.rs). A runtime of that list
// is here, in knownTracers and a field of InterpretersConfig:
// TestRuntimesAreTheBPFList checks the three against the header, and
// TestLibraryInterpretersAreTheLibrarys this list against the library.
var libraryInterpreters = map[string]bool{
	"python": true, "hotspot": true, "v8": true, "ruby": true, "php": true, "perl": true,
	"beam": true,
}

// alwaysOn is what the profiler unwinds whatever `tracers` and
// `interpreters` say.
const alwaysOn = "kernel, native (C, C++, Rust) and Go frames"

// ErrorMode says what a profiler that cannot start does to the Collector.
type ErrorMode string

const (
	// ErrorModePropagate fails the Collector's start (the default, as in the
	// reference receiver).
	ErrorModePropagate ErrorMode = "propagate"
	// ErrorModeIgnore logs the error and keeps the Collector running
	// without profiling (for nodes where BPF cannot load).
	ErrorModeIgnore ErrorMode = "ignore"
)

// UnmarshalText accepts the mode in any case, as the reference does.
func (m *ErrorMode) UnmarshalText(text []byte) error {
	switch v := ErrorMode(strings.ToLower(string(text))); v {
	case ErrorModePropagate, ErrorModeIgnore:
		*m = v
		return nil
	default:
		return fmt.Errorf("error_mode must be %q or %q, got %q", ErrorModePropagate, ErrorModeIgnore, string(text))
	}
}

// InterpreterConfig switches one interpreter unwinder off.
type InterpreterConfig struct {
	Disabled bool `mapstructure:"disabled"`
}

// GoConfig is interpreters.go: Go symbolization and goroutine labels.
type GoConfig struct {
	Disabled      bool              `mapstructure:"disabled"`
	Labels        InterpreterConfig `mapstructure:"labels"`
	Symbolization InterpreterConfig `mapstructure:"symbolization"`
}

// RubyConfig is interpreters.ruby.
type RubyConfig struct {
	Disabled         bool `mapstructure:"disabled"`
	SkipNativeResume bool `mapstructure:"skip_native_resume"`
}

// InterpretersConfig is the reference receiver's `interpreters` block:
// every interpreter is enabled unless `disabled: true`.
type InterpretersConfig struct {
	Python  InterpreterConfig `mapstructure:"python"`
	Perl    InterpreterConfig `mapstructure:"perl"`
	PHP     InterpreterConfig `mapstructure:"php"`
	Hotspot InterpreterConfig `mapstructure:"hotspot"`
	Ruby    RubyConfig        `mapstructure:"ruby"`
	V8      InterpreterConfig `mapstructure:"v8"`
	Dotnet  InterpreterConfig `mapstructure:"dotnet"`
	Go      GoConfig          `mapstructure:"go"`
	BEAM    InterpreterConfig `mapstructure:"beam"`
	LuaJIT  InterpreterConfig `mapstructure:"luajit"`
}

// ProbeConfig is one entry of `probes`; everything but the type is
// probe-specific.
type ProbeConfig struct {
	Type   string         `mapstructure:"type"`
	Config map[string]any `mapstructure:",remain"`
}

// Config is the receiver's configuration. It accepts every key of the
// reference eBPF profiler receiver with the same meaning and default, so
// that its configuration files run unchanged; keys with no meaning here
// are checked, and a value other than the default is logged once as not
// applied (see notApplied). Our own keys: tracers, pids, symbolize_native,
// batch_queue_capacity.
type Config struct {
	// SamplesPerSecond is the sampling frequency per CPU. Default 20.
	SamplesPerSecond int `mapstructure:"samples_per_second"`
	// ReporterInterval is how often aggregated profiles are emitted.
	// Default 5s.
	ReporterInterval time.Duration `mapstructure:"reporter_interval"`
	// ErrorMode: "propagate" (default) fails the Collector when the
	// profiler cannot start; "ignore" logs it and runs without profiling.
	ErrorMode ErrorMode `mapstructure:"error_mode"`
	// Tracers selects the interpreter unwinders: "all" or a comma-separated
	// list (perl, php, python, hotspot, ruby, v8, dotnet, go, labels, beam).
	// Default "all". The reference's older spelling of Interpreters.
	Tracers string `mapstructure:"tracers"`
	// Interpreters switches interpreter unwinders off one by one.
	Interpreters InterpretersConfig `mapstructure:"interpreters"`
	// OffCPUThreshold is the share of scheduler switch-outs whose thread's
	// stack is taken, with the time until it runs again (a second profile
	// per interval, off_cpu/nanoseconds), in [0, 1]. 0 (the default)
	// disables off-CPU profiling.
	OffCPUThreshold float64 `mapstructure:"off_cpu_threshold"`
	// Pids restricts profiling to these processes. Empty (the default)
	// profiles the whole system.
	Pids []int `mapstructure:"pids"`
	// ContainerIDs restricts profiling to the processes of these containers
	// (ids, or prefixes of at least 12 hex digits), and Cgroups to those of
	// these cgroups and the cgroups below them (paths as /proc/PID/cgroup
	// shows them). New processes of a chosen one are chosen too. With Pids:
	// their union. Empty (the default): no such restriction.
	ContainerIDs []string `mapstructure:"container_ids"`
	Cgroups      []string `mapstructure:"cgroups"`
	// SymbolizeNative names native frames on the host from ELF symbols and
	// DWARF. Default true.
	SymbolizeNative bool `mapstructure:"symbolize_native"`
	// BatchQueueCapacity is how many profile batches may wait for the
	// pipeline before the oldest is dropped (and counted). Default 16.
	BatchQueueCapacity int `mapstructure:"batch_queue_capacity"`
	// ProbabilisticThreshold and ProbabilisticInterval: as the reference,
	// every interval (1 to 5 minutes, default 1m) a number in 0..99 is
	// drawn and the profiler samples for that interval only when it is
	// below the threshold (1..100; the default 100 always samples).
	ProbabilisticInterval  time.Duration `mapstructure:"probabilistic_interval"`
	ProbabilisticThreshold uint          `mapstructure:"probabilistic_threshold"`
	// IncludeEnvVars is a comma-separated list of environment variables
	// reported of each process, as the resource attributes
	// process.environment_variable.<NAME>. Default none.
	IncludeEnvVars string `mapstructure:"include_env_vars"`

	// Reference keys checked like the reference does, not applied here.
	ReporterJitter          float64       `mapstructure:"reporter_jitter"`
	MonitorInterval         time.Duration `mapstructure:"monitor_interval"`
	FrameCacheSize          uint          `mapstructure:"frame_cache_size"`
	ClockSyncInterval       time.Duration `mapstructure:"clock_sync_interval"`
	SendErrorFrames         bool          `mapstructure:"send_error_frames"`
	SendIdleFrames          bool          `mapstructure:"send_idle_frames"`
	FilterMinProcessAge     time.Duration `mapstructure:"filter_min_process_age"`
	VerboseMode             bool          `mapstructure:"verbose_mode"`
	MapScaleFactor          uint          `mapstructure:"map_scale_factor"`
	BPFVerifierLogLevel     uint          `mapstructure:"bpf_verifier_log_level"`
	NoKernelVersionCheck    bool          `mapstructure:"no_kernel_version_check"`
	MaxGRPCRetries          uint32        `mapstructure:"max_grpc_retries"`
	MaxRPCMsgSize           int           `mapstructure:"max_rpc_msg_size"`
	BPFFSRoot               string        `mapstructure:"bpf_fs_root"`
	OBIProcessCtx           bool          `mapstructure:"obi_process_ctx"`
	PIDNamespaceTranslation bool          `mapstructure:"pid_namespace_translation"`
	PinCPUIDs               string        `mapstructure:"pin_cpu_ids"`
	Probes                  []ProbeConfig `mapstructure:"probes"`

	// Prevent unkeyed literal initialization.
	_ struct{}
}

// Bounds the reference receiver checks too.
const (
	minFrameCacheSize         = 1024
	maxFrameCacheSize         = 1024 * 1024
	maxMapScaleFactor         = 8
	maxBPFVerifierLogLevel    = 2
	minProbabilisticInterval  = time.Minute
	maxProbabilisticInterval  = 5 * time.Minute
	maxProbabilisticThreshold = 100
	// The Rust AgentConfig's bounds of include_env_vars.
	maxEnvVars        = 64
	maxEnvVarNameSize = 256
)

func createDefaultConfig() *Config {
	return &Config{
		SamplesPerSecond:   20,
		ReporterInterval:   5 * time.Second,
		ErrorMode:          ErrorModePropagate,
		Tracers:            "all",
		OffCPUThreshold:    0,
		SymbolizeNative:    true,
		BatchQueueCapacity: 16,

		// The reference receiver's defaults.
		ReporterJitter:         0.2,
		MonitorInterval:        5 * time.Second,
		FrameCacheSize:         16384,
		ProbabilisticInterval:  time.Minute,
		ProbabilisticThreshold: maxProbabilisticThreshold,
		ClockSyncInterval:      3 * time.Minute,
		MaxGRPCRetries:         5,
		MaxRPCMsgSize:          32 << 20,
		BPFFSRoot:              "/sys/fs/bpf/",
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
	if c.ErrorMode != ErrorModePropagate && c.ErrorMode != ErrorModeIgnore {
		errs = append(errs, fmt.Errorf("error_mode must be %q or %q, got %q",
			ErrorModePropagate, ErrorModeIgnore, c.ErrorMode))
	}
	if c.ReporterInterval > maxReporterInterval {
		errs = append(errs, fmt.Errorf("reporter_interval must be at most %s, got %s",
			maxReporterInterval, c.ReporterInterval))
	}
	if _, err := parseTracers(c.Tracers); err != nil {
		errs = append(errs, err)
	}
	if c.OffCPUThreshold < 0 || c.OffCPUThreshold > 1 {
		errs = append(errs, fmt.Errorf("off_cpu_threshold must be in [0, 1] (0 disables off-CPU profiling), got %v",
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
	errs = append(errs, validateSelectors(c.ContainerIDs, c.Cgroups)...)
	if c.BatchQueueCapacity < 1 {
		errs = append(errs, fmt.Errorf("batch_queue_capacity must be at least 1, got %d", c.BatchQueueCapacity))
	}
	if c.BatchQueueCapacity > maxBatchQueueCapacity {
		errs = append(errs, fmt.Errorf("batch_queue_capacity must be at most %d, got %d",
			maxBatchQueueCapacity, c.BatchQueueCapacity))
	}
	if _, err := parseEnvVars(c.IncludeEnvVars); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validateReferenceKeys()...)
	return errors.Join(errs...)
}

// parseEnvVars splits include_env_vars at its commas, as the reference
// does (blanks trimmed, empty entries skipped), and checks each name.
func parseEnvVars(s string) ([]string, error) {
	names := []string{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if len(name) > maxEnvVarNameSize || strings.ContainsAny(name, "=\x00") {
			return nil, fmt.Errorf("include_env_vars: %q is not a variable name (at most %d bytes, no '=' or NUL)",
				name, maxEnvVarNameSize)
		}
		names = append(names, name)
	}
	if len(names) > maxEnvVars {
		return nil, fmt.Errorf("include_env_vars: at most %d names are supported, got %d", maxEnvVars, len(names))
	}
	return names, nil
}

// validateReferenceKeys applies the reference receiver's bounds to the keys
// that are accepted for compatibility, so a file valid there is valid here
// and a file invalid there fails here too.
func (c *Config) validateReferenceKeys() []error {
	var errs []error
	if c.ReporterJitter < 0 || c.ReporterJitter > 1 {
		errs = append(errs, fmt.Errorf("reporter_jitter must be in [0, 1] (0 disables jitter), got %v", c.ReporterJitter))
	}
	if c.FrameCacheSize < minFrameCacheSize || c.FrameCacheSize > maxFrameCacheSize {
		errs = append(errs, fmt.Errorf("frame_cache_size must be between %d and %d, got %d",
			minFrameCacheSize, maxFrameCacheSize, c.FrameCacheSize))
	}
	if c.ProbabilisticInterval < minProbabilisticInterval || c.ProbabilisticInterval > maxProbabilisticInterval {
		errs = append(errs, fmt.Errorf("probabilistic_interval must be between %s and %s, got %s",
			minProbabilisticInterval, maxProbabilisticInterval, c.ProbabilisticInterval))
	}
	if c.ProbabilisticThreshold < 1 || c.ProbabilisticThreshold > maxProbabilisticThreshold {
		errs = append(errs, fmt.Errorf("probabilistic_threshold must be between 1 and %d, got %d",
			maxProbabilisticThreshold, c.ProbabilisticThreshold))
	}
	if c.FilterMinProcessAge < 0 {
		errs = append(errs, fmt.Errorf("filter_min_process_age must not be negative, got %s", c.FilterMinProcessAge))
	}
	if c.MapScaleFactor > maxMapScaleFactor {
		errs = append(errs, fmt.Errorf("map_scale_factor must be at most %d, got %d", maxMapScaleFactor, c.MapScaleFactor))
	}
	if c.BPFVerifierLogLevel > maxBPFVerifierLogLevel {
		errs = append(errs, fmt.Errorf("bpf_verifier_log_level must be at most %d, got %d",
			maxBPFVerifierLogLevel, c.BPFVerifierLogLevel))
	}
	if c.MonitorInterval < 0 || c.ClockSyncInterval < 0 {
		errs = append(errs, errors.New("monitor_interval and clock_sync_interval must not be negative"))
	}
	if c.MaxRPCMsgSize < 0 {
		errs = append(errs, fmt.Errorf("max_rpc_msg_size must not be negative, got %d", c.MaxRPCMsgSize))
	}
	if c.PinCPUIDs != "" {
		if err := checkCPURange(c.PinCPUIDs); err != nil {
			errs = append(errs, fmt.Errorf("pin_cpu_ids: %w", err))
		}
	}
	for i, p := range c.Probes {
		if p.Type == "" {
			errs = append(errs, fmt.Errorf("probes[%d]: type is required", i))
		}
	}
	return errs
}

// checkCPURange checks a CPU list such as "0-3,6".
func checkCPURange(s string) error {
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.ParseUint(lo, 10, 16)
		if err != nil {
			return fmt.Errorf("%q is not a CPU list such as 0-3,6", s)
		}
		if isRange {
			b, err := strconv.ParseUint(hi, 10, 16)
			if err != nil || b < a {
				return fmt.Errorf("%q is not a CPU list such as 0-3,6", s)
			}
		}
	}
	return nil
}

// notApplied names each accepted key whose value asks for something this
// profiler does not do; Start logs one warning per name. Values that match
// what the profiler does anyway (the defaults) are not listed; unwinder
// selections (tracers, interpreters) are unwinderSelection's.
func (c *Config) notApplied() []string {
	d := createDefaultConfig()
	var keys []string
	add := func(cond bool, key string) {
		if cond {
			keys = append(keys, key)
		}
	}
	add(c.ReporterJitter != d.ReporterJitter && c.ReporterJitter != 0, "reporter_jitter")
	add(c.MonitorInterval != d.MonitorInterval, "monitor_interval")
	add(c.FrameCacheSize != d.FrameCacheSize, "frame_cache_size")
	add(c.ClockSyncInterval != d.ClockSyncInterval, "clock_sync_interval")
	add(c.SendErrorFrames, "send_error_frames")
	add(c.SendIdleFrames, "send_idle_frames")
	add(c.FilterMinProcessAge != 0, "filter_min_process_age")
	add(c.VerboseMode, "verbose_mode")
	add(c.MapScaleFactor != 0, "map_scale_factor")
	add(c.BPFVerifierLogLevel != 0, "bpf_verifier_log_level")
	add(c.NoKernelVersionCheck, "no_kernel_version_check")
	add(c.MaxGRPCRetries != d.MaxGRPCRetries, "max_grpc_retries")
	add(c.MaxRPCMsgSize != d.MaxRPCMsgSize, "max_rpc_msg_size")
	add(c.BPFFSRoot != d.BPFFSRoot, "bpf_fs_root")
	add(c.OBIProcessCtx, "obi_process_ctx")
	add(c.PIDNamespaceTranslation, "pid_namespace_translation")
	add(c.PinCPUIDs != "", "pin_cpu_ids")
	add(len(c.Probes) != 0, "probes")
	add(c.Interpreters.Ruby.SkipNativeResume, "interpreters.ruby.skip_native_resume")
	return keys
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

// disabledInterpreters names the interpreters `interpreters` turns off, by
// their keys, in the reference receiver's order (InterpretersConfig's): one
// is off when any `disabled` of its block is (go's symbolization or labels
// too).
func (c *Config) disabledInterpreters() []string {
	in := reflect.ValueOf(c.Interpreters)
	var names []string
	for i := 0; i < in.NumField(); i++ {
		if anyDisabled(in.Field(i)) {
			names = append(names, in.Type().Field(i).Tag.Get("mapstructure"))
		}
	}
	return names
}

// anyDisabled tells whether a block of `interpreters` or one of its
// sub-blocks sets `disabled: true`.
func anyDisabled(block reflect.Value) bool {
	for i := 0; i < block.NumField(); i++ {
		field := block.Field(i)
		switch {
		case field.Kind() == reflect.Struct && anyDisabled(field):
			return true
		case field.Kind() == reflect.Bool && block.Type().Field(i).Tag.Get("mapstructure") == "disabled" && field.Bool():
			return true
		}
	}
	return false
}

// unwinderSelection is what `tracers` and `interpreters` select, from one
// parse of `tracers`.
type unwinderSelection struct {
	// disabled are the library's interpreter unwinders switched off (left
	// out of a `tracers` list, or disabled in `interpreters`), sorted.
	disabled []string
	// unapplied describes the selections the profiler cannot apply (an
	// unwinder it does not have, or one it always runs); empty when there
	// are none.
	unapplied []string
}

// unwinderSelection reads `tracers` (once) and `interpreters`. Call after
// Validate (an invalid `tracers` counts as empty).
func (c *Config) unwinderSelection() unwinderSelection {
	var sel unwinderSelection
	off := map[string]bool{}
	if tracers, _ := parseTracers(c.Tracers); !contains(tracers, "all") {
		for name := range libraryInterpreters {
			if !contains(tracers, name) {
				off[name] = true
			}
		}
		for _, name := range tracers {
			if !libraryInterpreters[name] && name != "native" {
				sel.unapplied = append(sel.unapplied, fmt.Sprintf("tracers: %s", name))
			}
		}
		if !contains(tracers, "go") {
			sel.unapplied = append(sel.unapplied, "tracers: go left out")
		}
	}
	for _, name := range c.disabledInterpreters() {
		if libraryInterpreters[name] {
			off[name] = true
		} else {
			sel.unapplied = append(sel.unapplied, fmt.Sprintf("interpreters.%s.disabled=true", name))
		}
	}
	sel.disabled = make([]string, 0, len(off))
	for name := range off {
		sel.disabled = append(sel.disabled, name)
	}
	sort.Strings(sel.disabled)
	return sel
}

func contains(list []string, name string) bool {
	for _, v := range list {
		if v == name {
			return true
		}
	}
	return false
}

// maxSelectors is the Rust ProcessFilter's bound on container ids and on
// cgroups (crates/process/src/selection.rs).
const maxSelectors = 64

// validateSelectors checks container_ids and cgroups as the library does,
// so that a value it would refuse fails when the Collector loads the file.
func validateSelectors(ids, cgroups []string) []error {
	var errs []error
	if len(ids) > maxSelectors || len(cgroups) > maxSelectors {
		errs = append(errs, fmt.Errorf("at most %d container_ids and %d cgroups are supported", maxSelectors, maxSelectors))
	}
	for _, id := range ids {
		hex := len(id) >= 12 && len(id) <= 64
		for _, r := range id {
			hex = hex && strings.ContainsRune("0123456789abcdefABCDEF", r)
		}
		if !hex {
			errs = append(errs, fmt.Errorf("container_ids: %q: 12 to 64 hexadecimal digits expected", id))
		}
	}
	for _, path := range cgroups {
		ok := strings.HasPrefix(path, "/") && len(path) <= 4096
		for _, part := range strings.Split(path, "/") {
			ok = ok && part != ".."
		}
		if !ok {
			errs = append(errs, fmt.Errorf("cgroups: %q: an absolute path inside the cgroup hierarchy expected, e.g. /system.slice/app.service", path))
		}
	}
	return errs
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
	// Probabilistic profiling; Validate bounds the interval to 1-5 min.
	ProbabilisticThreshold  uint     `json:"probabilistic_threshold"`
	ProbabilisticIntervalMs int64    `json:"probabilistic_interval_ms"`
	IncludeEnvVars          []string `json:"include_env_vars"`
	OffCPUThreshold         float64  `json:"off_cpu_threshold"`
	ContainerIDs            []string `json:"container_ids"`
	Cgroups                 []string `json:"cgroups"`
	DisabledInterpreters    []string `json:"disabled_interpreters"`
}

// agentJSON renders the configuration for the C ABI. Call after Validate.
func (c *Config) agentJSON() (string, error) {
	pids := make([]uint32, 0, len(c.Pids))
	for _, p := range c.Pids {
		pids = append(pids, uint32(p))
	}
	envVars, err := parseEnvVars(c.IncludeEnvVars)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(agentConfig{
		SamplesPerSecond:   c.SamplesPerSecond,
		ReporterIntervalMs: c.ReporterInterval.Milliseconds(),
		Pids:               pids,
		OtlpBatches:        true,
		BatchQueueCapacity: c.BatchQueueCapacity,
		SymbolizeNative:    c.SymbolizeNative,

		ProbabilisticThreshold:  c.ProbabilisticThreshold,
		ProbabilisticIntervalMs: c.ProbabilisticInterval.Milliseconds(),
		IncludeEnvVars:          envVars,
		OffCPUThreshold:         c.OffCPUThreshold,
		ContainerIDs:            nonNil(c.ContainerIDs),
		Cgroups:                 nonNil(c.Cgroups),
		DisabledInterpreters:    c.unwinderSelection().disabled,
	})
	return string(b), err
}

// nonNil renders an empty list as [] rather than null in the JSON.
func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

package profilingreceiver

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

// loadConfig unmarshals the entry `id` of testdata/config.yaml over the
// factory's defaults, as the Collector does.
func loadConfig(t *testing.T, id string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(id)
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	if err := sub.Unmarshal(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

func TestConfigStructIsValidForTheCollector(t *testing.T) {
	require.NoError(t, componenttest.CheckConfigStruct(NewFactory().CreateDefaultConfig()))
}

func TestDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	assert.Equal(t, 20, cfg.SamplesPerSecond)
	assert.Equal(t, 5*time.Second, cfg.ReporterInterval)
	assert.Equal(t, "all", cfg.Tracers)
	assert.Equal(t, 0.0, cfg.OffCPUThreshold)
	assert.Empty(t, cfg.Pids)
	assert.True(t, cfg.SymbolizeNative)
	assert.Equal(t, 16, cfg.BatchQueueCapacity)
	// The reference receiver's defaults.
	assert.Equal(t, ErrorModePropagate, cfg.ErrorMode)
	assert.Equal(t, InterpretersConfig{}, cfg.Interpreters)
	assert.Equal(t, 0.2, cfg.ReporterJitter)
	assert.Equal(t, 5*time.Second, cfg.MonitorInterval)
	assert.Equal(t, uint(16384), cfg.FrameCacheSize)
	assert.Equal(t, time.Minute, cfg.ProbabilisticInterval)
	assert.Equal(t, uint(100), cfg.ProbabilisticThreshold)
	assert.Equal(t, 3*time.Minute, cfg.ClockSyncInterval)
	assert.Equal(t, uint32(5), cfg.MaxGRPCRetries)
	assert.Equal(t, 32<<20, cfg.MaxRPCMsgSize)
	assert.Equal(t, "/sys/fs/bpf/", cfg.BPFFSRoot)
	assert.False(t, cfg.SendErrorFrames)
	assert.Equal(t, time.Duration(0), cfg.FilterMinProcessAge)
	assert.Empty(t, cfg.IncludeEnvVars)
	require.NoError(t, confmap.Validate(cfg))
	// Nothing to warn about in the defaults.
	assert.Empty(t, cfg.notApplied())
}

// A configuration written for the reference receiver, every key set,
// loads and validates unchanged; each key it cannot apply is named once.
func TestReferenceConfigLoadsUnchanged(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "reference.yaml"))
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, cm.Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))

	assert.Equal(t, 19, cfg.SamplesPerSecond)
	assert.Equal(t, 10*time.Second, cfg.ReporterInterval)
	assert.Equal(t, ErrorModeIgnore, cfg.ErrorMode)
	assert.True(t, cfg.Interpreters.Python.Disabled)
	assert.False(t, cfg.Interpreters.PHP.Disabled)
	assert.True(t, cfg.Interpreters.Go.Labels.Disabled)
	assert.True(t, cfg.Interpreters.Ruby.SkipNativeResume)
	assert.Equal(t, []ProbeConfig{{Type: "kprobe", Config: map[string]any{"symbol": "vfs_open"}}}, cfg.Probes)
	assert.Equal(t, "HOME,LANG", cfg.IncludeEnvVars)
	assert.Equal(t, 8388608, cfg.MaxRPCMsgSize)

	assert.Equal(t, []string{
		"reporter_jitter", "monitor_interval", "frame_cache_size",
		"clock_sync_interval",
		"send_error_frames", "send_idle_frames", "filter_min_process_age", "verbose_mode",
		"map_scale_factor", "bpf_verifier_log_level", "no_kernel_version_check",
		"max_grpc_retries", "max_rpc_msg_size", "bpf_fs_root", "obi_process_ctx",
		"pid_namespace_translation", "pin_cpu_ids", "probes",
		"interpreters.ruby.skip_native_resume",
	}, cfg.notApplied())
	// The library switches its own interpreters off; the others are told.
	assert.Equal(t, []string{"beam", "hotspot", "perl", "python", "v8"}, cfg.unwinderSelection().disabled)
	assert.Equal(t, []string{
		"interpreters.dotnet.disabled=true", "interpreters.go.disabled=true",
		"interpreters.luajit.disabled=true",
	}, cfg.unwinderSelection().unapplied)

	// The applied keys reach the library.
	text, err := cfg.agentJSON()
	require.NoError(t, err)
	assert.JSONEq(t, `{"samples_per_second":19,"reporter_interval_ms":10000,"pids":[],"otlp_batches":true,"batch_queue_capacity":16,"symbolize_native":true,
		"probabilistic_threshold":50,"probabilistic_interval_ms":120000,"include_env_vars":["HOME","LANG"],"off_cpu_threshold":0.05,
		"container_ids":[],"cgroups":[],"disabled_interpreters":["beam","hotspot","perl","python","v8"]}`, text)
}

// The reference receiver's own minimal form: `interpreters` turning
// Python off, nothing else.
func TestInterpretersPythonDisabledIsAccepted(t *testing.T) {
	cm := confmap.NewFromStringMap(map[string]any{
		"interpreters": map[string]any{"python": map[string]any{"disabled": true}},
	})
	cfg := createDefaultConfig()
	require.NoError(t, cm.Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
	assert.True(t, cfg.Interpreters.Python.Disabled)
	// The library leaves CPython out; nothing is left unapplied.
	assert.Empty(t, cfg.notApplied())
	assert.Empty(t, cfg.unwinderSelection().unapplied)
	text, err := cfg.agentJSON()
	require.NoError(t, err)
	assert.Contains(t, text, `"disabled_interpreters":["python"]`)
}

func TestBadErrorModeIsRejectedWhenLoaded(t *testing.T) {
	_, err := loadConfig(t, component.NewIDWithName(typeStr, "bad_error_mode").String())
	require.ErrorContains(t, err, `error_mode must be "propagate" or "ignore", got "crash"`)
	// Set directly (not through the text form), Validate catches it.
	cfg := createDefaultConfig()
	cfg.ErrorMode = "crash"
	require.ErrorContains(t, confmap.Validate(cfg), `error_mode must be "propagate" or "ignore", got "crash"`)
}

func TestErrorModeIsCaseInsensitive(t *testing.T) {
	cfg, err := loadConfig(t, component.NewIDWithName(typeStr, "ignore_upper").String())
	require.NoError(t, err)
	assert.Equal(t, ErrorModeIgnore, cfg.ErrorMode)
}

// The reference receiver's bounds hold for the keys accepted for
// compatibility, every violation reported.
func TestReferenceKeysAreChecked(t *testing.T) {
	cfg, err := loadConfig(t, component.NewIDWithName(typeStr, "bad_reference_keys").String())
	require.NoError(t, err)
	err = confmap.Validate(cfg)
	require.Error(t, err)
	for _, want := range []string{
		"reporter_jitter must be in [0, 1] (0 disables jitter), got 2",
		"frame_cache_size must be between 1024 and 1048576, got 10",
		"probabilistic_interval must be between 1m0s and 5m0s, got 10s",
		"probabilistic_threshold must be between 1 and 100, got 0",
		"filter_min_process_age must not be negative, got -1s",
		"map_scale_factor must be at most 8, got 9",
		"bpf_verifier_log_level must be at most 2, got 3",
		`pin_cpu_ids: "3-1" is not a CPU list such as 0-3,6`,
		"probes[0]: type is required",
	} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestLoadConfig(t *testing.T) {
	cfg, err := loadConfig(t, component.NewID(typeStr).String())
	require.NoError(t, err)
	assert.Equal(t, createDefaultConfig(), cfg)

	cfg, err = loadConfig(t, component.NewIDWithName(typeStr, "custom").String())
	require.NoError(t, err)
	require.NoError(t, confmap.Validate(cfg))
	want := createDefaultConfig()
	want.SamplesPerSecond = 97
	want.ReporterInterval = 10 * time.Second
	want.Tracers = "python, hotspot"
	want.Pids = []int{1, 4242}
	want.SymbolizeNative = false
	want.BatchQueueCapacity = 4
	assert.Equal(t, want, cfg)
	// A list switches the library's other interpreters off; Go cannot be.
	assert.Equal(t, []string{"beam", "perl", "php", "ruby", "v8"}, cfg.unwinderSelection().disabled)
	assert.Equal(t, []string{"tracers: go left out"}, cfg.unwinderSelection().unapplied)
}

// The reference receiver's current shape, `interpreters: {python:
// {disabled: true}}`, loads and validates.
func TestReferenceInterpretersShape(t *testing.T) {
	cfg, err := loadConfig(t, component.NewIDWithName(typeStr, "reference_shape").String())
	require.NoError(t, err)
	require.NoError(t, confmap.Validate(cfg))
	want := createDefaultConfig()
	want.Interpreters.Python.Disabled = true
	assert.Equal(t, want, cfg)
	assert.Equal(t, []string{"python"}, cfg.unwinderSelection().disabled)
	assert.Empty(t, cfg.unwinderSelection().unapplied)
	assert.Empty(t, createDefaultConfig().unwinderSelection().unapplied)
}

func TestInvalidConfigsGiveClearErrors(t *testing.T) {
	for name, want := range map[string]string{
		"bad_rate":             "samples_per_second must be between 1 and 10000, got 0",
		"bad_interval":         "reporter_interval must be at least 100ms, got 10ms",
		"bad_tracer":           `tracers: unknown tracer "cobol" (valid: all, beam, dotnet, go, hotspot, labels, native, perl, php, python, ruby, v8)`,
		"off_cpu_out_of_range": "off_cpu_threshold must be in [0, 1] (0 disables off-CPU profiling), got 1.5",
		"bad_pid":              "pids: 0 is not a valid process id",
		"bad_queue":            "batch_queue_capacity must be at least 1, got 0",
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := loadConfig(t, component.NewIDWithName(typeStr, name).String())
			require.NoError(t, err)
			err = confmap.Validate(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), want)
		})
	}
}

func TestSeveralErrorsAreAllReported(t *testing.T) {
	cfg, err := loadConfig(t, component.NewIDWithName(typeStr, "several_errors").String())
	require.NoError(t, err)
	err = confmap.Validate(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "samples_per_second must be between 1 and 10000, got 20000")
	assert.Contains(t, err.Error(), "batch_queue_capacity must be at least 1, got -1")
}

// The upper bounds are those of the Rust agent (crates/agent/src/config.rs),
// so that a value it would refuse fails when the Collector loads its
// configuration; the limits themselves are accepted.
func TestUpperBoundsMatchTheAgent(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.ReporterInterval = time.Hour
	cfg.BatchQueueCapacity = 1024
	cfg.Pids = make([]int, 1024)
	for i := range cfg.Pids {
		cfg.Pids[i] = i + 1
	}
	require.NoError(t, cfg.Validate())

	cfg.ReporterInterval = time.Hour + time.Millisecond
	cfg.BatchQueueCapacity = 100000000000
	cfg.Pids = append(cfg.Pids, 1025)
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reporter_interval must be at most 1h0m0s, got 1h0m0.001s")
	assert.Contains(t, err.Error(), "batch_queue_capacity must be at most 1024, got 100000000000")
	assert.Contains(t, err.Error(), "pids: at most 1024 processes are supported, got 1025")
}

// An interpreter the reference receiver does not know is a key error when
// the configuration is loaded, naming it.
func TestUnknownInterpreterIsRejected(t *testing.T) {
	_, err := loadConfig(t, component.NewIDWithName(typeStr, "bad_interpreter").String())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cobol")
}

func TestUnknownKeyIsRejected(t *testing.T) {
	_, err := loadConfig(t, component.NewIDWithName(typeStr, "unknown_key").String())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sample_per_second")
}

// The JSON the C ABI receives has exactly the Rust AgentConfig's fields
// (which rejects unknown ones; agent_cgo_test.go checks the library
// accepts it).
func TestAgentJSON(t *testing.T) {
	cfg, err := loadConfig(t, component.NewIDWithName(typeStr, "custom").String())
	require.NoError(t, err)
	text, err := cfg.agentJSON()
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(text), &got))
	assert.Equal(t, map[string]any{
		"samples_per_second":   97.0,
		"reporter_interval_ms": 10000.0,
		"pids":                 []any{1.0, 4242.0},
		"otlp_batches":         true,
		"batch_queue_capacity": 4.0,
		"symbolize_native":     false,

		"probabilistic_threshold":   100.0,
		"probabilistic_interval_ms": 60000.0,
		"include_env_vars":          []any{},
		"off_cpu_threshold":         0.0,
		"container_ids":             []any{},
		"cgroups":                   []any{},
		"disabled_interpreters":     []any{"beam", "perl", "php", "ruby", "v8"},
	}, got)

	text, err = createDefaultConfig().agentJSON()
	require.NoError(t, err)
	assert.JSONEq(t, `{"samples_per_second":20,"reporter_interval_ms":5000,"pids":[],"otlp_batches":true,"batch_queue_capacity":16,"symbolize_native":true,
		"probabilistic_threshold":100,"probabilistic_interval_ms":60000,"include_env_vars":[],"off_cpu_threshold":0,
		"container_ids":[],"cgroups":[],"disabled_interpreters":[]}`, text)
}

// include_env_vars is split as the reference splits it; names the
// library would refuse fail Validate, when the Collector loads the file.
func TestIncludeEnvVars(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.IncludeEnvVars = " HOME, ,DEPLOY_ENV,"
	require.NoError(t, cfg.Validate())
	text, err := cfg.agentJSON()
	require.NoError(t, err)
	var got agentConfig
	require.NoError(t, json.Unmarshal([]byte(text), &got))
	assert.Equal(t, []string{"HOME", "DEPLOY_ENV"}, got.IncludeEnvVars)

	cfg.IncludeEnvVars = "A=B"
	require.ErrorContains(t, cfg.Validate(), `include_env_vars: "A=B" is not a variable name`)
	cfg.IncludeEnvVars = strings.Repeat("X", maxEnvVarNameSize+1)
	require.ErrorContains(t, cfg.Validate(), "is not a variable name")
	names := make([]string, maxEnvVars+1)
	for i := range names {
		names[i] = fmt.Sprintf("V%d", i)
	}
	cfg.IncludeEnvVars = strings.Join(names, ",")
	require.ErrorContains(t, cfg.Validate(), "at most 64 names are supported, got 65")
}

// container_ids and cgroups reach the library as given; values it would
// refuse fail Validate, when the Collector loads the file.
func TestContainerAndCgroupSelectors(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.ContainerIDs = []string{"4f5c6a9e0b1d"}
	cfg.Cgroups = []string{"/system.slice/app.service"}
	require.NoError(t, cfg.Validate())
	text, err := cfg.agentJSON()
	require.NoError(t, err)
	var got agentConfig
	require.NoError(t, json.Unmarshal([]byte(text), &got))
	assert.Equal(t, []string{"4f5c6a9e0b1d"}, got.ContainerIDs)
	assert.Equal(t, []string{"/system.slice/app.service"}, got.Cgroups)

	cfg.ContainerIDs = []string{"4f5c6a"}
	cfg.Cgroups = []string{"system.slice", "/a/../b"}
	err = cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `container_ids: "4f5c6a": 12 to 64 hexadecimal digits expected`)
	assert.Contains(t, err.Error(), `cgroups: "system.slice": an absolute path`)
	assert.Contains(t, err.Error(), `cgroups: "/a/../b": an absolute path`)
}

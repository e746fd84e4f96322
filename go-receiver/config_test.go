package profilingreceiver

import (
	"encoding/json"
	"path/filepath"
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
	require.NoError(t, confmap.Validate(cfg))
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
}

// The reference receiver's current shape, `interpreters: {python:
// {disabled: true}}`, loads and validates.
func TestReferenceInterpretersShape(t *testing.T) {
	cfg, err := loadConfig(t, component.NewIDWithName(typeStr, "reference_shape").String())
	require.NoError(t, err)
	require.NoError(t, confmap.Validate(cfg))
	want := createDefaultConfig()
	want.Interpreters = map[string]InterpreterConfig{"python": {Disabled: true}, "hotspot": {Disabled: false}}
	assert.Equal(t, want, cfg)
	assert.Equal(t, []string{"interpreters.python.disabled=true"}, cfg.unappliedSettings())
	assert.Empty(t, createDefaultConfig().unappliedSettings())
}

func TestInvalidConfigsGiveClearErrors(t *testing.T) {
	for name, want := range map[string]string{
		"bad_rate":             "samples_per_second must be between 1 and 10000, got 0",
		"bad_interval":         "reporter_interval must be at least 100ms, got 10ms",
		"bad_tracer":           `tracers: unknown tracer "cobol" (valid: all, beam, dotnet, go, hotspot, labels, native, perl, php, python, ruby, v8)`,
		"bad_interpreter":      `interpreters: unknown interpreter "cobol" (valid: beam, dotnet, go, hotspot, labels, perl, php, python, ruby, v8)`,
		"off_cpu_out_of_range": "off_cpu_threshold must be in [0, 1] (0 disables off-CPU profiling), got 1.5",
		"off_cpu_unsupported":  "off_cpu_threshold: off-CPU profiling is not supported yet; set 0, got 0.1",
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
	}, got)

	text, err = createDefaultConfig().agentJSON()
	require.NoError(t, err)
	assert.JSONEq(t, `{"samples_per_second":20,"reporter_interval_ms":5000,"pids":[],"otlp_batches":true,"batch_queue_capacity":16,"symbolize_native":true}`, text)
}

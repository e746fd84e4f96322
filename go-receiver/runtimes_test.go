package profilingreceiver

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bpfRuntimes reads the names of ebpf/runtimes.h's list, RUNTIME(name,
// NAME, slot, map) lines, in their order: the list every side of the
// profiler takes its runtimes from.
func bpfRuntimes(t *testing.T) []string {
	t.Helper()
	header, err := os.ReadFile(filepath.Join("..", "ebpf", "runtimes.h"))
	require.NoError(t, err, "the repository's ebpf/runtimes.h")
	lines := regexp.MustCompile(`(?m)^\s*RUNTIME\((\w+),\s*(\w+),\s*(\d+),\s*(files|processes)\)\s*\\$`).
		FindAllStringSubmatch(string(header), -1)
	names := make([]string, 0, len(lines))
	for _, line := range lines {
		names = append(names, line[1])
	}
	require.GreaterOrEqual(t, len(names), 7, "the lines of ebpf/runtimes.h: %q", names)
	return names
}

// A runtime of ebpf/runtimes.h is registered in the Go config too: the
// library can switch it off (libraryInterpreters), `tracers` accepts its
// name, and `interpreters.<name>.disabled` is a key that switches it off; and
// libraryInterpreters holds no runtime the list lacks. A runtime added to the
// list and not here fails.
func TestRuntimesAreTheBPFList(t *testing.T) {
	list := bpfRuntimes(t)
	library := make([]string, 0, len(libraryInterpreters))
	for name := range libraryInterpreters {
		library = append(library, name)
	}
	sorted := append([]string(nil), list...)
	sort.Strings(sorted)
	sort.Strings(library)
	assert.Equal(t, sorted, library, "libraryInterpreters (config.go) and ebpf/runtimes.h")

	keys := map[string]int{}
	fields := reflect.TypeOf(InterpretersConfig{})
	for i := 0; i < fields.NumField(); i++ {
		keys[fields.Field(i).Tag.Get("mapstructure")] = i
	}
	for _, name := range list {
		assert.True(t, knownTracers[name], "tracers does not accept %q", name)
		i, ok := keys[name]
		if !assert.True(t, ok, "InterpretersConfig has no field for interpreters.%s", name) {
			continue
		}
		// Its `disabled` switches it, and only it, off in the library.
		cfg := createDefaultConfig()
		block := reflect.ValueOf(&cfg.Interpreters).Elem().Field(i)
		disabled := block.FieldByName("Disabled")
		require.True(t, disabled.IsValid() && disabled.Kind() == reflect.Bool, "interpreters.%s.disabled", name)
		disabled.SetBool(true)
		require.NoError(t, cfg.Validate())
		assert.Equal(t, []string{name}, cfg.disabledInterpreters())
		sel := cfg.unwinderSelection()
		assert.Equal(t, []string{name}, sel.disabled, "interpreters.%s.disabled", name)
		assert.Empty(t, sel.unapplied, "interpreters.%s.disabled", name)
	}
}

// disabledInterpreters names every block whose `disabled` (or a sub-block's)
// is set, in the reference receiver's order.
func TestDisabledInterpretersFollowTheBlocks(t *testing.T) {
	cfg := createDefaultConfig()
	assert.Empty(t, cfg.disabledInterpreters())
	cfg.Interpreters.Ruby.SkipNativeResume = true
	assert.Empty(t, cfg.disabledInterpreters(), "skip_native_resume disables nothing")
	cfg.Interpreters.BEAM.Disabled = true
	cfg.Interpreters.Go.Symbolization.Disabled = true
	cfg.Interpreters.Python.Disabled = true
	cfg.Interpreters.Ruby.Disabled = true
	assert.Equal(t, []string{"python", "ruby", "go", "beam"}, cfg.disabledInterpreters())
}

package profilingreceiver

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// goldenPath is written by the Rust test golden_payload_is_fresh
// (crates/report/src/otlp/tests.rs); its content is described in
// crates/report/testdata/README.md.
const goldenPath = "../crates/report/testdata/golden_profiles.pb"

// frameView is one location of a stack as a person reads it.
type frameView struct {
	functions []string // innermost (inlined) first
	frameType string
	mapping   string // file name of the mapping, "" when none
}

type sampleView struct {
	count      int64
	threadName string
	threadID   int64
	stack      []frameView
	cpu        int64
	// timestamps_unix_nano as milliseconds after the profile's start.
	timesMs []uint64
}

func attrsOf(d pprofile.ProfilesDictionary, indices pcommon.Int32Slice) map[string]pcommon.Value {
	out := map[string]pcommon.Value{}
	for _, i := range indices.AsRaw() {
		kv := d.AttributeTable().At(int(i))
		out[d.StringTable().At(int(kv.KeyStrindex()))] = kv.Value()
	}
	return out
}

func viewSamples(t *testing.T, d pprofile.ProfilesDictionary, p pprofile.Profile) []sampleView {
	t.Helper()
	strs := d.StringTable()
	var out []sampleView
	for i := 0; i < p.Samples().Len(); i++ {
		s := p.Samples().At(i)
		require.Equal(t, 1, s.Values().Len(), "one value per sample (a count)")
		require.Equal(t, int(s.Values().At(0)), s.TimestampsUnixNano().Len(), "one timestamp per event counted")
		attrs := attrsOf(d, s.AttributeIndices())
		v := sampleView{
			count:      s.Values().At(0),
			threadName: attrs["thread.name"].Str(),
			threadID:   attrs["thread.id"].Int(),
			cpu:        attrs["cpu.logical_number"].Int(),
		}
		for _, ts := range s.TimestampsUnixNano().AsRaw() {
			v.timesMs = append(v.timesMs, (ts-uint64(p.Time()))/1_000_000)
		}
		stack := d.StackTable().At(int(s.StackIndex()))
		for _, li := range stack.LocationIndices().AsRaw() {
			loc := d.LocationTable().At(int(li))
			var fv frameView
			for j := 0; j < loc.Lines().Len(); j++ {
				fn := d.FunctionTable().At(int(loc.Lines().At(j).FunctionIndex()))
				fv.functions = append(fv.functions, strs.At(int(fn.NameStrindex())))
			}
			fv.frameType = attrsOf(d, loc.AttributeIndices())["profile.frame.type"].Str()
			if mi := loc.MappingIndex(); mi != 0 {
				fv.mapping = strs.At(int(d.MappingTable().At(int(mi)).FilenameStrindex()))
			}
			v.stack = append(v.stack, fv)
		}
		out = append(out, v)
	}
	return out
}

// TestGoldenPayloadDecodesWithPdata is the guard against proto version
// skew: bytes written by the Rust encoder must mean the same to the
// Collector's pdata.
func TestGoldenPayloadDecodesWithPdata(t *testing.T) {
	b, err := os.ReadFile(goldenPath)
	require.NoError(t, err)
	pd, err := decodeProfiles(b)
	require.NoError(t, err)

	assert.Equal(t, 5, pd.SampleCount())
	d := pd.Dictionary()
	strs := d.StringTable()
	require.Positive(t, strs.Len())
	assert.Equal(t, "", strs.At(0), "string_table[0] is the empty string")
	for name, n := range map[string]int{
		"mapping": d.MappingTable().Len(), "location": d.LocationTable().Len(),
		"function": d.FunctionTable().Len(), "link": d.LinkTable().Len(),
		"attribute": d.AttributeTable().Len(), "stack": d.StackTable().Len(),
	} {
		assert.Positive(t, n, "%s table holds its zero value at index 0", name)
	}
	assert.Equal(t, 0, d.StackTable().At(0).LocationIndices().Len())
	assert.Equal(t, int32(0), d.FunctionTable().At(0).NameStrindex())
	// Every distinct function once: 11 named functions, the stripped
	// frame's file+address name, and the zero value.
	assert.Equal(t, 13, d.FunctionTable().Len())
	// 11 distinct frames (do_syscall_64 shared by both processes) + zero.
	assert.Equal(t, 12, d.LocationTable().Len())

	rps := pd.ResourceProfiles()
	require.Equal(t, 2, rps.Len())

	// Process 1: the C workload.
	res := rps.At(0).Resource().Attributes().AsRaw()
	assert.Equal(t, map[string]any{
		"service.name":            "workload",
		"process.pid":             int64(1234),
		"process.executable.name": "workload",
		"process.executable.path": "/usr/bin/workload",
		"container.id":            "0123456789abcdef",
		// include_env_vars: the process's DEPLOYMENT.
		"process.environment_variable.DEPLOYMENT": "canary",
	}, res)
	require.Equal(t, 1, rps.At(0).ScopeProfiles().Len())
	sp := rps.At(0).ScopeProfiles().At(0)
	assert.Equal(t, "ebpf-profiler", sp.Scope().Name())
	assert.Equal(t, "golden", sp.Scope().Version())
	require.Equal(t, 2, sp.Profiles().Len(), "off-CPU, then on-CPU")

	// Off-CPU: one sample, a value (ns off the CPU) per timestamp.
	offProf := sp.Profiles().At(0)
	assert.Equal(t, "off_cpu", strs.At(int(offProf.SampleType().TypeStrindex())))
	assert.Equal(t, "nanoseconds", strs.At(int(offProf.SampleType().UnitStrindex())))
	assert.Equal(t, int64(0), offProf.Period())
	require.Equal(t, 1, offProf.Samples().Len())
	off := offProf.Samples().At(0)
	assert.Equal(t, []int64{100_000_000, 50_000_000}, off.Values().AsRaw())
	assert.Equal(t, []uint64{1_700_000_000_150_000_000, 1_700_000_000_450_000_000}, off.TimestampsUnixNano().AsRaw())
	assert.Equal(t, "workload", attrsOf(d, off.AttributeIndices())["thread.name"].Str())
	assert.False(t, offProf.ProfileID().IsEmpty())

	prof := sp.Profiles().At(1)
	assert.NotEqual(t, offProf.ProfileID(), prof.ProfileID())
	assert.Equal(t, "samples", strs.At(int(prof.SampleType().TypeStrindex())))
	assert.Equal(t, "count", strs.At(int(prof.SampleType().UnitStrindex())))
	assert.Equal(t, "cpu", strs.At(int(prof.PeriodType().TypeStrindex())))
	assert.Equal(t, "nanoseconds", strs.At(int(prof.PeriodType().UnitStrindex())))
	assert.Equal(t, int64(50_000_000), prof.Period())
	assert.Equal(t, uint64(1_700_000_000_000_000_000), uint64(prof.Time()))
	assert.Equal(t, uint64(5_000_000_000), prof.DurationNano())
	assert.False(t, prof.ProfileID().IsEmpty(), "every profile has a profile_id")

	sleepStack := []frameView{
		{[]string{"hrtimer_nanosleep"}, "kernel", "vmlinux"},
		{[]string{"do_syscall_64"}, "kernel", "vmlinux"},
		{[]string{"clock_nanosleep"}, "native", "/usr/lib/x86_64-linux-gnu/libc.so.6"},
		{[]string{"inlined_helper", "leaf"}, "native", "/usr/bin/workload"},
		{[]string{"middle"}, "native", "/usr/bin/workload"},
		{[]string{"main"}, "native", "/usr/bin/workload"},
		{[]string{"__libc_start_call_main"}, "native", "/usr/lib/x86_64-linux-gnu/libc.so.6"},
	}
	assert.Equal(t, []sampleView{
		{3, "worker", 1235, sleepStack, 1, []uint64{0, 100, 200}},
		{2, "workload", 1234, sleepStack, 0, []uint64{300, 400}},
		{1, "worker", 1235, []frameView{
			{[]string{"workload+0x1234"}, "native", "/usr/bin/workload"},
			{[]string{"main"}, "native", "/usr/bin/workload"},
			{[]string{"__libc_start_call_main"}, "native", "/usr/lib/x86_64-linux-gnu/libc.so.6"},
		}, 1, []uint64{500}},
	}, viewSamples(t, d, prof))

	// Inlining: the leaf location has two lines with their line numbers.
	leafStack := d.StackTable().At(int(prof.Samples().At(0).StackIndex()))
	leaf := d.LocationTable().At(int(leafStack.LocationIndices().At(3)))
	assert.Equal(t, uint64(0x1150), leaf.Address())
	assert.Equal(t, int64(5), leaf.Lines().At(0).Line())
	assert.Equal(t, int64(12), leaf.Lines().At(1).Line())
	assert.Equal(t, "workload.c", strs.At(int(d.FunctionTable().At(int(leaf.Lines().At(1).FunctionIndex())).FilenameStrindex())))

	// Mappings and their build ids.
	m := d.MappingTable().At(int(leaf.MappingIndex()))
	assert.Equal(t, uint64(0x55_5555_4000), m.MemoryStart())
	assert.Equal(t, uint64(0x55_5555_9000), m.MemoryLimit())
	assert.Equal(t, uint64(0x1000), m.FileOffset())
	assert.Equal(t, map[string]pcommon.Value{
		"process.executable.build_id.htlhash": pcommon.NewValueStr("0123456789abcdeffedcba9876543210"),
		"process.executable.build_id.gnu":     pcommon.NewValueStr("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"),
	}, attrsOf(d, m.AttributeIndices()))

	// Process 2: the Go server, no container.
	assert.Equal(t, map[string]any{
		"service.name":            "checkout",
		"process.pid":             int64(4242),
		"process.executable.name": "server",
		"process.executable.path": "/usr/local/bin/server",
	}, rps.At(1).Resource().Attributes().AsRaw())
	goProf := rps.At(1).ScopeProfiles().At(0).Profiles().At(0)
	assert.False(t, goProf.ProfileID().IsEmpty())
	assert.NotEqual(t, prof.ProfileID(), goProf.ProfileID(), "profile ids are distinct")
	goSamples := viewSamples(t, d, goProf)
	assert.Equal(t, []sampleView{{4, "server-worker", 4250, []frameView{
		{[]string{"do_syscall_64"}, "kernel", "vmlinux"},
		{[]string{"main.work"}, "go", "/usr/local/bin/server"},
		{[]string{"main.main"}, "go", "/usr/local/bin/server"},
		{[]string{"runtime.main"}, "go", "/usr/local/bin/server"},
	}, 3, []uint64{600, 700, 800, 900}}}, goSamples)
	goStack := d.StackTable().At(int(goProf.Samples().At(0).StackIndex()))
	goMapping := d.MappingTable().At(int(d.LocationTable().At(int(goStack.LocationIndices().At(1))).MappingIndex()))
	assert.Equal(t, map[string]pcommon.Value{
		"process.executable.build_id.htlhash": pcommon.NewValueStr("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
		"process.executable.build_id.go":      pcommon.NewValueStr("goBuildId/abc/def/ghi"),
	}, attrsOf(d, goMapping.AttributeIndices()))
	// The kernel frame shared by both processes is one location.
	assert.Equal(t, leafStack.LocationIndices().At(1), goStack.LocationIndices().At(0))
	// Kernel frames come under vmlinux with the running kernel's build id.
	kernel := d.MappingTable().At(int(d.LocationTable().At(int(goStack.LocationIndices().At(0))).MappingIndex()))
	assert.Equal(t, "vmlinux", strs.At(int(kernel.FilenameStrindex())))
	assert.Equal(t, map[string]pcommon.Value{
		"process.executable.build_id.gnu": pcommon.NewValueStr("fa36776b59bf96ada9b36526d3ba1705c7a98183"),
	}, attrsOf(d, kernel.AttributeIndices()))
}

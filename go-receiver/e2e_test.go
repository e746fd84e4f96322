package profilingreceiver

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// readProtoFile reads what the contrib file exporter writes with
// `format: proto`: messages each preceded by a 4-byte big-endian length.
func readProtoFile(t *testing.T, path string) []pprofile.Profiles {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []pprofile.Profiles
	for {
		var n uint32
		if err := binary.Read(f, binary.BigEndian, &n); err == io.EOF {
			return out
		} else {
			require.NoError(t, err, "%s: length prefix", path)
		}
		buf := make([]byte, n)
		_, err := io.ReadFull(f, buf)
		require.NoError(t, err, "%s: message of %d bytes", path, n)
		pd, err := (&pprofile.ProtoUnmarshaler{}).UnmarshalProfiles(buf)
		require.NoError(t, err, "%s: decoding", path)
		out = append(out, pd)
	}
}

// containsInOrder reports whether needle occurs in haystack as consecutive
// elements.
func containsInOrder(haystack, needle []string) bool {
	for i := 0; i+len(needle) <= len(haystack); i++ {
		if strings.Join(haystack[i:i+len(needle)], "\x00") == strings.Join(needle, "\x00") {
			return true
		}
	}
	return false
}

// TestE2EProfiles checks what a sink collector received in the end-to-end
// test (tests/e2e/collector_e2e.sh sets the environment; skipped
// otherwise):
//
//	EBPF_PROFILER_E2E_FILES       comma-separated file exporter outputs (proto), each must hold the workload
//	EBPF_PROFILER_E2E_PID         the workload's pid
//	EBPF_PROFILER_E2E_TID         only this thread's samples (default: the pid, i.e. the main thread)
//	EBPF_PROFILER_E2E_NAME        its process.executable.name and the thread's thread.name
//	EBPF_PROFILER_E2E_CHAIN       comma-separated function names, leaf first, consecutive in the stack
//	EBPF_PROFILER_E2E_FRAME_TYPE  profile.frame.type of the chain's frames
//	EBPF_PROFILER_E2E_MIN_SHARE   share of the workload's samples that must carry the chain (default 0.5)
//	EBPF_PROFILER_E2E_CONTAINER_ID  if set, the workload's container.id (it runs in a container)
func TestE2EProfiles(t *testing.T) {
	files := os.Getenv("EBPF_PROFILER_E2E_FILES")
	if files == "" {
		t.Skip("EBPF_PROFILER_E2E_FILES is not set: run tests/e2e/collector_e2e.sh")
	}
	pid, err := strconv.ParseInt(os.Getenv("EBPF_PROFILER_E2E_PID"), 10, 64)
	require.NoError(t, err, "EBPF_PROFILER_E2E_PID")
	tid := pid
	if s := os.Getenv("EBPF_PROFILER_E2E_TID"); s != "" {
		tid, err = strconv.ParseInt(s, 10, 64)
		require.NoError(t, err, "EBPF_PROFILER_E2E_TID")
	}
	name := os.Getenv("EBPF_PROFILER_E2E_NAME")
	chain := strings.Split(os.Getenv("EBPF_PROFILER_E2E_CHAIN"), ",")
	frameType := os.Getenv("EBPF_PROFILER_E2E_FRAME_TYPE")
	minShare := 0.5
	if s := os.Getenv("EBPF_PROFILER_E2E_MIN_SHARE"); s != "" {
		minShare, err = strconv.ParseFloat(s, 64)
		require.NoError(t, err)
	}

	containerID := os.Getenv("EBPF_PROFILER_E2E_CONTAINER_ID")

	var total, withChain int64
	var firstStack []string
	for _, path := range strings.Split(files, ",") {
		batches := readProtoFile(t, path)
		require.NotEmpty(t, batches, "%s: the sink received nothing", path)
		var inFile int64
		for _, pd := range batches {
			d := pd.Dictionary()
			for i := 0; i < pd.ResourceProfiles().Len(); i++ {
				rp := pd.ResourceProfiles().At(i)
				attrs := rp.Resource().Attributes()
				p, ok := attrs.Get("process.pid")
				if !ok || p.Int() != pid {
					continue
				}
				exe, _ := attrs.Get("process.executable.name")
				assert.Equal(t, name, exe.Str(), "process.executable.name")
				if containerID != "" {
					cid, ok := attrs.Get("container.id")
					assert.True(t, ok, "pid %d has no container.id", pid)
					assert.Equal(t, containerID, cid.Str(), "container.id")
				}
				for j := 0; j < rp.ScopeProfiles().Len(); j++ {
					profiles := rp.ScopeProfiles().At(j).Profiles()
					for k := 0; k < profiles.Len(); k++ {
						for _, s := range viewSamples(t, d, profiles.At(k)) {
							if s.threadID != tid {
								continue
							}
							assert.Equal(t, name, s.threadName, "thread.name")
							var names []string
							chainTypesOK := true
							for _, f := range s.stack {
								if len(f.functions) == 0 {
									names = append(names, "?")
									continue
								}
								names = append(names, f.functions[len(f.functions)-1])
							}
							if firstStack == nil {
								firstStack = names
							}
							total += s.count
							inFile += s.count
							if containsInOrder(names, chain) {
								for _, f := range s.stack {
									if len(f.functions) > 0 && containsInOrder(chain, f.functions[len(f.functions)-1:]) && f.frameType != frameType {
										chainTypesOK = false
									}
								}
								assert.True(t, chainTypesOK, "chain frames must have profile.frame.type %q: %+v", frameType, s.stack)
								withChain += s.count
							}
						}
					}
				}
			}
		}
		assert.Positive(t, inFile, "%s holds no sample of pid %d, thread %d", path, pid, tid)
	}
	require.Positive(t, total, "no sample of pid %d, thread %d at all", pid, tid)
	share := float64(withChain) / float64(total)
	t.Logf("%d of %d samples of %s carry %v (%.0f%%)", withChain, total, name, chain, share*100)
	assert.GreaterOrEqual(t, share, minShare,
		fmt.Sprintf("too few samples carry the chain; first stack (leaf first): %v", firstStack))
}

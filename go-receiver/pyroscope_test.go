package profilingreceiver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // the agent and the Collector compress

	"google.golang.org/grpc/status"
)

// pyroscopeLabels applies the rules Grafana Pyroscope's OTLP ingest
// applies to a resource before it accepts a profile (seen with Pyroscope
// v2.2.1: a referenced key became a label with an empty name and the
// whole export was refused with "invalid label name ”"): every resource
// attribute becomes a label named by its plain key, string values are
// read as plain strings, and `service.name` becomes `service_name`
// ("unknown_service" when absent).
func pyroscopeLabels(res pcommon.Resource) (map[string]string, error) {
	labels := map[string]string{}
	var err error
	res.Attributes().Range(func(k string, v pcommon.Value) bool {
		if k == "" {
			err = fmt.Errorf("invalid label name ''")
			return false
		}
		labels[k] = v.AsString()
		return true
	})
	if err != nil {
		return nil, err
	}
	labels["service_name"] = "unknown_service"
	if name, ok := labels["service.name"]; ok && name != "" {
		labels["service_name"] = name
	}
	return labels, nil
}

// checkPyroscopeRules applies pyroscopeLabels to every resource of a
// request as it arrived on the wire (no references resolved).
func checkPyroscopeRules(pd pprofile.Profiles) error {
	for i := 0; i < pd.ResourceProfiles().Len(); i++ {
		if _, err := pyroscopeLabels(pd.ResourceProfiles().At(i).Resource()); err != nil {
			return err
		}
	}
	return nil
}

// TestCollectorSendsWhatPyroscopeReads follows the golden payload along
// the Collector's path: the receiver decodes it, and the otlp_grpc
// exporter sends the request's proto as it is (pprofileotlp's gRPC
// client marshals the request without converting anything). What would
// arrive at Pyroscope must pass its rules, with the process's service.
func TestCollectorSendsWhatPyroscopeReads(t *testing.T) {
	b, err := os.ReadFile(goldenPath)
	require.NoError(t, err)
	pd, err := decodeProfiles(b)
	require.NoError(t, err)
	wire, err := pprofileotlp.NewExportRequestFromProfiles(pd).MarshalProto()
	require.NoError(t, err)
	received := pprofileotlp.NewExportRequest()
	require.NoError(t, received.UnmarshalProto(wire))
	require.NoError(t, checkPyroscopeRules(received.Profiles()))
	labels, err := pyroscopeLabels(received.Profiles().ResourceProfiles().At(1).Resource())
	require.NoError(t, err)
	assert.Equal(t, "checkout", labels["service_name"])
	assert.Equal(t, "4242", labels["process.pid"])

	// The rules bite: the encoding we sent before (keys by reference)
	// is refused.
	refs := pprofile.NewProfiles()
	refs.ResourceProfiles().AppendEmpty().Resource().Attributes().PutStr("", "30874")
	assert.EqualError(t, checkPyroscopeRules(refs), "invalid label name ''")
}

// pyroscopeSink is an OTLP profiles gRPC server that refuses what
// Pyroscope refuses and keeps what it accepts.
type pyroscopeSink struct {
	pprofileotlp.UnimplementedGRPCServer
	mu       sync.Mutex
	accepted []pprofile.Profiles
	refused  []error
}

func (s *pyroscopeSink) Export(_ context.Context, req pprofileotlp.ExportRequest) (pprofileotlp.ExportResponse, error) {
	pd := pprofile.NewProfiles()
	req.Profiles().CopyTo(pd)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := checkPyroscopeRules(pd); err != nil {
		s.refused = append(s.refused, err)
		return pprofileotlp.NewExportResponse(), status.Error(codes.InvalidArgument, err.Error())
	}
	s.accepted = append(s.accepted, pd)
	return pprofileotlp.NewExportResponse(), nil
}

func startPyroscopeSink(t *testing.T) (*pyroscopeSink, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	sink := &pyroscopeSink{}
	pprofileotlp.RegisterGRPCServer(srv, sink)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return sink, lis.Addr().String()
}

// cpuSeconds is utime + stime of a process (/proc/PID/stat, 100 Hz ticks).
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	require.NoError(t, err1)
	require.NoError(t, err2)
	return (utime + stime) / 100
}

// TestPyroscopeAcceptsAgentAndCollector runs the standalone agent and the
// Collector distribution against a sink with Pyroscope's rules while dd
// reads /dev/zero under OTEL_SERVICE_NAME=dd-under-test: every export is
// accepted, dd's profiles carry its service, its kernel chain and about
// the CPU time it used. Run by tests/e2e/pyroscope_e2e.sh (root, BPF),
// which sets EBPF_PROFILER_AGENT_BIN and EBPF_PROFILER_COLLECTOR_BIN;
// skipped without them.
func TestPyroscopeAcceptsAgentAndCollector(t *testing.T) {
	agentBin, collectorBin := os.Getenv("EBPF_PROFILER_AGENT_BIN"), os.Getenv("EBPF_PROFILER_COLLECTOR_BIN")
	if agentBin == "" || collectorBin == "" {
		t.Skip("EBPF_PROFILER_AGENT_BIN / EBPF_PROFILER_COLLECTOR_BIN not set (tests/e2e/pyroscope_e2e.sh sets them)")
	}
	for _, front := range []string{"agent", "collector"} {
		t.Run(front, func(t *testing.T) {
			sink, addr := startPyroscopeSink(t)
			dd := exec.Command("dd", "if=/dev/zero", "of=/dev/null", "bs=1M")
			dd.Env = append(os.Environ(), "OTEL_SERVICE_NAME=dd-under-test")
			require.NoError(t, dd.Start())
			t.Cleanup(func() { _ = dd.Process.Kill(); _ = dd.Wait() })

			const hz = 97
			var cmd *exec.Cmd
			if front == "agent" {
				cmd = exec.Command(agentBin, "--collection-agent", addr, "--disable-tls",
					"--samples-per-second", strconv.Itoa(hz), "--reporter-interval", "1s",
					"--pid", strconv.Itoa(dd.Process.Pid), "--output", filepath.Join(t.TempDir(), "out.folded"))
			} else {
				config := filepath.Join(t.TempDir(), "collector.yaml")
				require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`receivers:
  profiling:
    samples_per_second: %d
    reporter_interval: 1s
    pids: [%d]
exporters:
  otlp_grpc:
    endpoint: %s
    tls:
      insecure: true
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [profiling]
      exporters: [otlp_grpc]
`, hz, dd.Process.Pid, addr)), 0o600))
				cmd = exec.Command(collectorBin, "--feature-gates=service.profilesSupport", "--config", config)
			}
			log := filepath.Join(t.TempDir(), front+".log")
			logFile, err := os.Create(log)
			require.NoError(t, err)
			cmd.Stdout, cmd.Stderr = logFile, logFile
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

			// Profile for a while once the first profile of dd arrived.
			deadline := time.Now().Add(60 * time.Second)
			for len(ddProfiles(sink, dd.Process.Pid)) == 0 {
				require.True(t, time.Now().Before(deadline), "no profile of dd within 60 s; log: %s", readFile(log))
				time.Sleep(200 * time.Millisecond)
			}
			// dd's CPU rate over the next seconds against the rate the
			// profiles that arrive meanwhile show (samples / Hz over the
			// intervals they cover).
			seen := len(ddProfiles(sink, dd.Process.Pid))
			cpuBefore, wallBefore := cpuSeconds(t, dd.Process.Pid), time.Now()
			time.Sleep(6 * time.Second)
			cpuRate := (cpuSeconds(t, dd.Process.Pid) - cpuBefore) / time.Since(wallBefore).Seconds()
			var samples int64
			var covered float64
			for _, p := range ddProfiles(sink, dd.Process.Pid)[seen:] {
				covered += float64(p.profile.DurationNano()) / 1e9
				for i := 0; i < p.profile.Samples().Len(); i++ {
					samples += p.profile.Samples().At(i).Values().At(0)
				}
			}
			require.Positive(t, covered, "no profile of dd arrived within 6 s")
			profiledRate := float64(samples) / hz / covered

			sink.mu.Lock()
			refused, accepted := len(sink.refused), len(sink.accepted)
			sink.mu.Unlock()
			assert.Zero(t, refused, "Pyroscope's rules refused exports")
			assert.Positive(t, accepted)
			assert.InDelta(t, cpuRate, profiledRate, 0.25*cpuRate+0.05,
				"dd's CPU per second: %.2f measured, %.2f in the profiles", cpuRate, profiledRate)

			withChain, total := 0, 0
			for _, p := range ddProfiles(sink, dd.Process.Pid) {
				labels, err := pyroscopeLabels(p.resource)
				require.NoError(t, err)
				assert.Equal(t, "dd-under-test", labels["service_name"])
				assert.Equal(t, "dd", labels["process.executable.name"])
				for _, s := range viewSamples(t, p.dict, p.profile) {
					var names []string
					for _, f := range s.stack {
						names = append(names, f.functions...)
					}
					total += int(s.count)
					if containsInOrder(names, []string{"read_zero", "vfs_read", "ksys_read"}) {
						withChain += int(s.count)
					}
				}
			}
			require.Positive(t, total)
			t.Logf("%s: %d exports accepted, 0 refused; dd CPU/s %.2f measured, %.2f profiled; chain in %d of %d samples",
				front, accepted, cpuRate, profiledRate, withChain, total)
			assert.GreaterOrEqual(t, float64(withChain)/float64(total), 0.8,
				"dd's samples with read_zero <- vfs_read <- ksys_read: %d of %d", withChain, total)
		})
	}
}

type ddProfile struct {
	resource pcommon.Resource
	dict     pprofile.ProfilesDictionary
	profile  pprofile.Profile
}

// ddProfiles are the accepted profiles of process pid.
func ddProfiles(s *pyroscopeSink, pid int) []ddProfile {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ddProfile
	for _, pd := range s.accepted {
		for i := 0; i < pd.ResourceProfiles().Len(); i++ {
			rp := pd.ResourceProfiles().At(i)
			if v, ok := rp.Resource().Attributes().Get("process.pid"); !ok || v.Int() != int64(pid) {
				continue
			}
			for j := 0; j < rp.ScopeProfiles().Len(); j++ {
				for k := 0; k < rp.ScopeProfiles().At(j).Profiles().Len(); k++ {
					out = append(out, ddProfile{rp.Resource(), pd.Dictionary(), rp.ScopeProfiles().At(j).Profiles().At(k)})
				}
			}
		}
	}
	return out
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

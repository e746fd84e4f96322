package profilingreceiver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/encoding/gzip" // the agent and the Collector compress
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the OTLP messages on the path to a resource attribute
// (proto v1.10.0; ExportProfilesServiceRequest and ProfilesData number
// resource_profiles alike).
const (
	wireResourceProfiles = 1 // ExportProfilesServiceRequest.resource_profiles
	wireResource         = 1 // ResourceProfiles.resource
	wireAttributes       = 1 // Resource.attributes
	wireKey              = 1 // KeyValue.key
	wireValue            = 2 // KeyValue.value
	wireStringValue      = 1 // AnyValue.string_value
	wireBoolValue        = 2 // AnyValue.bool_value
	wireIntValue         = 3 // AnyValue.int_value
)

// wireFields calls fn for each field of a protobuf message; fn gets the
// field's number and its bytes (length-delimited) or value (varint).
func wireFields(b []byte, fn func(num protowire.Number, typ protowire.Type, bytes []byte, value uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var bytes []byte
		var value uint64
		switch typ {
		case protowire.BytesType:
			bytes, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			value, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, bytes, value); err != nil {
			return err
		}
	}
	return nil
}

// pyroscopeLabels applies the rules Grafana Pyroscope's OTLP ingest
// applies to the resources of a request as they are on the wire (seen with
// Pyroscope v2.2.1: a key sent as a string-table reference became a label
// with an empty name and the whole export was refused with "invalid label
// name ”"): every resource attribute becomes a label named by its plain
// `key`, a value is its plain string_value (or int/bool value; a
// string_value_strindex reads as ""), and `service.name` becomes
// `service_name` ("unknown_service" when absent or empty). Nothing here
// resolves a reference: pdata's unmarshalers do, which is why the checks
// read the bytes.
func pyroscopeLabels(request []byte) ([]map[string]string, error) {
	var out []map[string]string
	err := wireFields(request, func(num protowire.Number, _ protowire.Type, rp []byte, _ uint64) error {
		if num != wireResourceProfiles {
			return nil
		}
		labels := map[string]string{}
		err := wireFields(rp, func(num protowire.Number, _ protowire.Type, res []byte, _ uint64) error {
			if num != wireResource {
				return nil
			}
			return wireFields(res, func(num protowire.Number, _ protowire.Type, kv []byte, _ uint64) error {
				if num != wireAttributes {
					return nil
				}
				var key, value string
				err := wireFields(kv, func(num protowire.Number, _ protowire.Type, b []byte, _ uint64) error {
					switch num {
					case wireKey:
						key = string(b)
					case wireValue:
						return wireFields(b, func(num protowire.Number, _ protowire.Type, s []byte, v uint64) error {
							switch num {
							case wireStringValue:
								value = string(s)
							case wireIntValue:
								value = strconv.FormatInt(int64(v), 10)
							case wireBoolValue:
								value = strconv.FormatBool(v != 0)
							}
							return nil
						})
					}
					return nil
				})
				if err != nil {
					return err
				}
				if key == "" {
					return fmt.Errorf("invalid label name ''")
				}
				labels[key] = value
				return nil
			})
		})
		if err != nil {
			return err
		}
		labels["service_name"] = "unknown_service"
		if name := labels["service.name"]; name != "" {
			labels["service_name"] = name
		}
		out = append(out, labels)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// pprofileVersion is the version of pdata/pprofile this test binary links
// (go.mod's or go.core.mod's), read from where its source was compiled
// (test binaries carry no module list; a path in the module cache, or
// under -trimpath, names the module's version).
func pprofileVersion(t *testing.T) string {
	t.Helper()
	pc := reflect.ValueOf(pprofile.NewProfiles).Pointer()
	file, _ := runtime.FuncForPC(pc).FileLine(pc)
	m := regexp.MustCompile(`/pdata/pprofile@(v[^/]+)/`).FindStringSubmatch(file)
	require.NotNil(t, m, "pdata/pprofile compiled from %s: no version in the path", file)
	return m[1]
}

// exporterSendsReferences: from pdata/pprofile v0.163.0 on, pprofileotlp's
// gRPC client (the otlp_grpc exporter's) interns resource and scope
// attribute keys and string values in the string table before it sends.
func exporterSendsReferences(t *testing.T, version string) bool {
	t.Helper()
	m := regexp.MustCompile(`^v0\.(\d+)\.`).FindStringSubmatch(version)
	require.NotNil(t, m, "pdata/pprofile %s is not a v0.x release", version)
	minor, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return minor >= 163
}

// TestCollectorSendsWhatPyroscopeReads follows the golden payload along
// the Collector's path: the receiver decodes it, and the otlp_grpc
// exporter's client (pprofileotlp) sends it over gRPC to a sink that
// applies Pyroscope's rules to the bytes that arrive. At the full
// distribution's release (go.mod) the keys arrive plain and Pyroscope
// accepts the process's service; at the current core's (go.core.mod) the
// client sends them by reference and Pyroscope refuses the export, which
// is why the full distribution stays at its release (versions.env).
func TestCollectorSendsWhatPyroscopeReads(t *testing.T) {
	b, err := os.ReadFile(goldenPath)
	require.NoError(t, err)

	// What the agent itself sends (the Rust encoder's golden payload):
	// plain keys and values.
	labels, err := pyroscopeLabels(b)
	require.NoError(t, err, "the agent's own payload")
	require.Len(t, labels, 2)
	assert.Equal(t, "checkout", labels[1]["service_name"])
	assert.Equal(t, "4242", labels[1]["process.pid"])

	pd, err := decodeProfiles(b)
	require.NoError(t, err)
	sink, addr := startPyroscopeSink(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, exportErr := pprofileotlp.NewGRPCClient(conn).Export(ctx, pprofileotlp.NewExportRequestFromProfiles(pd))

	sink.mu.Lock()
	defer sink.mu.Unlock()
	version := pprofileVersion(t)
	if exporterSendsReferences(t, version) {
		require.Error(t, exportErr, "pprofile %s", version)
		assert.Equal(t, codes.InvalidArgument, status.Code(exportErr))
		require.Len(t, sink.refused, 1)
		assert.EqualError(t, sink.refused[0], "invalid label name ''")
		assert.Empty(t, sink.accepted)
		t.Logf("pprofile %s: the exporter sends keys by reference; Pyroscope's rules refuse them", version)
		return
	}
	require.NoError(t, exportErr, "pprofile %s", version)
	assert.Empty(t, sink.refused)
	require.Len(t, sink.accepted, 1)
	require.Len(t, sink.accepted[0].labels, 2)
	assert.Equal(t, "checkout", sink.accepted[0].labels[1]["service_name"])
	assert.Equal(t, "4242", sink.accepted[0].labels[1]["process.pid"])
	t.Logf("pprofile %s: the exporter sends plain keys; Pyroscope's rules accept them", version)
}

// TestPyroscopeRulesBite: the rules refuse what pdata's own marshaler
// writes at both releases (keys by reference, as the agent once sent).
func TestPyroscopeRulesBite(t *testing.T) {
	pd := pprofile.NewProfiles()
	pd.ResourceProfiles().AppendEmpty().Resource().Attributes().PutStr("process.pid", "30874")
	refs, err := (&pprofile.ProtoMarshaler{}).MarshalProfiles(pd)
	require.NoError(t, err)
	_, err = pyroscopeLabels(refs)
	assert.EqualError(t, err, "invalid label name ''")
}

// acceptedRequest is a request the sink accepted: decoded with pdata,
// and the labels Pyroscope read from its bytes, one per resource.
type acceptedRequest struct {
	profiles pprofile.Profiles
	labels   []map[string]string
}

// pyroscopeSink is an OTLP profiles gRPC server that reads each request's
// bytes as Pyroscope does, refuses what Pyroscope refuses and keeps what
// it accepts.
type pyroscopeSink struct {
	mu       sync.Mutex
	accepted []acceptedRequest
	refused  []error
}

const profilesExportMethod = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"

// rawCodec hands the server the request's bytes as they arrived
// (decompressed, not decoded).
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

func (s *pyroscopeSink) handle(_ any, stream grpc.ServerStream) error {
	if method, _ := grpc.MethodFromServerStream(stream); method != profilesExportMethod {
		return status.Errorf(codes.Unimplemented, "method %s not implemented", method)
	}
	var request []byte
	if err := stream.RecvMsg(&request); err != nil {
		return err
	}
	labels, err := pyroscopeLabels(request)
	if err == nil {
		req := pprofileotlp.NewExportRequest()
		if err = req.UnmarshalProto(request); err == nil {
			s.mu.Lock()
			s.accepted = append(s.accepted, acceptedRequest{req.Profiles(), labels})
			s.mu.Unlock()
			// An empty ExportProfilesServiceResponse.
			return stream.SendMsg(&[]byte{})
		}
	}
	s.mu.Lock()
	s.refused = append(s.refused, err)
	s.mu.Unlock()
	return status.Error(codes.InvalidArgument, err.Error())
}

func startPyroscopeSink(t *testing.T) (*pyroscopeSink, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	sink := &pyroscopeSink{}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(sink.handle))
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
// the CPU time it used. With EBPF_PROFILER_CORE_COLLECTOR_BIN (the
// core-only distribution of the current Collector) the same pipeline's
// exports are all refused: its otlp_grpc exporter sends the keys by
// reference (versions.env). Run by tests/e2e/pyroscope_e2e.sh (root, BPF),
// which sets EBPF_PROFILER_AGENT_BIN and EBPF_PROFILER_COLLECTOR_BIN, and
// EBPF_PROFILER_CORE_COLLECTOR_BIN when that binary is built; skipped
// without the first two.
func TestPyroscopeAcceptsAgentAndCollector(t *testing.T) {
	agentBin, collectorBin := os.Getenv("EBPF_PROFILER_AGENT_BIN"), os.Getenv("EBPF_PROFILER_COLLECTOR_BIN")
	if agentBin == "" || collectorBin == "" {
		t.Skip("EBPF_PROFILER_AGENT_BIN / EBPF_PROFILER_COLLECTOR_BIN not set (tests/e2e/pyroscope_e2e.sh sets them)")
	}
	coreBin := os.Getenv("EBPF_PROFILER_CORE_COLLECTOR_BIN")
	fronts := []string{"agent", "collector"}
	if coreBin != "" {
		fronts = append(fronts, "core")
	}
	for _, front := range fronts {
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
				bin := collectorBin
				if front == "core" {
					bin = coreBin
				}
				cmd = exec.Command(bin, "--feature-gates=service.profilesSupport", "--config", config)
			}
			log := filepath.Join(t.TempDir(), front+".log")
			logFile, err := os.Create(log)
			require.NoError(t, err)
			cmd.Stdout, cmd.Stderr = logFile, logFile
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

			if front == "core" {
				// The first export is refused as a whole, and every one after.
				deadline := time.Now().Add(60 * time.Second)
				for {
					sink.mu.Lock()
					refused := len(sink.refused)
					sink.mu.Unlock()
					if refused >= 3 {
						break
					}
					require.True(t, time.Now().Before(deadline), "fewer than 3 exports within 60 s; log: %s", readFile(log))
					time.Sleep(200 * time.Millisecond)
				}
				sink.mu.Lock()
				defer sink.mu.Unlock()
				assert.Empty(t, sink.accepted, "the current core's exporter sent plain keys")
				for _, err := range sink.refused {
					assert.EqualError(t, err, "invalid label name ''")
				}
				t.Logf("core: %d exports refused, 0 accepted (keys by reference)", len(sink.refused))
				return
			}

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
				assert.Equal(t, "dd-under-test", p.labels["service_name"])
				assert.Equal(t, "dd", p.labels["process.executable.name"])
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
	labels  map[string]string // Pyroscope's, from the wire
	dict    pprofile.ProfilesDictionary
	profile pprofile.Profile
}

// ddProfiles are the accepted profiles of process pid.
func ddProfiles(s *pyroscopeSink, pid int) []ddProfile {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ddProfile
	for _, req := range s.accepted {
		pd := req.profiles
		for i := 0; i < pd.ResourceProfiles().Len(); i++ {
			rp := pd.ResourceProfiles().At(i)
			if v, ok := rp.Resource().Attributes().Get("process.pid"); !ok || v.Int() != int64(pid) {
				continue
			}
			for j := 0; j < rp.ScopeProfiles().Len(); j++ {
				for k := 0; k < rp.ScopeProfiles().At(j).Profiles().Len(); k++ {
					out = append(out, ddProfile{req.labels[i], pd.Dictionary(), rp.ScopeProfiles().At(j).Profiles().At(k)})
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

// Command otlp_sink accepts OTLP profiles over gRPC and discards them,
// counting requests, sample entries and the events they stand for: the
// reference agent does not sample until its collector answers, so the
// churn bench runs this beside it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // the reference compresses its requests
)

type sink struct {
	pprofileotlp.UnimplementedGRPCServer
	requests atomic.Uint64
	entries  atomic.Uint64
	events   atomic.Uint64
}

// events counts what the entries of one request stand for: an entry
// with timestamps is one event per timestamp (several samples of one
// stack share an entry), one without is its first value (a count).
func events(req pprofileotlp.ExportRequest) uint64 {
	var n uint64
	rps := req.Profiles().ResourceProfiles()
	for i := 0; i < rps.Len(); i++ {
		sps := rps.At(i).ScopeProfiles()
		for j := 0; j < sps.Len(); j++ {
			ps := sps.At(j).Profiles()
			for k := 0; k < ps.Len(); k++ {
				samples := ps.At(k).Samples()
				for l := 0; l < samples.Len(); l++ {
					s := samples.At(l)
					switch {
					case s.TimestampsUnixNano().Len() > 0:
						n += uint64(s.TimestampsUnixNano().Len())
					case s.Values().Len() > 0 && s.Values().At(0) > 0:
						n += uint64(s.Values().At(0))
					default:
						n++
					}
				}
			}
		}
	}
	return n
}

func (s *sink) Export(_ context.Context, req pprofileotlp.ExportRequest) (pprofileotlp.ExportResponse, error) {
	s.requests.Add(1)
	s.entries.Add(uint64(req.Profiles().SampleCount()))
	s.events.Add(events(req))
	return pprofileotlp.NewExportResponse(), nil
}

func main() {
	addr := flag.String("listen", "127.0.0.1:11000", "address to listen on")
	flag.Parse()
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	s := &sink{}
	pprofileotlp.RegisterGRPCServer(srv, s)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() { <-sig; srv.Stop() }()
	fmt.Fprintf(os.Stderr, "otlp_sink: listening on %s\n", *addr)
	_ = srv.Serve(lis)
	fmt.Fprintf(os.Stderr, "otlp_sink: %d requests, %d samples in %d entries\n", s.requests.Load(), s.events.Load(), s.entries.Load())
}

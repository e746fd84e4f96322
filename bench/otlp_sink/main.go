// Command otlp_sink accepts OTLP profiles over gRPC and discards them,
// counting requests and samples: the reference agent does not sample
// until its collector answers, so the churn bench runs this beside it.
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
	samples  atomic.Uint64
}

func (s *sink) Export(_ context.Context, req pprofileotlp.ExportRequest) (pprofileotlp.ExportResponse, error) {
	s.requests.Add(1)
	s.samples.Add(uint64(req.Profiles().SampleCount()))
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
	fmt.Fprintf(os.Stderr, "otlp_sink: %d requests, %d samples\n", s.requests.Load(), s.samples.Load())
}

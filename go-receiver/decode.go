package profilingreceiver

import (
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
)

// decodeProfiles turns the bytes of one batch (an OTLP
// ExportProfilesServiceRequest) into pdata.
//
// It decodes the request as the Collector's own OTLP receiver does, not
// with pprofile.ProtoUnmarshaler: at pdata v0.159.0 that unmarshaler
// replaces every resource attribute key with string_table[key_strindex],
// which turns the plain keys we send ("service.name", "process.pid", as
// OTLP defines them and as Pyroscope requires) into "". Resource
// attributes stay plain all the way to the exporters this way.
func decodeProfiles(b []byte) (pprofile.Profiles, error) {
	req := pprofileotlp.NewExportRequest()
	if err := req.UnmarshalProto(b); err != nil {
		return pprofile.Profiles{}, err
	}
	return req.Profiles(), nil
}

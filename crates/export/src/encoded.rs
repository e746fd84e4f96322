//! The export call on a request encoded once, when it is queued: the
//! buffer holds protobuf bytes (a third of the message's heap or less,
//! shared by every attempt) instead of the message, which a generated
//! client would also clone for each attempt.

use bytes::{BufMut, Bytes};
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceResponse;
use prost::Message;
use tonic::client::Grpc;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::metadata::MetadataMap;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

/// `ProfilesService/Export`'s gRPC path.
const EXPORT_PATH: &str = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export";

/// Sends already encoded request bytes and decodes the response.
#[derive(Clone, Copy, Debug, Default)]
struct EncodedCodec;

impl Codec for EncodedCodec {
    type Encode = Bytes;
    type Decode = ExportProfilesServiceResponse;
    type Encoder = EncodedCodec;
    type Decoder = EncodedCodec;

    fn encoder(&mut self) -> Self::Encoder {
        EncodedCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        EncodedCodec
    }
}

impl Encoder for EncodedCodec {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for EncodedCodec {
    type Item = ExportProfilesServiceResponse;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Status> {
        ExportProfilesServiceResponse::decode(src)
            .map(Some)
            .map_err(|e| Status::internal(format!("undecodable export response: {e}")))
    }
}

/// One `Export` call carrying `request`, the encoded
/// `ExportProfilesServiceRequest`, with `headers` as its metadata.
pub(crate) async fn export(
    grpc: &mut Grpc<Channel>,
    request: Bytes,
    headers: MetadataMap,
) -> Result<Response<ExportProfilesServiceResponse>, Status> {
    grpc.ready().await.map_err(|e| Status::unknown(format!("service was not ready: {e}")))?;
    let mut request = Request::new(request);
    *request.metadata_mut() = headers;
    grpc.unary(request, PathAndQuery::from_static(EXPORT_PATH), EncodedCodec).await
}

//! The OTLP/HTTP exporter's client: hyper, on the binary's tokio runtime.
//!
//! The SDK's batch processor exports from a thread of its own, outside any
//! runtime; each export is handed to the runtime the client was made on
//! and awaited from there. Plain `http://` only (see the crate's endpoint
//! check); the whole exchange, body included, is bounded by the export
//! timeout, and an answer body by 4 MiB.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};

const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

#[derive(Clone, Debug)]
pub struct HyperClient {
    client: Client<HttpConnector, Full<Bytes>>,
    runtime: tokio::runtime::Handle,
    timeout: Duration,
}

impl HyperClient {
    pub fn new(runtime: tokio::runtime::Handle, timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(timeout));
        connector.set_nodelay(true);
        HyperClient {
            client: Client::builder(TokioExecutor::new()).build(connector),
            runtime,
            timeout,
        }
    }
}

#[async_trait::async_trait]
impl HttpClient for HyperClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let timeout = self.timeout;
        let exchange = async move {
            let (parts, body) = request.into_parts();
            let resp = client
                .request(hyper::Request::from_parts(parts, Full::new(body)))
                .await?;
            let (parts, body) = resp.into_parts();
            let body = Limited::new(body, MAX_ANSWER_BYTES)
                .collect()
                .await?
                .to_bytes();
            Ok::<_, HttpError>(Response::from_parts(parts, body))
        };
        self.runtime
            .spawn(async move {
                match tokio::time::timeout(timeout, exchange).await {
                    Ok(answer) => answer,
                    Err(_) => Err(format!("no answer within {timeout:?}").into()),
                }
            })
            .await?
    }
}

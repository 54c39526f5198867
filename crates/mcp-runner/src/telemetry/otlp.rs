//! The OTLP/HTTP span exporter: the SDK's batch processor and `opentelemetry-otlp`'s encoding
//! (protobuf, or JSON with `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`), sent by the workspace's
//! reqwest client on a runtime of its own.
//!
//! The batch processor exports from a thread of its own and waits on each export there. The
//! requests run on a one-thread runtime kept for them, never on the process's runtime: the
//! device runner's runtime has a single thread, which a flush at shutdown would otherwise
//! wait on while holding it.

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::time::Duration;

/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the span exporter could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ExportSetupError {
    /// The exporter's own configuration (endpoint, protocol) was refused.
    #[error("the OTLP span exporter cannot be built (check OTEL_EXPORTER_OTLP_*): {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// Its HTTP client or runtime could not be made.
    #[error("the OTLP span exporter's HTTP client cannot start: {0}")]
    Client(String),
}

/// Whether an OTLP endpoint for traces is configured (a non-empty
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`).
pub(super) fn endpoint_configured() -> bool {
    [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .iter()
    .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()))
}

/// A tracer provider exporting in batches to the configured endpoint.
pub(super) fn provider(service_name: &str) -> Result<SdkTracerProvider, ExportSetupError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_timeout(EXPORT_TIMEOUT)
        .with_http_client(ReqwestOtlp::start()?)
        .build()?;
    let named_by_env = std::env::var_os("OTEL_SERVICE_NAME").is_some_and(|v| !v.is_empty());
    let resource = if named_by_env {
        Resource::builder().build()
    } else {
        Resource::builder()
            .with_service_name(service_name.to_owned())
            .build()
    };
    Ok(SdkTracerProvider::builder()
        .with_resource(resource)
        .with_batch_exporter(exporter)
        .build())
}

/// `opentelemetry-otlp`'s HTTP client: the workspace's reqwest, on the exporter's runtime.
#[derive(Debug)]
struct ReqwestOtlp {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl ReqwestOtlp {
    /// The client, and a thread running the runtime its requests run on.
    fn start() -> Result<Self, ExportSetupError> {
        let client = reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|error| ExportSetupError::Client(error.to_string()))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| ExportSetupError::Client(error.to_string()))?;
        let handle = runtime.handle().clone();
        std::thread::Builder::new()
            .name("otlp-export".to_owned())
            .spawn(move || runtime.block_on(std::future::pending::<()>()))
            .map_err(|error| ExportSetupError::Client(error.to_string()))?;
        Ok(Self {
            client,
            runtime: handle,
        })
    }
}

#[async_trait::async_trait]
impl HttpClient for ReqwestOtlp {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        self.runtime
            .spawn(async move {
                let request = reqwest::Request::try_from(request)?;
                let response = client.execute(request).await?;
                let status = response.status();
                let headers = response.headers().clone();
                let body = response.bytes().await?;
                let mut answer = Response::new(body);
                *answer.status_mut() = status;
                *answer.headers_mut() = headers;
                Ok::<_, HttpError>(answer)
            })
            .await?
    }
}

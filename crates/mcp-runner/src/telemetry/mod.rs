//! Logs and traces for both binaries (`switchyard-server`, `switchyard-mcp-runner`): log lines
//! as text or JSON on stderr, and — only when an OTLP endpoint is configured by the standard
//! variables (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) — the
//! `info` spans of Switchyard's crates exported as OpenTelemetry spans over OTLP/HTTP.
//!
//! Without an endpoint no OpenTelemetry layer is installed: spans are plain `tracing` spans
//! (for the logs), [`exporting`] is false and every helper in [`context`] returns at once.

pub mod context;
mod otlp;

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

pub use otlp::ExportSetupError;

/// Whether spans are exported (an endpoint was configured and the exporter built).
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether log lines are JSON ([`LogFormat::Json`]).
static JSON_LOGS: AtomicBool = AtomicBool::new(false);

/// Whether this process writes its log as JSON lines: a line meant for a person (a status
/// line) is then left out, so that every line parses.
pub fn json_logs() -> bool {
    JSON_LOGS.load(Ordering::Relaxed)
}

/// Whether this process exports spans over OTLP.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// How log lines are written to stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event (the default).
    #[default]
    Text,
    /// One JSON object per line, with the fields of the spans it happened in (`spans`), so a
    /// line in a call's scope carries its `call_id` and `trace_id`.
    Json,
}

/// What [`init`] needs.
#[derive(Clone, Debug)]
pub struct TelemetryConfig {
    /// The log line format.
    pub format: LogFormat,
    /// The log filter when `SWITCHYARD_LOG` is unset (an `EnvFilter` directive).
    pub default_filter: &'static str,
    /// `service.name` of the exported spans unless `OTEL_SERVICE_NAME` says otherwise.
    pub service_name: &'static str,
}

/// Keeps the span exporter; [`Telemetry::shutdown`] flushes what is still buffered.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Telemetry {
    /// Sends the spans still buffered (bounded by the exporter's timeout) and stops exporting.
    /// Blocks: call it outside the runtime's worker threads, or where blocking is acceptable.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(error) = provider.shutdown()
        {
            eprintln!("switchyard: the span exporter did not shut down cleanly: {error}");
        }
    }
}

/// Installs the global subscriber: the log layer (filtered by `SWITCHYARD_LOG`), and the span
/// exporter when an OTLP endpoint is configured. Call once, after the TLS provider is
/// installed (the exporter builds an HTTP client). An exporter that cannot be built is an
/// error: an operator who configured one expects spans.
pub fn init(config: &TelemetryConfig) -> Result<Telemetry, ExportSetupError> {
    let filter = EnvFilter::try_from_env("SWITCHYARD_LOG")
        .unwrap_or_else(|_| EnvFilter::new(config.default_filter));
    let logs = match config.format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            // Colours only for a person watching; logs piped to a file stay plain text.
            .with_ansi(std::io::stderr().is_terminal())
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .with_current_span(true)
            .with_span_list(true)
            .boxed(),
    }
    .with_filter(filter);
    let provider = match otlp::endpoint_configured() {
        true => Some(otlp::provider(config.service_name)?),
        false => None,
    };
    let spans = provider.as_ref().map(|provider| {
        use opentelemetry::trace::TracerProvider as _;
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("switchyard"))
            // Only Switchyard's own spans: the call path's, not every dependency's.
            .with_filter(
                Targets::new()
                    .with_target("switchyard_server", tracing::Level::INFO)
                    .with_target("switchyard_mcp_runner", tracing::Level::INFO),
            )
    });
    tracing_subscriber::registry().with(logs).with(spans).init();
    JSON_LOGS.store(config.format == LogFormat::Json, Ordering::Relaxed);
    if let Some(provider) = &provider {
        opentelemetry::global::set_tracer_provider(provider.clone());
        EXPORTING.store(true, Ordering::Relaxed);
    }
    Ok(Telemetry { provider })
}

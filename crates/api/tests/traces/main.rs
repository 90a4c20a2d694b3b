//! Traces end to end: the process's global subscriber carries an
//! OpenTelemetry layer exporting into the SDK's in-memory exporter, real
//! servers on real PostgreSQL (and tansu for the broker) answer requests
//! that carry a `traceparent`, and the spans of each request's trace are
//! read back: the span tree per strategy and publish mode, on whichever
//! driver `CHATLAB_TEST_DB_DRIVER` names; the record headers on the
//! broker; the real OTLP exporters against receivers in this process.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod collected;
mod kafka_headers;
mod otlp_export;
mod span_tree;
#[allow(dead_code, unused_imports)]
#[path = "../api/support.rs"]
mod support;

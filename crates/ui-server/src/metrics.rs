//! `GET /metrics`: the server's metrics in the Prometheus text format.
//!
//! **Why these crates.** The `metrics` facade is the ecosystem's common recording API
//! (`counter!`, `gauge!`, `histogram!`), so code that records an event need not know who
//! exports it; `metrics-exporter-prometheus` is its maintained Prometheus recorder (label
//! escaping, histogram buckets, `# HELP`/`# TYPE` lines), used without its HTTP listener
//! and push gateway: this module renders it from the route, behind the server's own
//! connection limits and access rule.
//!
//! **One recorder per server, never a global one.** Every [`crate::AppState`] owns a
//! [`Metrics`] (when `metrics.enabled`), so two servers in one process (the test suite, a
//! host embedding two routers) never mix their figures, and nothing is installed
//! process-wide. The recorder reaches the code that records in two ways:
//!
//! - The request layer of [`crate::router`] polls every request's future inside
//!   `metrics::with_local_recorder` ([`Scoped`]), so whatever the handler and the libraries
//!   it calls record through the facade while the request is answered lands in this
//!   server's recorder.
//! - Work on tasks of its own (a source read, an event stream) records through the
//!   [`Metrics`] it holds ([`MeteredSource`], the stream's delivery lag).
//!
//! Gauges of what is held right now (read slots, open streams), the change feed's own
//! counters and the `ui.query` answers from the cache (counted by ui-host with one atomic
//! add, [`ui_host::ServiceStats::cache_hits`], rather than a registry lookup per answer)
//! are read when `/metrics` is rendered. Every label has a bounded set of values:
//! routes are the patterns of the router (`unmatched` for no route), methods `GET`, `POST`
//! or `other`, statuses the HTTP codes, sources the registered ones, outcomes a fixed list.
//! Histogram samples are folded into their buckets at every render and after every
//! [`UPKEEP_SAMPLES`] samples, so memory stays bounded when nobody scrapes (a count rather
//! than a timer: no task to stop, and no timer that moves a paused test clock).

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use metrics::SharedString;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use ui_core::{Record, Value};
use ui_host::{ChangeFeed, ChatInfo, HostError, ReadRequest, UiSource, ValueSchema};

use crate::config::Secret;

/// Bucket bounds (seconds) of every latency histogram: 1 ms to 10 s (the read timeout is
/// 8 s).
const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Histogram samples recorded between two foldings into their buckets.
pub(crate) const UPKEEP_SAMPLES: u64 = 4_096;

/// Label sets of the request metrics whose handles are kept. Methods × the router's
/// patterns × statuses stay far below it; past it, a request's metrics are looked up in
/// the registry each time, as before the handles were kept.
const MAX_REQUEST_HANDLES: usize = 4_096;

/// The labels of a request's metrics: method, route pattern, status.
type RequestLabels = (&'static str, &'static str, u16);

/// The registered metrics of one [`RequestLabels`].
struct RequestHandles {
    count: metrics::Counter,
    duration: metrics::Histogram,
}

impl RequestHandles {
    /// Counts one request that took `seconds`.
    fn record(&self, seconds: f64) {
        self.count.increment(1);
        self.duration.record(seconds);
    }
}

/// Who may read `/metrics` and whether the server records at all.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetricsConfig {
    /// Record metrics and serve `GET /metrics` (default `true`). Off, the route answers
    /// `404 not-found` and nothing is recorded.
    pub enabled: bool,
    /// When set, `GET /metrics` needs `Authorization: Bearer <token>` (compared in constant
    /// time; at least 16 bytes); anything else is `401 unauthenticated`. Unset, anyone
    /// who reaches the port may read it, like `/healthz`: set a token, or keep the path
    /// behind the proxy, when the server is reachable from outside.
    pub token: Option<Secret>,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            enabled: true,
            token: None,
        }
    }
}

/// Shortest `metrics.token`.
pub(crate) const MIN_TOKEN_BYTES: usize = 16;

/// One server's recorder and its render handle.
pub(crate) struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    /// Histogram samples recorded so far.
    samples: AtomicU64,
    /// `uiblocks_sync_delivery_lag_seconds`, registered once: every open stream records
    /// into it on every change, so it is not looked up by name each time.
    delivery_lag: metrics::Histogram,
    /// The request metrics by their labels, registered at their first request. Looking
    /// them up in the registry, with the labels made and compared every time, was about
    /// a tenth of the server's own instructions for a request (`benches/NOTES.md`).
    requests: RwLock<foldhash::HashMap<RequestLabels, RequestHandles>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A fresh recorder with the latency buckets and every metric described.
    pub(crate) fn new() -> Arc<Metrics> {
        let builder = PrometheusBuilder::new();
        let builder = match builder.set_buckets(LATENCY_BUCKETS) {
            Ok(builder) => builder,
            // Only for an empty bucket list, which this is not.
            Err(_) => PrometheusBuilder::new(),
        };
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        let delivery_lag = metrics::with_local_recorder(&recorder, || {
            metrics::histogram!("uiblocks_sync_delivery_lag_seconds")
        });
        let metrics = Metrics {
            recorder,
            handle,
            samples: AtomicU64::new(0),
            delivery_lag,
            requests: RwLock::default(),
        };
        metrics.scoped(describe);
        Arc::new(metrics)
    }

    /// Runs `f` with this server's recorder as the facade's recorder.
    pub(crate) fn scoped<T>(&self, f: impl FnOnce() -> T) -> T {
        metrics::with_local_recorder(&self.recorder, f)
    }

    /// One answered request: `route` is the router's pattern (`unmatched` for none).
    pub(crate) fn request(
        &self,
        method: &'static str,
        route: Cow<'static, str>,
        status: u16,
        took: Duration,
    ) {
        let seconds = took.as_secs_f64();
        match route {
            Cow::Borrowed(route) => self.request_labelled((method, route, status), seconds),
            // A pattern that is not one of the server's own (the router nested in a host's):
            // looked up each time rather than kept.
            Cow::Owned(route) => self
                .register_request(method, SharedString::from(route), status)
                .record(seconds),
        }
        self.sampled();
    }

    /// Counts and times a request through the kept handles of `labels`, registering them
    /// at their first request.
    fn request_labelled(&self, labels: RequestLabels, seconds: f64) {
        let kept = self.requests.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(handles) = kept.get(&labels) {
            handles.record(seconds);
            return;
        }
        drop(kept);
        let (method, route, status) = labels;
        let handles = self.register_request(method, SharedString::const_str(route), status);
        handles.record(seconds);
        let mut kept = self
            .requests
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if kept.len() < MAX_REQUEST_HANDLES {
            kept.entry(labels).or_insert(handles);
        }
    }

    /// The request metrics of one label set, from the registry.
    fn register_request(
        &self,
        method: &'static str,
        route: SharedString,
        status: u16,
    ) -> RequestHandles {
        self.scoped(|| RequestHandles {
            count: metrics::counter!(
                "uiblocks_http_requests_total",
                "method" => method,
                "route" => route.clone(),
                "status" => status.to_string(),
            ),
            duration: metrics::histogram!(
                "uiblocks_http_request_duration_seconds",
                "method" => method,
                "route" => route,
            ),
        })
    }

    /// One call of a source's `read` ended with `outcome` after `took`.
    fn source_read(&self, source: &SharedString, outcome: &'static str, took: Duration) {
        self.scoped(|| {
            metrics::counter!(
                "uiblocks_source_reads_total",
                "source" => source.clone(),
                "outcome" => outcome,
            )
            .increment(1);
            metrics::histogram!("uiblocks_source_read_duration_seconds", "source" => source.clone())
                .record(took.as_secs_f64());
        });
        self.sampled();
    }

    /// A stream delivered events `lag` after the first of them was recorded.
    pub(crate) fn delivery_lag(&self, lag: Duration) {
        self.delivery_lag.record(lag.as_secs_f64());
        self.sampled();
    }

    /// Counts one histogram sample; folds the samples every [`UPKEEP_SAMPLES`].
    fn sampled(&self) {
        if self.samples.fetch_add(1, Ordering::Relaxed) % UPKEEP_SAMPLES == UPKEEP_SAMPLES - 1 {
            self.upkeep();
        }
    }

    /// Folds histogram samples into their buckets.
    fn upkeep(&self) {
        self.handle.run_upkeep();
    }

    /// The text of `/metrics`, after setting the gauges of `now`.
    pub(crate) fn render(&self, now: &Snapshot) -> String {
        self.scoped(|| {
            metrics::gauge!("uiblocks_read_slots_in_use").set(now.read_slots_in_use as f64);
            metrics::gauge!("uiblocks_read_slots").set(now.read_slots as f64);
            metrics::gauge!("uiblocks_streams_open").set(now.streams_open as f64);
            metrics::counter!("uiblocks_cache_hits_total").absolute(now.cache_hits);
            metrics::counter!("uiblocks_sync_events_appended_total").absolute(now.events_appended);
            metrics::counter!("uiblocks_sync_append_failures_total").absolute(now.append_failures);
            metrics::counter!("uiblocks_sync_tail_failures_total").absolute(now.tail_failures);
        });
        self.upkeep();
        self.handle.render()
    }
}

/// What the server holds at a render.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Snapshot {
    pub(crate) read_slots_in_use: usize,
    pub(crate) cache_hits: u64,
    pub(crate) read_slots: u64,
    pub(crate) streams_open: u64,
    pub(crate) events_appended: u64,
    pub(crate) append_failures: u64,
    pub(crate) tail_failures: u64,
}

fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "uiblocks_http_requests_total",
        "Requests answered, by method, route pattern and status."
    );
    describe_histogram!(
        "uiblocks_http_request_duration_seconds",
        Unit::Seconds,
        "Time to answer a request (to its head; an event stream's life is not counted)."
    );
    describe_counter!(
        "uiblocks_source_reads_total",
        "Calls of a source's read, by source and outcome (ok, error, refused, timed-out, aborted)."
    );
    describe_histogram!(
        "uiblocks_source_read_duration_seconds",
        Unit::Seconds,
        "Time a source's read took, by source."
    );
    describe_counter!(
        "uiblocks_cache_hits_total",
        "ui.query requests answered from the reading cache, without a source read."
    );
    describe_gauge!(
        "uiblocks_read_slots_in_use",
        "Global read slots held by source reads now."
    );
    describe_gauge!("uiblocks_read_slots", "Global read slots (readSlots).");
    describe_gauge!("uiblocks_streams_open", "Open /ui/events streams.");
    describe_counter!(
        "uiblocks_sync_events_appended_total",
        "Events appended to the change log (by any writer), as this process's tailer read them."
    );
    describe_counter!(
        "uiblocks_sync_append_failures_total",
        "Failed change-log appends (each retry counts)."
    );
    describe_counter!(
        "uiblocks_sync_tail_failures_total",
        "Failed reads of the change log by the tailer."
    );
    describe_histogram!(
        "uiblocks_sync_delivery_lag_seconds",
        Unit::Seconds,
        "From a change being recorded to an event stream sending it."
    );
}

/// A future polled with a server's recorder as the facade's recorder (see the module docs).
pub(crate) struct Scoped<F> {
    pub(crate) inner: Pin<Box<F>>,
    pub(crate) metrics: Arc<Metrics>,
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let inner = this.inner.as_mut();
        this.metrics.scoped(|| inner.poll(cx))
    }
}

/// The method label: `GET`, `POST` or `other` (a bounded set).
pub(crate) fn method_label(method: &axum::http::Method) -> &'static str {
    match *method {
        axum::http::Method::GET => "GET",
        axum::http::Method::POST => "POST",
        axum::http::Method::HEAD => "HEAD",
        _ => "other",
    }
}

/// A registered source whose reads are counted and timed.
pub(crate) struct MeteredSource {
    name: SharedString,
    inner: Arc<dyn UiSource>,
    metrics: Arc<Metrics>,
}

impl MeteredSource {
    pub(crate) fn new(name: &str, inner: Arc<dyn UiSource>, metrics: Arc<Metrics>) -> Self {
        MeteredSource {
            name: SharedString::from(name.to_owned()),
            inner,
            metrics,
        }
    }
}

/// Counts a read dropped before it ended (its task was aborted, or it panicked).
struct Unfinished<'a> {
    source: &'a MeteredSource,
    started: Instant,
    done: bool,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if !self.done {
            let took = self.started.elapsed();
            self.source
                .metrics
                .source_read(&self.source.name, "aborted", took);
        }
    }
}

#[async_trait]
impl UiSource for MeteredSource {
    fn args(&self) -> &dyn ValueSchema {
        self.inner.args()
    }

    fn result(&self) -> &dyn ValueSchema {
        self.inner.result()
    }

    async fn authorize(
        &self,
        info: &ChatInfo,
        access: &Value,
        args: &Record,
    ) -> Result<(), HostError> {
        self.inner.authorize(info, access, args).await
    }

    async fn read(&self, request: ReadRequest) -> Result<Value, HostError> {
        let cancel = request.cancel.clone();
        let mut unfinished = Unfinished {
            source: self,
            started: Instant::now(),
            done: false,
        };
        let outcome = self.inner.read(request).await;
        unfinished.done = true;
        let label = match &outcome {
            Ok(_) => "ok",
            // The host cancels a read at the read timeout; what it answers then is late.
            Err(_) if cancel.is_cancelled() => "timed-out",
            Err(HostError::Refusal(_)) => "refused",
            Err(_) => "error",
        };
        self.metrics
            .source_read(&self.name, label, unfinished.started.elapsed());
        outcome
    }

    fn changes(&self) -> Option<&dyn ChangeFeed> {
        self.inner.changes()
    }
}

/// Whether `headers` carry `Authorization: Bearer <token>`.
pub(crate) fn bearer_matches(headers: &axum::http::HeaderMap, token: &Secret) -> bool {
    crate::auth::bearer_token(headers).is_some_and(|t| token.matches(t.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_folded_between_scrapes_are_all_counted() {
        let metrics = Metrics::new();
        let n = UPKEEP_SAMPLES * 2 + 7;
        for i in 0..n {
            metrics.delivery_lag(Duration::from_millis(i % 3));
        }
        let text = metrics.render(&Snapshot::default());
        assert!(
            text.contains(&format!("uiblocks_sync_delivery_lag_seconds_count {n}")),
            "{text}"
        );
        assert!(text.contains("uiblocks_sync_delivery_lag_seconds_bucket{le=\"0.001\"}"));
        // A second recorder starts from nothing.
        let other = Metrics::new().render(&Snapshot::default());
        assert!(
            other.contains("uiblocks_sync_delivery_lag_seconds_count 0\n"),
            "{other}"
        );
    }

    #[test]
    fn requests_count_the_same_with_kept_handles_past_the_bound_and_for_foreign_routes() {
        let metrics = Metrics::new();
        let took = Duration::from_millis(2);
        // More label sets than are kept: the later ones go through the registry.
        let statuses = u16::try_from(MAX_REQUEST_HANDLES).unwrap() + 10;
        for _ in 0..2 {
            for status in 0..statuses {
                metrics.request("GET", Cow::Borrowed("/kept"), status, took);
            }
        }
        let kept = metrics.requests.read().unwrap().len();
        assert_eq!(kept, MAX_REQUEST_HANDLES);
        metrics.request("POST", Cow::Owned("/host/{id}".to_owned()), 200, took);
        metrics.request("POST", Cow::Owned("/host/{id}".to_owned()), 200, took);
        let text = metrics.render(&Snapshot::default());
        for status in [0, 1, statuses - 1] {
            let line = format!(
                "uiblocks_http_requests_total{{method=\"GET\",route=\"/kept\",status=\"{status}\"}} 2\n"
            );
            assert!(text.contains(&line), "{line}");
        }
        let count = format!(
            "uiblocks_http_request_duration_seconds_count{{method=\"GET\",route=\"/kept\"}} {}\n",
            2 * u32::from(statuses)
        );
        assert!(text.contains(&count), "{count}");
        assert!(text.contains(
            "uiblocks_http_requests_total{method=\"POST\",route=\"/host/{id}\",status=\"200\"} 2\n"
        ));
        assert_eq!(metrics.requests.read().unwrap().len(), MAX_REQUEST_HANDLES);
    }

    #[test]
    fn a_bearer_token_must_match_exactly() {
        let token = Secret::new("scraper-token-0123456789");
        let headers = |v: &str| {
            let mut h = axum::http::HeaderMap::new();
            h.insert(axum::http::header::AUTHORIZATION, v.parse().unwrap());
            h
        };
        assert!(bearer_matches(
            &headers("Bearer scraper-token-0123456789"),
            &token
        ));
        assert!(!bearer_matches(
            &headers("Bearer scraper-token-012345678"),
            &token
        ));
        assert!(!bearer_matches(
            &headers("scraper-token-0123456789"),
            &token
        ));
        // The scheme is case-insensitive (RFC 9110 §11.1).
        for scheme in ["bearer", "BEARER", "BeArEr"] {
            let value = format!("{scheme} scraper-token-0123456789");
            assert!(bearer_matches(&headers(&value), &token), "{value}");
        }
        assert!(!bearer_matches(
            &headers("Basic scraper-token-0123456789"),
            &token
        ));
        assert!(!bearer_matches(&axum::http::HeaderMap::new(), &token));
    }
}

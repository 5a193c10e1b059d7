//! The explorer's HTTP routes: the page, its assets, and the JSON API (see the module above for
//! the list). Every request that cannot be served gets a 4xx status and `{"error": "..."}` saying
//! what to change; nothing a page sends stops the server.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;

use super::queue::{Event, Job, LensChoice};
use super::{App, ALPHAS, TOP_K};
use crate::plots::{delta_bars, entropy_heatmap, target_trace, HeatMetric, ReportItem};
use crate::profile::EntropyProfile;
use crate::runner::{prompt_token_ids, ProfileRequest, Sampling};

/// The smallest temperature the page may ask for (anything lower is greedy in all but name).
const MIN_TEMPERATURE: f64 = 0.01;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// A refused request: its status and what to change.
#[derive(Debug)]
pub struct ApiError(pub StatusCode, pub String);

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, msg.into())
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.1 }).to_string();
        (
            self.0,
            [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
            body,
        )
            .into_response()
    }
}

/// What `POST /api/profile` accepts.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// A served model's name (default: the first).
    #[serde(default)]
    pub model: Option<String>,
    pub prompt: String,
    /// Wrap the prompt in the model's chat template.
    #[serde(default)]
    pub chat: bool,
    /// Tokens to generate.
    #[serde(default)]
    pub generate: u64,
    /// 0: greedy.
    #[serde(default)]
    pub temperature: f64,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// `logit` (default) or `tuned`.
    #[serde(default)]
    pub lens: Option<String>,
    /// Blocks to skip, 1..=L.
    #[serde(default)]
    pub skip: Vec<u64>,
    /// Measure every prompt position (default), not only the last.
    #[serde(default = "yes")]
    pub all_positions: bool,
    /// Keep generating after the end-of-sequence token.
    #[serde(default)]
    pub ignore_eos: bool,
}

fn default_seed() -> u64 {
    42
}

fn yes() -> bool {
    true
}

/// A request checked against the server's models and limits.
#[derive(Debug)]
pub struct CheckedRun {
    pub model: usize,
    pub request: ProfileRequest,
    pub lens: LensChoice,
    pub skip: Vec<usize>,
}

/// Reads and checks a request body.
///
/// # Errors
/// A 400 naming what is wrong: not UTF-8, not the JSON object expected, an unknown model or
/// lens, a count out of range, a block that does not exist, a prompt over the token limit.
pub fn check_run(app: &App, body: &[u8]) -> Result<CheckedRun, ApiError> {
    let text = std::str::from_utf8(body)
        .map_err(|e| bad(format!("the request body is not UTF-8 text ({e})")))?;
    let r: RunRequest = serde_json::from_str(text).map_err(|e| {
        bad(format!(
            "cannot read the request ({e}); send a JSON object such as {{\"prompt\": \"The capital of France is\", \"generate\": 8}}"
        ))
    })?;
    let names = || {
        app.models
            .iter()
            .map(|m| m.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let model = match &r.model {
        None => 0,
        Some(name) => app
            .models
            .iter()
            .position(|m| &m.name == name)
            .ok_or_else(|| {
                bad(format!(
                    "unknown model {name:?}: this server has {}",
                    names()
                ))
            })?,
    };
    let m = &app.models[model];
    let limits = app.limits;
    if r.generate > limits.max_generate as u64 {
        return Err(bad(format!(
            "generate is {}; this server generates at most {} tokens per request",
            r.generate, limits.max_generate
        )));
    }
    if !(r.temperature == 0.0 || (MIN_TEMPERATURE..=10.0).contains(&r.temperature)) {
        return Err(bad(format!(
            "temperature is {}; give 0 (greedy) or a number from {MIN_TEMPERATURE} to 10",
            r.temperature
        )));
    }
    let lens = match r.lens.as_deref() {
        None | Some("logit") => LensChoice::Logit,
        Some("tuned") if m.has_tuned_lens => LensChoice::Tuned,
        Some("tuned") => {
            return Err(bad(format!(
                "{} has no tuned lens on this server (start it with --tuned-lens DIR)",
                m.name
            )))
        }
        Some(other) => return Err(bad(format!("unknown lens {other:?}: use logit or tuned"))),
    };
    let mut skip = Vec::with_capacity(r.skip.len());
    for &b in &r.skip {
        if b == 0 || b > m.n_blocks as u64 {
            return Err(bad(format!(
                "cannot skip block {b}: {} has blocks 1..={}",
                m.name, m.n_blocks
            )));
        }
        skip.push(b as usize);
    }
    skip.sort_unstable();
    skip.dedup();
    let request = ProfileRequest {
        prompt: r.prompt,
        generate: r.generate as usize,
        ignore_eos: r.ignore_eos,
        all_positions: r.all_positions,
        add_bos: true,
        chat: r.chat,
        include_embed: false,
        sampling: Sampling {
            temperature: r.temperature,
            sample_top_p: None,
            seed: r.seed,
        },
        token_ids: None,
    };
    let ids = prompt_token_ids(&m.tokenizer, &request).map_err(|e| bad(e.to_string()))?;
    if ids.len() > limits.max_prompt_tokens {
        return Err(bad(format!(
            "the prompt is {} tokens; this server takes at most {} (shorten it)",
            ids.len(),
            limits.max_prompt_tokens
        )));
    }
    if ids.len() + request.generate > m.context_length {
        return Err(bad(format!(
            "{} prompt tokens and {} to generate exceed {}'s context of {} tokens",
            ids.len(),
            request.generate,
            m.name,
            m.context_length
        )));
    }
    Ok(CheckedRun {
        model,
        request,
        lens,
        skip,
    })
}

/// The routes, behind the access checks, with the body limit.
pub fn router(app: Arc<App>) -> Router {
    let limit = app.limits.max_body_bytes;
    Router::new()
        .route("/", get(page))
        .route("/assets/app.js", get(|| asset(APP_JS, "text/javascript")))
        .route("/assets/app.css", get(|| asset(APP_CSS, "text/css")))
        .route(
            "/assets/plotly.min.js",
            get(|| asset(crate::plots::PLOTLY_JS, "text/javascript")),
        )
        .route("/api/models", get(models))
        .route("/api/health", get(health))
        .route("/api/profile", post(profile))
        .route("/api/result/{id}/profile", get(result_profile))
        .route("/api/result/{id}/chart", get(result_chart))
        .route("/api/report", get(report))
        .fallback(not_found)
        .method_not_allowed_fallback(wrong_method)
        .layer(axum::middleware::from_fn_with_state(app.clone(), checks))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(app)
}

/// Access checks first; safety headers on every answer.
async fn checks(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut resp = match app.access.check(req.headers(), req.uri()) {
        // A body announced larger than the limit is refused before anyone waits for it.
        Ok(()) if declared.is_some_and(|n| n > app.limits.max_body_bytes as u64) => ApiError(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body is larger than {} bytes; requests are small JSON objects",
                app.limits.max_body_bytes
            ),
        )
        .into_response(),
        Ok(()) => next.run(req).await,
        Err((status, msg)) => ApiError(status, msg).into_response(),
    };
    let h = resp.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // The page's URL may carry the token: never send it to another site.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'",
        ),
    );
    resp
}

async fn asset(body: &'static str, kind: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        INDEX_HTML,
    )
        .into_response()
}

async fn not_found() -> ApiError {
    ApiError(
        StatusCode::NOT_FOUND,
        "no such page or API route (the API: GET /api/models, POST /api/profile, GET /api/result/ID/profile, GET /api/result/ID/chart, GET /api/report?ids=…)".into(),
    )
}

async fn wrong_method() -> ApiError {
    ApiError(
        StatusCode::METHOD_NOT_ALLOWED,
        "this route does not take that method (POST /api/profile; GET for the others)".into(),
    )
}

fn json(value: serde_json::Value) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        value.to_string(),
    )
        .into_response()
}

async fn models(State(app): State<Arc<App>>) -> Response {
    let l = app.limits;
    json(serde_json::json!({
        "models": app.models.iter().map(|m| serde_json::json!({
            "name": m.name,
            "n_blocks": m.n_blocks,
            "context_length": m.context_length,
            "tuned_lens": m.has_tuned_lens,
        })).collect::<Vec<_>>(),
        "alphas": ALPHAS,
        "top_k": TOP_K,
        "top_p": crate::lens::stats::DEFAULT_TOP_P,
        "limits": {
            "max_prompt_tokens": l.max_prompt_tokens,
            "max_generate": l.max_generate,
            "max_queue": l.max_queue,
            "max_batch": l.max_batch,
            "max_body_bytes": l.max_body_bytes,
        },
        "token_required": app.access.needs_token(),
    }))
}

async fn health(State(app): State<Arc<App>>) -> Response {
    json(serde_json::json!({
        "models": app.models.iter().map(|m| {
            let (waiting, running) = m.queue.load();
            serde_json::json!({
                "name": m.name,
                "waiting": waiting,
                "running": running,
                "generated_tokens": m.queue.generated_tokens(),
            })
        }).collect::<Vec<_>>(),
    }))
}

/// Marks the job cancelled when the page's stream goes away before its end.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn sse(event: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

struct Stream {
    app: Arc<App>,
    model: usize,
    events: tokio::sync::mpsc::Receiver<Event>,
    _cancel: CancelOnDrop,
    first: Option<Bytes>,
    tick: tokio::time::Interval,
    stopping: tokio::sync::watch::Receiver<bool>,
    done: bool,
}

async fn next_chunk(mut s: Stream) -> Option<(Result<Bytes, Infallible>, Stream)> {
    if let Some(b) = s.first.take() {
        return Some((Ok(b), s));
    }
    if s.done {
        return None;
    }
    let chunk = tokio::select! {
        e = s.events.recv() => match e {
            Some(Event::Started { batch }) => sse("started", &format!("{{\"batch\":{batch}}}")),
            Some(Event::Token { done, total }) => {
                sse("token", &format!("{{\"done\":{done},\"total\":{total}}}"))
            }
            Some(Event::Done(profile)) => {
                s.done = true;
                match profile.to_json_line() {
                    Ok(line) => {
                        let line: Arc<str> = line.into();
                        let id = s.app.store(s.model, line.clone());
                        sse("result", &format!("{{\"id\":\"{id}\",\"profile\":{line}}}"))
                    }
                    Err(e) => sse("error", &serde_json::json!({"error": e.to_string()}).to_string()),
                }
            }
            Some(Event::Failed(msg)) => {
                s.done = true;
                sse("error", &serde_json::json!({"error": msg}).to_string())
            }
            None => {
                s.done = true;
                sse("error", "{\"error\":\"the server is stopping\"}")
            }
        },
        // A comment line now and then: a page that went away is noticed when it fails to arrive.
        _ = s.tick.tick() => Bytes::from_static(b": waiting\n\n"),
        _ = s.stopping.wait_for(|v| *v) => {
            s.done = true;
            sse("error", "{\"error\":\"the server is stopping\"}")
        }
    };
    Some((Ok(chunk), s))
}

async fn profile(
    State(app): State<Arc<App>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|r| {
        ApiError(
            r.status(),
            format!(
                "cannot read the request body ({}); requests are JSON of at most {} bytes",
                r.body_text(),
                app.limits.max_body_bytes
            ),
        )
    })?;
    let run = check_run(&app, &body)?;
    let m = &app.models[run.model];
    let (tx, rx) = Job::channel(run.request.generate);
    let cancelled = Arc::new(AtomicBool::new(false));
    let ahead = m
        .queue
        .submit(Job {
            request: run.request,
            lens: run.lens,
            skip: run.skip,
            cancelled: cancelled.clone(),
            events: tx,
        })
        .map_err(|f| {
            ApiError(
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "{} requests are already waiting for {}; try again in a few seconds",
                    f.waiting, m.name
                ),
            )
        })?;
    let stream = Stream {
        app: app.clone(),
        model: run.model,
        events: rx,
        _cancel: CancelOnDrop(cancelled),
        first: Some(sse("queued", &format!("{{\"ahead\":{ahead}}}"))),
        tick: tokio::time::interval_at(
            tokio::time::Instant::now() + Duration::from_secs(1),
            Duration::from_secs(1),
        ),
        stopping: app.stopping.clone(),
        done: false,
    };
    let body = Body::from_stream(futures_util::stream::unfold(stream, next_chunk));
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response())
}

fn stored(app: &App, id: &str) -> Result<(usize, Arc<str>), ApiError> {
    app.result(id).ok_or_else(|| {
        ApiError(
            StatusCode::NOT_FOUND,
            format!("no result {id:?} on this server (it keeps the latest results up to {} MiB; run it again)", app.limits.max_result_bytes >> 20),
        )
    })
}

/// Runs `work` (chart or report building: CPU work) off the server's threads, at most
/// [`super::Limits::max_renders`] at a time.
async fn render<T: Send + 'static>(
    app: &App,
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    let _permit = app.renders.clone().acquire_owned().await.map_err(|_| {
        ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is stopping".into(),
        )
    })?;
    tokio::task::spawn_blocking(work).await.map_err(|_| {
        ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            "building the chart failed (a bug: please report it with the request)".into(),
        )
    })?
}

fn parse_profile(json: &str) -> Result<EntropyProfile, ApiError> {
    EntropyProfile::from_json(json)
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

fn result_id(p: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    p.map(|Path(id)| id)
        .map_err(|e| bad(format!("cannot read the result id: {}", e.body_text())))
}

async fn result_profile(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let id = result_id(id)?;
    let (_, line) = stored(&app, &id)?;
    Ok((
        [
            (header::CONTENT_TYPE, "application/json; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"profile.json\"",
            ),
            (header::CACHE_CONTROL, "no-store"),
        ],
        format!("{line}\n"),
    )
        .into_response())
}

#[derive(Deserialize)]
struct ChartQuery {
    kind: String,
    #[serde(default)]
    metric: Option<String>,
    #[serde(default)]
    position: Option<usize>,
}

fn metric(m: Option<&str>) -> Result<HeatMetric, ApiError> {
    HeatMetric::parse(m.unwrap_or("shannon")).map_err(|e| bad(e.to_string()))
}

async fn result_chart(
    State(app): State<Arc<App>>,
    id: Result<Path<String>, PathRejection>,
    q: Result<Query<ChartQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let id = result_id(id)?;
    let Query(q) = q.map_err(|e| {
        bad(format!(
            "{}; e.g. ?kind=heatmap&metric=shannon or ?kind=delta&position=3",
            e.body_text()
        ))
    })?;
    let (model, json) = stored(&app, &id)?;
    let metric = metric(q.metric.as_deref())?;
    let position = || {
        q.position
            .ok_or_else(|| bad("give position=N, an index into the profile's positions"))
    };
    let kind = q.kind.clone();
    let position = match kind.as_str() {
        "heatmap" => None,
        "delta" | "target" => Some(position()?),
        other => {
            return Err(bad(format!(
                "unknown chart {other:?}: use heatmap, delta or target"
            )))
        }
    };
    let tokenizer = app.models[model].tokenizer.clone();
    let figure = render(&app, move || {
        let p = parse_profile(&json)?;
        match (kind.as_str(), position) {
            ("delta", Some(i)) => delta_bars(&p, i),
            ("target", Some(i)) => target_trace(&p, i),
            _ => entropy_heatmap(&p, Some(&tokenizer), metric),
        }
        .map(|c| c.to_json())
        .map_err(|e| bad(e.to_string()))
    })
    .await?;
    Ok((
        [
            (header::CONTENT_TYPE, "application/json; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        figure,
    )
        .into_response())
}

#[derive(Deserialize)]
struct ReportQuery {
    ids: String,
    #[serde(default)]
    metric: Option<String>,
    /// Per id, the position index of its ΔH bars and trace (empty: the last).
    #[serde(default)]
    positions: Option<String>,
}

/// A report section's heading: the prompt (shortened) and the skipped blocks.
fn report_label(p: &EntropyProfile) -> String {
    let mut prompt: String = p.prompt.chars().take(60).collect();
    if prompt.len() < p.prompt.len() {
        prompt.push('…');
    }
    let skipped = p
        .provenance
        .as_ref()
        .map(|v| v.skipped_blocks.clone())
        .unwrap_or_default();
    if skipped.is_empty() {
        format!("{prompt:?}")
    } else {
        let list: Vec<String> = skipped.iter().map(usize::to_string).collect();
        format!("{prompt:?} without blocks {}", list.join(", "))
    }
}

async fn report(
    State(app): State<Arc<App>>,
    q: Result<Query<ReportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = q.map_err(|e| bad(format!("{}; e.g. ?ids=ID1,ID2", e.body_text())))?;
    let metric = metric(q.metric.as_deref())?;
    let ids: Vec<&str> = q.ids.split(',').filter(|s| !s.is_empty()).collect();
    if ids.is_empty() || ids.len() > 8 {
        return Err(bad("give 1 to 8 result ids: ?ids=ID1,ID2"));
    }
    let positions: Vec<Option<usize>> = match &q.positions {
        None => vec![None; ids.len()],
        Some(list) => list
            .split(',')
            .map(|x| {
                if x.is_empty() {
                    Ok(None)
                } else {
                    x.parse::<usize>()
                        .map(Some)
                        .map_err(|_| bad(format!("positions: {x:?} is not a position index")))
                }
            })
            .collect::<Result<_, _>>()?,
    };
    if positions.len() != ids.len() {
        return Err(bad(
            "give one entry in positions per id (empty for the last position)",
        ));
    }
    let found = ids
        .iter()
        .map(|id| stored(&app, id))
        .collect::<Result<Vec<_>, _>>()?;
    let tokenizers: Vec<_> = found
        .iter()
        .map(|(m, _)| app.models[*m].tokenizer.clone())
        .collect();
    // Held until the page has been sent, so that reports nobody reads cannot pile up in memory.
    let held = app.reports.clone().acquire_owned().await.map_err(|_| {
        ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is stopping".into(),
        )
    })?;
    let html = render(&app, move || {
        let profiles = found
            .iter()
            .map(|(_, json)| parse_profile(json))
            .collect::<Result<Vec<_>, _>>()?;
        let items: Vec<ReportItem<'_>> = profiles
            .iter()
            .zip(&tokenizers)
            .zip(&positions)
            .map(|((p, tok), &at)| ReportItem {
                label: report_label(p),
                profile: p,
                tokenizer: Some(tok),
                metric,
                position: at,
            })
            .collect();
        crate::plots::profiles_report_html("entropy-lens explorer report", &items)
            .map_err(|e| bad(e.to_string()))
    })
    .await?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"entropy-lens-report.html\"",
            ),
            (header::CACHE_CONTROL, "no-store"),
        ],
        Body::from_stream(futures_util::stream::once(async move {
            let _held = held;
            Ok::<_, Infallible>(Bytes::from(html))
        })),
    )
        .into_response())
}

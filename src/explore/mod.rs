//! `entropy-lens explore`: the explorer in the browser. One HTTP server inside the binary (axum on
//! tokio) serves one page, whose assets (plotly.js, its script and style) are compiled in, so it
//! runs offline; the page asks for profiles of the models the server was started with and draws the
//! library's own charts of them.
//!
//! * [`queue`]: one bounded queue and one worker thread per model; concurrent requests run as one
//!   batch (a request arriving during a batch joins the next one).
//! * [`api`]: the JSON requests, their checks, and the answers (every bad request is a 4xx with a
//!   message saying what to change).
//! * [`guard`]: who may talk to the server: the `Host` and `Origin` checks against DNS rebinding
//!   and other sites' pages, and the access token a server on the network requires.
//!
//! The routes: `GET /` (the page), `GET /assets/*`, `GET /api/models`, `POST /api/profile` (the
//! progress and the profile as server-sent events), `GET /api/result/{id}/profile` (the profile
//! as `profile --json` prints it), `GET /api/result/{id}/chart` (a chart as Plotly JSON),
//! `GET /api/report?ids=…` (the offline HTML report), `GET /api/health`.

// User input reaches this module: no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod api;
pub mod conn;
pub mod guard;
pub mod queue;

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::lens::{LensKind, StatSpec, TargetToken};
use crate::model::{load, parse_device, LoadOptions, ModelSource, TextTokenizer, WeightDType};
use crate::runner::Profiler;
use queue::ModelQueue;

/// Rényi orders every explorer profile carries (the paper's 0.5 and 5, and 2), so that the page
/// switches statistic without running the model again.
pub const ALPHAS: [f64; 3] = [0.5, 2.0, 5.0];
/// Tokens listed per block in the heatmap's hover.
pub const TOP_K: usize = 5;
/// How long a stopping server waits for its connections to finish.
const GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// What one server accepts: everything a page asks for is bounded by these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Prompt tokens (after the chat template).
    pub max_prompt_tokens: usize,
    /// Tokens generated per request.
    pub max_generate: usize,
    /// Requests waiting per model; one more is answered 429.
    pub max_queue: usize,
    /// Requests run together in one batch.
    pub max_batch: usize,
    /// Request body size in bytes (a larger body is answered 413).
    pub max_body_bytes: usize,
    /// Bytes of finished profiles (as JSON) kept for charts and downloads; the oldest go first.
    pub max_result_bytes: usize,
    /// Charts and reports built at once (each is CPU work; the others wait their turn); also the
    /// reports held in memory while they are sent.
    pub max_renders: usize,
    /// Connections open at once (more wait in the kernel's backlog).
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_prompt_tokens: 256,
            max_generate: 64,
            max_queue: 64,
            max_batch: 16,
            max_body_bytes: 64 * 1024,
            max_result_bytes: 128 * 1024 * 1024,
            max_renders: 2,
            max_connections: 256,
        }
    }
}

/// How to start an explorer.
#[derive(Clone, Debug)]
pub struct ExploreConfig {
    /// GGUF files, Hugging Face folders or Hub ids (empty: the two offline models, fetched like
    /// `demo` does).
    pub models: Vec<String>,
    /// Tuned lenses (folders as `train-lens` or the tuned-lens package writes them, or a model id
    /// whose lens the package publishes): each serves the first model it fits.
    pub tuned_lenses: Vec<String>,
    pub host: String,
    /// 0: any free port.
    pub port: u16,
    /// Required on every API call when set; generated when the host is not a loopback address.
    pub token: Option<String>,
    pub device: String,
    pub dtype: Option<WeightDType>,
    pub limits: Limits,
    /// Stop on Ctrl-C (the CLI); tests stop the server with [`Explorer::stop`].
    pub stop_on_ctrl_c: bool,
}

impl Default for ExploreConfig {
    fn default() -> Self {
        Self {
            models: Vec::new(),
            tuned_lenses: Vec::new(),
            host: "127.0.0.1".into(),
            port: 8080,
            token: None,
            device: "cpu".into(),
            dtype: None,
            limits: Limits::default(),
            stop_on_ctrl_c: false,
        }
    }
}

/// One model the server offers.
pub struct ServedModel {
    pub name: String,
    pub n_blocks: usize,
    pub context_length: usize,
    pub tokenizer: TextTokenizer,
    pub has_tuned_lens: bool,
    pub queue: Arc<ModelQueue>,
}

/// A finished profile, kept for its charts and downloads as the JSON line `profile --json` prints
/// (so the memory it takes is known).
pub struct StoredResult {
    pub id: String,
    pub model: usize,
    pub json: Arc<str>,
}

#[derive(Default)]
struct Results {
    kept: std::collections::VecDeque<StoredResult>,
    bytes: usize,
}

/// What every handler sees.
pub struct App {
    pub models: Vec<ServedModel>,
    pub limits: Limits,
    pub access: guard::Access,
    results: Mutex<Results>,
    stopping: tokio::sync::watch::Receiver<bool>,
    /// Bounds the charts and reports built at once.
    renders: Arc<tokio::sync::Semaphore>,
    /// Bounds the reports built or being sent at once.
    reports: Arc<tokio::sync::Semaphore>,
}

impl App {
    /// Keeps a profile's JSON line (dropping the oldest beyond [`Limits::max_result_bytes`]) and
    /// returns its id.
    pub fn store(&self, model: usize, json: Arc<str>) -> String {
        let id = guard::random_hex(16);
        let mut r = self.results.lock().unwrap_or_else(|e| e.into_inner());
        while r.bytes + json.len() > self.limits.max_result_bytes && !r.kept.is_empty() {
            if let Some(old) = r.kept.pop_front() {
                r.bytes -= old.json.len();
            }
        }
        r.bytes += json.len();
        r.kept.push_back(StoredResult {
            id: id.clone(),
            model,
            json,
        });
        id
    }

    /// The kept profile `id` (its JSON line) and its model's index.
    pub fn result(&self, id: &str) -> Option<(usize, Arc<str>)> {
        let r = self.results.lock().unwrap_or_else(|e| e.into_inner());
        r.kept
            .iter()
            .find(|s| s.id == id)
            .map(|s| (s.model, s.json.clone()))
    }
}

/// The statistics an explorer profile carries: Shannon and [`ALPHAS`], the top-p count at the
/// paper's p = 0.6, the [`TOP_K`] most likely tokens, and the chosen token's rank and probability.
pub fn stat_spec() -> StatSpec {
    StatSpec {
        alphas: ALPHAS.to_vec(),
        top_k: TOP_K,
        target: TargetToken::Next,
        ..Default::default()
    }
}

/// A running explorer.
pub struct Explorer {
    addr: SocketAddr,
    url: String,
    token: Option<String>,
    app: Arc<App>,
    stop_tx: tokio::sync::watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
}

impl Explorer {
    /// Loads the models, binds the address and starts serving in the background.
    ///
    /// # Errors
    /// A model or lens that cannot be loaded, a lens that fits no model, an address that cannot be
    /// bound (in use, not this machine's), a token too short to protect anything.
    pub fn start(mut config: ExploreConfig) -> Result<Self> {
        let ip: IpAddr = match config.host.as_str() {
            "localhost" => IpAddr::from([127, 0, 0, 1]),
            h => h.parse().map_err(|_| {
                Error::invalid(format!(
                    "--host {h} is not an IP address: give 127.0.0.1 (this machine only, the default) or 0.0.0.0 (every network this machine is on)"
                ))
            })?,
        };
        if !ip.is_loopback() && config.token.is_none() {
            config.token = Some(guard::random_hex(24));
        }
        if let Some(t) = &config.token {
            guard::check_token_strength(t)?;
        }
        let listener = TcpListener::bind((ip, config.port)).map_err(|e| {
            Error::invalid(format!(
                "cannot listen on {}:{}: {e} (choose another --port, or 0 for any free one)",
                config.host, config.port
            ))
        })?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io("<socket>", e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::io("<socket>", e))?;

        let (models, workers) = load_models(&config)?;
        let stop_workers = |models: &[ServedModel], workers: Vec<JoinHandle<()>>| {
            for m in models {
                m.queue.stop();
            }
            for w in workers {
                let _ = w.join();
            }
        };
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let app = Arc::new(App {
            models,
            limits: config.limits,
            access: guard::Access::new(ip, addr.port(), config.token.clone()),
            results: Mutex::new(Results::default()),
            stopping: stop_rx.clone(),
            renders: Arc::new(tokio::sync::Semaphore::new(
                config.limits.max_renders.max(1),
            )),
            reports: Arc::new(tokio::sync::Semaphore::new(
                config.limits.max_renders.max(1),
            )),
        });
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
        {
            Ok(r) => r,
            Err(e) => {
                stop_workers(&app.models, workers);
                return Err(Error::io("<tokio runtime>", e));
            }
        };
        let router = api::router(app.clone());
        let ctrl_c = config.stop_on_ctrl_c;
        let max_connections = config.limits.max_connections;
        let stop_on_signal = stop_tx.clone();
        let stop_for_grace = stop_tx.subscribe();
        let server = match std::thread::Builder::new()
            .name("explore-http".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => conn::BoundedListener::new(l, max_connections),
                        Err(e) => {
                            log::error!("explore: cannot serve: {e}");
                            return;
                        }
                    };
                    let mut stop = stop_rx;
                    let shutdown = async move {
                        if ctrl_c {
                            tokio::select! {
                                _ = tokio::signal::ctrl_c() => { let _ = stop_on_signal.send(true); }
                                _ = stop.wait_for(|s| *s) => {}
                            }
                        } else {
                            let _ = stop.wait_for(|s| *s).await;
                        }
                    };
                    let mut stopped = stop_for_grace;
                    let serve = axum::serve(listener, router).with_graceful_shutdown(shutdown);
                    // Open pages end their streams when told to stop; a client that stalls (a
                    // half-sent request, a download it does not read) gets GRACE, then the runtime
                    // drops its connection.
                    tokio::select! {
                        r = serve => if let Err(e) = r {
                            log::error!("explore: the server stopped: {e}");
                        },
                        _ = async {
                            let _ = stopped.wait_for(|s| *s).await;
                            tokio::time::sleep(GRACE).await;
                        } => {}
                    }
                })
            }) {
            Ok(t) => t,
            Err(e) => {
                stop_workers(&app.models, workers);
                return Err(Error::io("<thread>", e));
            }
        };
        let shown = if ip.is_unspecified() {
            // 0.0.0.0 is not an address a browser can open; this machine is.
            "127.0.0.1".to_string()
        } else {
            match ip {
                IpAddr::V6(v6) => format!("[{v6}]"),
                IpAddr::V4(v4) => v4.to_string(),
            }
        };
        let url = match &config.token {
            Some(t) => format!("http://{shown}:{}/?token={t}", addr.port()),
            None => format!("http://{shown}:{}/", addr.port()),
        };
        Ok(Self {
            addr,
            url,
            token: config.token,
            app,
            stop_tx,
            server: Some(server),
            workers,
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's URL (with the token when there is one).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL other machines open, when the server listens on every network: this machine's
    /// address on its default route (found without sending anything). None on loopback, or
    /// without a route.
    pub fn network_url(&self) -> Option<String> {
        if !self.addr.ip().is_unspecified() {
            return None;
        }
        let probe = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
        // Connecting a UDP socket only picks the route; no packet leaves.
        probe.connect("192.0.2.1:9").ok()?;
        let ip = probe.local_addr().ok()?.ip();
        if ip.is_unspecified() || ip.is_loopback() {
            return None;
        }
        Some(self.url.replacen("127.0.0.1", &ip.to_string(), 1))
    }

    /// The access token, when the server requires one.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The models served, in the page's order.
    pub fn model_names(&self) -> Vec<String> {
        self.app.models.iter().map(|m| m.name.clone()).collect()
    }

    /// Serves until Ctrl-C (with [`ExploreConfig::stop_on_ctrl_c`]) or [`Explorer::stop`].
    pub fn wait(mut self) {
        if let Some(s) = self.server.take() {
            let _ = s.join();
        }
        self.shutdown_workers();
    }

    /// Stops serving: open pages are told, queued requests dropped, the workers finish their batch.
    pub fn stop(mut self) {
        let _ = self.stop_tx.send(true);
        if let Some(s) = self.server.take() {
            let _ = s.join();
        }
        self.shutdown_workers();
    }

    fn shutdown_workers(&mut self) {
        for m in &self.app.models {
            m.queue.stop();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl Drop for Explorer {
    fn drop(&mut self) {
        let _ = self.stop_tx.send(true);
        if let Some(s) = self.server.take() {
            let _ = s.join();
        }
        self.shutdown_workers();
    }
}

/// The sources of the models to serve: the configured ones, else the two offline models.
fn model_sources(config: &ExploreConfig) -> Result<Vec<ModelSource>> {
    if !config.models.is_empty() {
        return config
            .models
            .iter()
            .map(|m| crate::fetch::model_source(m))
            .collect();
    }
    crate::fetch::OFFLINE_MODELS
        .iter()
        .map(|m| crate::fetch::fetch_model(m).map(ModelSource::Gguf))
        .collect()
}

/// Loads every model and starts its worker; on failure, stops the workers already started.
fn load_models(config: &ExploreConfig) -> Result<(Vec<ServedModel>, Vec<JoinHandle<()>>)> {
    let mut models = Vec::new();
    let mut workers = Vec::new();
    match load_models_into(config, &mut models, &mut workers) {
        Ok(()) => Ok((models, workers)),
        Err(e) => {
            for m in &models {
                m.queue.stop();
            }
            for w in workers {
                let _ = w.join();
            }
            Err(e)
        }
    }
}

fn load_models_into(
    config: &ExploreConfig,
    models: &mut Vec<ServedModel>,
    workers: &mut Vec<JoinHandle<()>>,
) -> Result<()> {
    let load_opts = LoadOptions {
        device: parse_device(&config.device)?,
        dtype: config.dtype,
    };
    let mut lenses: Vec<Option<LensKind>> = config
        .tuned_lenses
        .iter()
        .map(|l| {
            let spec = if l.starts_with("tuned:") {
                l.clone()
            } else {
                format!("tuned:{l}")
            };
            LensKind::parse(&spec).map(Some)
        })
        .collect::<Result<_>>()?;
    for source in model_sources(config)? {
        log::info!("explore: loading {}", source.describe());
        let mut profiler = Profiler::new(load(&source, &load_opts)?, stat_spec())?;
        let info = profiler.model.info().clone();
        // The first unused lens that fits this model's width and depth.
        let tuned = lenses
            .iter_mut()
            .find(|l| {
                l.as_ref().and_then(LensKind::tuned).is_some_and(|t| {
                    t.check_fits(&info.name, info.d_model, info.n_layers)
                        .is_ok()
                })
            })
            .and_then(Option::take);
        if let Some(t) = &tuned {
            // Fails now, not at the first request, if the lens cannot read this model.
            profiler.set_lens(t.clone())?;
            profiler.set_lens(LensKind::Logit)?;
        }
        let mut name = info.name.clone();
        let mut k = 2;
        while models.iter().any(|m: &ServedModel| m.name == name) {
            name = format!("{} ({k})", info.name);
            k += 1;
        }
        let queue = ModelQueue::new(config.limits);
        let q = queue.clone();
        let has_tuned = tuned.is_some();
        models.push(ServedModel {
            name: name.clone(),
            n_blocks: info.n_layers,
            context_length: info.context_length,
            tokenizer: profiler.tokenizer.clone(),
            has_tuned_lens: has_tuned,
            queue,
        });
        workers.push(
            std::thread::Builder::new()
                .name(format!("explore-{name}"))
                .spawn(move || queue::work(&q, profiler, tuned))
                .map_err(|e| Error::io("<thread>", e))?,
        );
    }
    if let Some(unused) = config
        .tuned_lenses
        .iter()
        .zip(&lenses)
        .find(|(_, l)| l.is_some())
    {
        return Err(Error::invalid(format!(
            "the tuned lens {} fits none of the models served (its width and depth must match a model's)",
            unused.0
        )));
    }
    Ok(())
}

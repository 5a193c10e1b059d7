//! `entropy-lens explore` over real HTTP on an ephemeral loopback port, with the offline SmolLM2:
//! its profiles equal `profile --json`'s for the same request, concurrent requests share batches,
//! bad requests are 4xx and the server stays up, a full queue is 429, a closed page stops its
//! generation, and the Host / Origin / token checks hold.

mod common;

use common::http::http;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use entropy_lens::explore::{ExploreConfig, Explorer, Limits};
use entropy_lens::runner::{ProfileRequest, Profiler, TokenObserver};
use serde_json::Value;

fn start(limits: Limits, token: Option<&str>) -> Explorer {
    Explorer::start(ExploreConfig {
        models: vec![common::smollm2().display().to_string()],
        port: 0,
        token: token.map(str::to_string),
        limits,
        ..Default::default()
    })
    .expect("starting the explorer")
}

/// A profile request whose event stream is read step by step.
struct Open {
    stream: TcpStream,
    seen: String,
}

impl Open {
    fn send(addr: SocketAddr, body: &str) -> Self {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(300)))
            .unwrap();
        let req = format!(
            "POST /api/profile HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            addr.port(),
            body.len()
        );
        stream.write_all(req.as_bytes()).unwrap();
        Self {
            stream,
            seen: String::new(),
        }
    }

    /// Reads until `needle` has arrived `times` times.
    fn until(&mut self, needle: &str, times: usize) {
        let mut buf = [0u8; 8192];
        while self.seen.matches(needle).count() < times {
            let n = self.stream.read(&mut buf).unwrap();
            assert!(n > 0, "stream ended before {needle:?}: {}", self.seen);
            self.seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }

    /// Reads to the end; the event stream's text.
    fn finish(mut self) -> String {
        let mut rest = Vec::new();
        let _ = self.stream.read_to_end(&mut rest);
        self.seen.push_str(&String::from_utf8_lossy(&rest));
        let body = self.seen.split_once("\r\n\r\n").map_or("", |x| x.1);
        common::http::dechunk(body)
    }
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    http(addr, "GET", path, &[], b"")
}

fn post(addr: SocketAddr, body: &str) -> (u16, String) {
    http(
        addr,
        "POST",
        "/api/profile",
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    )
}

/// The `data` of the first event named `name` in an event stream.
fn event(stream: &str, name: &str) -> Option<Value> {
    stream.split("\n\n").find_map(|block| {
        let mut lines = block.lines();
        (lines.next()? == format!("event: {name}"))
            .then(|| serde_json::from_str(lines.next()?.strip_prefix("data: ")?).ok())
            .flatten()
    })
}

/// The result of a profile request that must succeed: (id, profile).
fn run(addr: SocketAddr, body: &str) -> (String, Value, String) {
    let (status, stream) = post(addr, body);
    assert_eq!(status, 200, "{body}: {stream}");
    let r = event(&stream, "result").unwrap_or_else(|| panic!("no result for {body}: {stream}"));
    (
        r["id"].as_str().unwrap().to_string(),
        r["profile"].clone(),
        stream,
    )
}

/// `profile --json` on `model` with the explorer's statistics (every prompt position, Rényi 0.5,
/// 2 and 5, the top-5 tokens, the next token's trace) and `args`: one profile per line.
fn cli_profiles(model: &str, args: &[&str]) -> Vec<Value> {
    let mut all = vec![
        "profile",
        "--json",
        "--model",
        model,
        "--all-positions",
        "--alpha",
        "0.5",
        "2",
        "5",
        "--top-k",
        "5",
        "--target",
        "next",
    ];
    all.extend_from_slice(args);
    common::ok(&all)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// [`cli_profiles`] of one prompt on the offline SmolLM2.
fn cli_profile(args: &[&str]) -> Value {
    let model = common::smollm2().display().to_string();
    let mut profiles = cli_profiles(&model, args);
    assert_eq!(profiles.len(), 1);
    profiles.remove(0)
}

#[test]
fn profiles_equal_the_cli_and_every_view_is_served() {
    let ex = start(Limits::default(), None);
    let a = ex.addr();
    let (status, page) = get(a, "/");
    assert_eq!(status, 200);
    assert!(page.contains("entropy-lens explorer"), "{page}");
    let (status, js) = get(a, "/assets/plotly.min.js");
    assert_eq!(status, 200);
    assert!(
        js.len() > 1_000_000 && js.contains("plotly.js"),
        "plotly.js is served whole"
    );

    // Greedy, with a skipped block; then sampled in the chat template.
    let (id, profile, stream) = run(
        a,
        r#"{"prompt": "The Eiffel Tower is in", "generate": 6, "skip": [3]}"#,
    );
    assert!(event(&stream, "queued").is_some() && event(&stream, "started").is_some());
    assert_eq!(
        profile,
        cli_profile(&[
            "--prompt",
            "The Eiffel Tower is in",
            "--generate",
            "6",
            "--skip",
            "3"
        ])
    );
    let (_, sampled, _) = run(
        a,
        r#"{"prompt": "Name a colour.", "generate": 5, "chat": true, "temperature": 0.9, "seed": 7}"#,
    );
    assert_eq!(
        sampled,
        cli_profile(&[
            "--prompt",
            "Name a colour.",
            "--generate",
            "5",
            "--chat",
            "--temperature",
            "0.9",
            "--seed",
            "7"
        ])
    );
    // The download is the same profile, as one JSON line.
    let (status, line) = get(a, &format!("/api/result/{id}/profile"));
    assert_eq!(status, 200);
    assert_eq!(line.lines().count(), 1);
    assert_eq!(serde_json::from_str::<Value>(&line).unwrap(), profile);

    // The charts, as Plotly JSON from the library's chart functions.
    let n_positions = profile["positions"].as_array().unwrap().len();
    for (query, trace) in [
        ("kind=heatmap&metric=shannon", "heatmap"),
        ("kind=heatmap&metric=renyi:0.5", "heatmap"),
        ("kind=heatmap&metric=top_p", "heatmap"),
        ("kind=delta&position=2", "bar"),
        ("kind=target&position=2", "scatter"),
    ] {
        let (status, body) = get(a, &format!("/api/result/{id}/chart?{query}"));
        assert_eq!(status, 200, "{query}: {body}");
        let fig: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(fig["data"][0]["type"], trace, "{query}");
    }
    let (_, heat) = get(a, &format!("/api/result/{id}/chart?kind=heatmap"));
    let heat: Value = serde_json::from_str(&heat).unwrap();
    assert_eq!(
        heat["data"][0]["z"].as_array().unwrap().len(),
        30,
        "one row per block"
    );
    assert_eq!(
        heat["data"][0]["z"][0].as_array().unwrap().len(),
        n_positions
    );
    let hover = heat["data"][0]["hovertext"][29][n_positions - 1]
        .as_str()
        .unwrap();
    assert!(
        hover.contains("top-p count") && hover.contains("top-5"),
        "{hover}"
    );

    // The report: plotly.js once, every chart, both prompts.
    let (sid, _, _) = run(a, r#"{"prompt": "One, two, three,", "generate": 3}"#);
    let (status, html) = get(a, &format!("/api/report?ids={id},{sid}"));
    assert_eq!(status, 200);
    assert_eq!(
        html.matches("* plotly.js v3").count(),
        1,
        "plotly.js embedded once"
    );
    assert!(html.contains("The Eiffel Tower is in") && html.contains("One, two, three,"));
    assert_eq!(
        html.matches("class=\"entropy-lens-chart\"").count(),
        6,
        "heatmap, ΔH and trace per profile"
    );
    ex.stop();
}

/// Requests that wait together run together: while one request keeps the worker busy, four more
/// queue, then run as one batch of four — whose profiles equal `profile --json --batch-size 4` on
/// the same prompts in the same order.
#[test]
fn waiting_requests_run_as_one_batch_equal_to_the_cli() {
    let ex = start(Limits::default(), None);
    let a = ex.addr();
    let mut busy = Open::send(
        a,
        r#"{"prompt": "Once upon a time", "generate": 16, "ignore_eos": true}"#,
    );
    busy.until("event: started", 1);
    let prompts = [
        "The capital of Italy is",
        "Water boils at",
        "My favourite book is",
        "Two plus two equals",
    ];
    let mut waiting = Vec::new();
    for p in prompts {
        let mut o = Open::send(
            a,
            &serde_json::json!({"prompt": p, "generate": 6}).to_string(),
        );
        o.until("event: queued", 1);
        waiting.push(o);
    }
    let streams: Vec<String> = waiting.into_iter().map(Open::finish).collect();
    busy.finish();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("prompts.jsonl");
    std::fs::write(
        &file,
        prompts
            .iter()
            .map(|p| serde_json::json!({ "prompt": p }).to_string() + "\n")
            .collect::<String>(),
    )
    .unwrap();
    let model = common::smollm2().display().to_string();
    let cli = cli_profiles(
        &model,
        &[
            "--prompts",
            file.to_str().unwrap(),
            "--generate",
            "6",
            "--batch-size",
            "4",
        ],
    );
    for ((stream, want), p) in streams.iter().zip(&cli).zip(prompts) {
        assert_eq!(
            event(stream, "started").unwrap()["batch"],
            4,
            "{p}: {stream}"
        );
        assert_eq!(&event(stream, "result").unwrap()["profile"], want, "{p}");
    }
    ex.stop();
}

/// A tuned lens given at start joins the lens picker; its profiles equal `profile --lens tuned:DIR`.
#[test]
fn a_tuned_lens_reads_like_the_cli() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let model = root.join("tests/fixtures/tuned_lens/llama");
    let lens = model.join("lens");
    let ex = Explorer::start(ExploreConfig {
        models: vec![model.display().to_string()],
        tuned_lenses: vec![lens.display().to_string()],
        port: 0,
        ..Default::default()
    })
    .unwrap();
    let a = ex.addr();
    let (_, models) = get(a, "/api/models");
    assert!(models.contains("\"tuned_lens\":true"), "{models}");
    let (_, tuned, _) = run(
        a,
        r#"{"prompt": "hello world", "generate": 3, "lens": "tuned"}"#,
    );
    let (_, logit, _) = run(a, r#"{"prompt": "hello world", "generate": 3}"#);
    assert_eq!(tuned["provenance"]["lens"]["kind"], "tuned");
    assert_ne!(
        tuned["positions"], logit["positions"],
        "the tuned lens reads differently"
    );
    let cli = cli_profiles(
        model.to_str().unwrap(),
        &[
            "--prompt",
            "hello world",
            "--generate",
            "3",
            "--lens",
            &format!("tuned:{}", lens.display()),
        ],
    );
    assert_eq!(cli.len(), 1);
    assert_eq!(tuned, cli[0]);
    ex.stop();
    // A lens that fits no model served is refused at start.
    let wrong = Explorer::start(ExploreConfig {
        models: vec![common::smollm2().display().to_string()],
        tuned_lenses: vec![lens.display().to_string()],
        port: 0,
        ..Default::default()
    });
    assert!(
        wrong.err().unwrap().to_string().contains("fits none"),
        "refused"
    );
}

/// Stopping returns promptly with a page's stream open and a client stalled mid-request.
#[test]
fn stop_returns_with_open_and_stalled_connections() {
    let ex = start(Limits::default(), None);
    let a = ex.addr();
    let mut open = Open::send(
        a,
        r#"{"prompt": "Once upon a time", "generate": 64, "ignore_eos": true}"#,
    );
    open.until("event: token", 1);
    let mut stalled = TcpStream::connect(a).unwrap();
    stalled
        .write_all(b"POST /api/profile HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
        .unwrap();
    let t0 = Instant::now();
    ex.stop();
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "stop took {:?}",
        t0.elapsed()
    );
    let rest = open.finish();
    assert!(
        rest.contains("the server is stopping") || rest.contains("event: result"),
        "{rest}"
    );
}

#[test]
fn bad_requests_are_4xx_and_the_server_stays_up() {
    let ex = start(Limits::default(), None);
    let a = ex.addr();
    let long_prompt = "word ".repeat(400);
    let huge = "a".repeat(10 * 1024 * 1024);
    let cases: Vec<(String, u16, &str)> = vec![
        ("{\"prompt\": ".into(), 400, "cannot read the request"),
        ("[1, 2]".into(), 400, "cannot read the request"),
        (r#"{"prompt": "x", "generate": -3}"#.into(), 400, "-3"),
        (
            r#"{"prompt": "x", "generate": 1000000000000}"#.into(),
            400,
            "at most 64",
        ),
        (
            r#"{"prompt": "x", "model": "gpt-5"}"#.into(),
            400,
            "unknown model",
        ),
        (
            r#"{"prompt": "x", "skip": [31]}"#.into(),
            400,
            "cannot skip block 31",
        ),
        (
            r#"{"prompt": "x", "skip": [0]}"#.into(),
            400,
            "cannot skip block 0",
        ),
        (
            r#"{"prompt": "x", "skip": [-1]}"#.into(),
            400,
            "cannot read",
        ),
        (
            r#"{"prompt": "x", "temperature": -1}"#.into(),
            400,
            "temperature",
        ),
        (
            r#"{"prompt": "x", "lens": "tuned"}"#.into(),
            400,
            "no tuned lens",
        ),
        (
            r#"{"prompt": "x", "lens": "magic"}"#.into(),
            400,
            "unknown lens",
        ),
        (
            r#"{"prompt": "x", "generat": 4}"#.into(),
            400,
            "unknown field",
        ),
        (
            serde_json::json!({ "prompt": long_prompt }).to_string(),
            400,
            "at most 256",
        ),
        (
            serde_json::json!({ "prompt": huge }).to_string(),
            413,
            "larger than 65536 bytes",
        ),
    ];
    for (body, status, needle) in &cases {
        let (got, text) = post(a, body);
        assert_eq!(got, *status, "{}: {text}", &body[..body.len().min(60)]);
        let msg: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
        assert!(
            msg["error"].as_str().unwrap().contains(needle),
            "{needle}: {text}"
        );
    }
    let (status, text) = http(a, "POST", "/api/profile", &[], &[0xff, 0xfe, 0x7b]);
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("not UTF-8"));
    for (path, status) in [
        ("/api/nothing", 404),
        ("/api/result/0000/profile", 404),
        ("/api/result/0000/chart?kind=heatmap", 404),
        ("/api/report?ids=", 400),
        ("/api/report", 400),
    ] {
        assert_eq!(get(a, path).0, status, "{path}");
    }
    let (status, text) = http(a, "DELETE", "/api/profile", &[], b"");
    assert_eq!(status, 405);
    assert!(text.contains("\"error\""), "{text}");
    // A body announced too large is refused without waiting for it.
    let (status, text) = http(
        a,
        "POST",
        "/api/profile",
        &[("Content-Length", "10000000000")],
        b"",
    );
    assert_eq!(status, 413, "{text}");
    let (id, _, _) = run(a, r#"{"prompt": "Still up?", "generate": 2}"#);
    for q in [
        "kind=pie",
        "kind=delta",
        "kind=delta&position=999",
        "kind=heatmap&metric=renyi:7",
        "kind=heatmap&metric=loud",
    ] {
        let (status, text) = get(a, &format!("/api/result/{id}/chart?{q}"));
        assert_eq!(status, 400, "{q}: {text}");
    }
    ex.stop();
}

#[test]
fn a_full_queue_is_429_and_a_closed_page_stops_its_generation() {
    let limits = Limits {
        max_queue: 1,
        max_batch: 1,
        ..Limits::default()
    };
    let ex = start(limits, None);
    let a = ex.addr();
    // One running, one waiting: the queue of one is full.
    let body = r#"{"prompt": "Once upon a time", "generate": 48, "ignore_eos": true}"#;
    let mut running = Open::send(a, body);
    running.until("event: started", 1);
    let mut waiting = Open::send(a, body);
    waiting.until("event: queued", 1);
    let (status, text) = post(a, body);
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("already waiting"), "{text}");
    drop(waiting);
    drop(running);
    wait_idle(a);

    // Close a request's connection after its second token: it stops generating.
    let before = health(a)["models"][0]["generated_tokens"].as_u64().unwrap();
    let mut s = TcpStream::connect(a).unwrap();
    let req = format!(
        "POST /api/profile HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
        a.port(),
        r#"{"prompt": "Once upon a time", "generate": 64, "ignore_eos": true}"#.len(),
        r#"{"prompt": "Once upon a time", "generate": 64, "ignore_eos": true}"#
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while seen.matches("event: token").count() < 2 {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "stream ended early: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    drop(s);
    let t0 = Instant::now();
    loop {
        let h = health(a);
        if h["models"][0]["running"] == 0 && h["models"][0]["waiting"] == 0 {
            let generated = h["models"][0]["generated_tokens"].as_u64().unwrap() - before;
            assert!(
                generated < 64,
                "the closed page's generation ran to its end ({generated} tokens)"
            );
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the worker never went idle"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    run(a, r#"{"prompt": "Still up?", "generate": 2}"#);
    ex.stop();
}

/// Waits until the model's worker has nothing running or waiting.
fn wait_idle(a: SocketAddr) {
    let t0 = Instant::now();
    loop {
        let h = health(a);
        if h["models"][0]["running"] == 0 && h["models"][0]["waiting"] == 0 {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the worker never went idle"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn health(a: SocketAddr) -> Value {
    serde_json::from_str(&get(a, "/api/health").1).unwrap()
}

#[test]
fn host_origin_and_token_are_checked() {
    let token = "classroom-token-0123456789";
    let ex = start(Limits::default(), Some(token));
    let a = ex.addr();
    let host = format!("127.0.0.1:{}", a.port());
    let own = format!("http://{host}");
    assert_eq!(get(a, "/api/models").0, 401);
    assert_eq!(get(a, "/").0, 401);
    assert_eq!(get(a, "/assets/app.js").0, 200, "assets are public");
    assert_eq!(get(a, &format!("/api/models?token={token}")).0, 200);
    assert_eq!(
        get(a, "/api/models?token=classroom-token-0123456780").0,
        401
    );
    let ok = |headers: &[(&str, &str)]| http(a, "GET", "/api/models", headers, b"").0;
    assert_eq!(ok(&[("x-entropy-lens-token", token)]), 200);
    assert_eq!(
        ok(&[("x-entropy-lens-token", token), ("Origin", &own)]),
        200
    );
    assert_eq!(
        ok(&[
            ("x-entropy-lens-token", token),
            ("Origin", "http://evil.example")
        ]),
        403
    );
    assert_eq!(
        ok(&[
            ("x-entropy-lens-token", token),
            ("Host", &format!("evil.example:{}", a.port()))
        ]),
        403
    );
    assert_eq!(
        ok(&[
            ("x-entropy-lens-token", token),
            ("Host", &format!("localhost:{}", a.port()))
        ]),
        200
    );
    // A page elsewhere cannot post a request either.
    let (status, _) = http(
        a,
        "POST",
        "/api/profile",
        &[
            ("x-entropy-lens-token", token),
            ("Origin", "http://evil.example"),
        ],
        br#"{"prompt": "x"}"#,
    );
    assert_eq!(status, 403);
    ex.stop();

    // On every network: a token is generated, and required.
    let open = Explorer::start(ExploreConfig {
        models: vec![common::smollm2().display().to_string()],
        host: "0.0.0.0".into(),
        port: 0,
        ..Default::default()
    })
    .unwrap();
    let t = open.token().expect("a generated token").to_string();
    assert!(
        t.len() >= 32 && open.url().ends_with(&format!("?token={t}")),
        "{}",
        open.url()
    );
    let a = SocketAddr::from(([127, 0, 0, 1], open.addr().port()));
    assert_eq!(get(a, "/api/models").0, 401);
    assert_eq!(get(a, &format!("/api/models?token={t}")).0, 200);
    // The URL other machines open: this machine's own address, which answers too.
    if let Some(url) = open.network_url() {
        assert!(
            url.ends_with(&format!(":{}/?token={t}", open.addr().port())),
            "{url}"
        );
        let ip: std::net::IpAddr = url[7..].split(':').next().unwrap().parse().unwrap();
        assert!(!ip.is_loopback(), "{url}");
        let own = SocketAddr::new(ip, open.addr().port());
        let host = own.to_string();
        let (status, _) = http(
            own,
            "GET",
            &format!("/api/models?token={t}"),
            &[("Host", &host)],
            b"",
        );
        assert_eq!(status, 200, "{url}");
    }
    open.stop();

    let weak = Explorer::start(ExploreConfig {
        models: vec![common::smollm2().display().to_string()],
        port: 0,
        token: Some("1234".into()),
        ..Default::default()
    });
    assert!(weak.err().unwrap().to_string().contains("at least 16"));
}

#[test]
fn the_cli_prints_its_url_and_stops_on_ctrl_c() {
    use std::io::BufRead;
    let model = common::smollm2().display().to_string();
    for (args, expect_token) in [
        (vec!["--port", "0"], false),
        (vec!["--host", "0.0.0.0", "--port", "0"], true),
    ] {
        let mut child = std::process::Command::new(common::cli())
            .arg("explore")
            .args(["--model", &model])
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut url = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut url)
            .unwrap();
        let url = url.trim().to_string();
        assert_eq!(url.contains("?token="), expect_token, "{url}");
        let port: u16 = url
            .split(':')
            .nth(2)
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let path = url.split_once(&format!(":{port}")).unwrap().1.to_string();
        let (status, page) = get(SocketAddr::from(([127, 0, 0, 1], port)), &path);
        // Ctrl-C: the server stops and the command exits cleanly, promptly.
        // SAFETY: kill(2) on our own child; no memory is touched.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGINT);
        }
        let t0 = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if t0.elapsed() > Duration::from_secs(20) {
                child.kill().unwrap();
                panic!("explore did not stop on Ctrl-C within 20 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "exit after Ctrl-C: {:?}", out.status);
        assert_eq!(status, 200, "{url}");
        assert!(page.contains("entropy-lens explorer"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            err.contains("warning: the explorer listens on 0.0.0.0"),
            expect_token,
            "{err}"
        );
    }
    common::fails_with(
        &[
            "explore", "--model", &model, "--port", "0", "--token", "short",
        ],
        "at least 16",
    );
    common::fails_with(
        &["explore", "--model", &model, "--host", "example.org"],
        "not an IP address",
    );
}

/// `entropy-lens explore` with no arguments serves both offline models on 127.0.0.1:8080 (port 0
/// stands in when something else holds 8080 on this machine), and each answers.
#[test]
fn with_no_arguments_it_serves_both_offline_models() {
    use std::io::BufRead;
    common::smollm2();
    common::gemma3();
    let free = std::net::TcpListener::bind("127.0.0.1:8080").is_ok();
    let args: &[&str] = if free { &[] } else { &["--port", "0"] };
    let mut child = std::process::Command::new(common::cli())
        .arg("explore")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut url = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let url = url.trim().to_string();
    if free {
        assert_eq!(url, "http://127.0.0.1:8080/");
    }
    let port: u16 = url
        .split(':')
        .nth(2)
        .unwrap()
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let a = SocketAddr::from(([127, 0, 0, 1], port));
    let (status, models) = get(a, "/api/models");
    let models: Value = serde_json::from_str(&models).unwrap();
    let names: Vec<String> = models["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_string())
        .collect();
    let answers: Vec<(String, Value)> = names
        .iter()
        .map(|n| {
            let (_, p, _) = run(
                a,
                &serde_json::json!({"model": n, "prompt": "Hello", "generate": 2}).to_string(),
            );
            (n.clone(), p)
        })
        .collect();
    child.kill().unwrap();
    let _ = child.wait();
    assert_eq!(status, 200);
    assert_eq!(names.len(), 2, "{names:?}");
    for (n, p) in answers {
        assert_eq!(p["model"], n.as_str());
        assert_eq!(p["generated_ids"].as_array().unwrap().len(), 2, "{n}");
    }
}

/// The runner's observer hook, which the explorer's cancellation rests on: stopping one sequence
/// of a batch ends it there and leaves the others as they were.
#[test]
fn an_observer_stops_one_sequence_of_a_batch() {
    struct StopSecondAt3(Vec<AtomicUsize>);
    impl TokenObserver for StopSecondAt3 {
        fn token(&self, request: usize) -> bool {
            let n = self.0[request].fetch_add(1, Ordering::Relaxed) + 1;
            !(request == 1 && n == 3)
        }
    }
    let mut p = Profiler::load(
        &common::smollm2().display().to_string(),
        &Default::default(),
    )
    .unwrap();
    let reqs: Vec<ProfileRequest> = ["Once upon a time", "The weather today"]
        .iter()
        .map(|t| ProfileRequest::new(*t).generate(10).ignore_eos(true))
        .collect();
    let full = p.run_batch(&reqs).unwrap();
    let obs = StopSecondAt3(vec![AtomicUsize::new(0), AtomicUsize::new(0)]);
    let stopped = p.run_batch_observed(&reqs, &obs).unwrap();
    assert_eq!(stopped[0].generated_ids, full[0].generated_ids);
    assert_eq!(stopped[1].generated_ids, full[1].generated_ids[..3]);
    assert_eq!(obs.0[0].load(Ordering::Relaxed), 10);
}

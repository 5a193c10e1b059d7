//! The explorer in a real browser: headless Chromium (Debian's `chromium`), driven through the
//! DevTools protocol over a WebSocket, against the explorer on an ephemeral loopback port with the
//! offline SmolLM2. It types a prompt, runs it, waits for the heatmap, hovers a cell with the mouse
//! and reads the tooltip's tokens, clicks the cell for the ΔH bars, ticks blocks to skip and sees the
//! output change, downloads the report, and saves a screenshot (`target/explorer.png`; also to the
//! path in `EXPLORER_SCREENSHOT`, e.g. `docs/explorer.png`).
//!
//! Chromium shares the loopback interface with the server (no network namespace, unlike the report
//! test), but resolves no name and uses no proxy; the page's Content-Security-Policy allows its own
//! origin only, so nothing could be fetched from elsewhere. Needs Chromium, so it is ignored by a
//! plain `cargo test`; `scripts/test.sh` installs Chromium and runs it.

mod common;

use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use entropy_lens::explore::{ExploreConfig, Explorer};
use serde_json::{json, Value};
use tungstenite::{Message, WebSocket};

/// The whole browser session; past it the test fails.
const LIMIT: Duration = Duration::from_secs(240);

/// Chromium and all its helper processes, killed together when dropped.
struct Browser(Child);

impl Drop for Browser {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's process group; no memory is touched.
        unsafe {
            libc::kill(-(self.0.id() as i32), libc::SIGKILL);
        }
        let _ = self.0.wait();
    }
}

/// A DevTools-protocol connection to the browser, with one page session.
struct Cdp {
    ws: WebSocket<TcpStream>,
    next_id: u64,
    session: Option<String>,
    deadline: Instant,
    /// Exceptions thrown by the page's scripts.
    errors: Vec<String>,
}

impl Cdp {
    fn connect(profile: &Path) -> Self {
        let port_file = profile.join("DevToolsActivePort");
        let t0 = Instant::now();
        let text = loop {
            if let Ok(t) = std::fs::read_to_string(&port_file) {
                if t.lines().count() >= 2 {
                    break t;
                }
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "Chromium did not open its DevTools port"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let mut lines = text.lines();
        let port: u16 = lines.next().unwrap().trim().parse().unwrap();
        let path = lines.next().unwrap().trim().to_string();
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let (ws, _) = tungstenite::client::client(format!("ws://127.0.0.1:{port}{path}"), stream)
            .expect("DevTools WebSocket handshake");
        Self {
            ws,
            next_id: 1,
            session: None,
            deadline: Instant::now() + LIMIT,
            errors: Vec::new(),
        }
    }

    /// Sends `method` (to the page session when attached) and returns its result.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.call_on(method, params, self.session.clone())
    }

    fn call_on(&mut self, method: &str, params: Value, session: Option<String>) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        self.ws.send(Message::text(msg.to_string())).unwrap();
        loop {
            assert!(
                Instant::now() < self.deadline,
                "the browser session ran past {LIMIT:?} (at {method})"
            );
            let m = match self.ws.read() {
                Ok(Message::Text(t)) => t,
                Ok(_) => continue,
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    continue
                }
                Err(e) => panic!("DevTools connection failed at {method}: {e}"),
            };
            let v: Value = serde_json::from_str(m.as_str()).unwrap();
            if v["method"] == "Runtime.exceptionThrown" {
                self.errors
                    .push(v["params"]["exceptionDetails"].to_string());
            }
            if v["id"] == id {
                if let Some(e) = v.get("error") {
                    panic!("{method} failed: {e}");
                }
                return v["result"].clone();
            }
        }
    }

    /// Evaluates `js` in the page (awaiting a promise) and returns its value.
    fn eval(&mut self, js: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": js, "awaitPromise": true, "returnByValue": true}),
        );
        if let Some(e) = r.get("exceptionDetails") {
            panic!("page script failed: {e}\n{js}");
        }
        r["result"]["value"].clone()
    }

    /// Waits until `js` is true in the page.
    fn wait_for(&mut self, js: &str, what: &str, limit: Duration) {
        let t0 = Instant::now();
        while self.eval(js) != json!(true) {
            assert!(t0.elapsed() < limit, "waited {limit:?} for {what}; status: {}", self.eval("location.href + ' | ' + document.title + ' | ' + (document.getElementById('status') || {}).textContent + ' | ' + [...document.querySelectorAll('.pane')].map(p => p.dataset.state + ': ' + p.querySelector('.output').textContent).join(' | ')"));
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn mouse(&mut self, kind: &str, x: f64, y: f64) {
        let mut p = json!({"type": kind, "x": x, "y": y, "button": "none"});
        if kind != "mouseMoved" {
            p["button"] = json!("left");
            p["clickCount"] = json!(1);
        }
        self.call("Input.dispatchMouseEvent", p);
    }

    fn click(&mut self, x: f64, y: f64) {
        self.mouse("mouseMoved", x, y);
        self.mouse("mousePressed", x, y);
        self.mouse("mouseReleased", x, y);
    }

    /// Clicks the centre of the element `selector` matches.
    fn click_element(&mut self, selector: &str) {
        let r = self.eval(&format!(
            "(() => {{ const e = document.querySelector({s}); e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()",
            s = json!(selector)
        ));
        self.click(r[0].as_f64().unwrap(), r[1].as_f64().unwrap());
    }

    /// The viewport point of heatmap cell (block row, position column) in pane `pane`.
    fn cell(&mut self, pane: usize, row: usize, col: usize) -> (f64, f64) {
        let r = self.eval(&format!(
            "(() => {{ const gd = document.querySelectorAll('.heatmap')[{pane}]; gd.scrollIntoView({{block: 'center'}}); const b = gd.getBoundingClientRect(); const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis; return [b.left + xa._offset + xa.l2p({col}), b.top + ya._offset + ya.l2p({row})]; }})()"
        ));
        (r[0].as_f64().unwrap(), r[1].as_f64().unwrap())
    }
}

#[test]
#[ignore = "needs Debian's chromium; run by scripts/test.sh"]
fn the_explorer_works_in_chromium() {
    let explorer = Explorer::start(ExploreConfig {
        models: vec![common::smollm2().display().to_string()],
        port: 0,
        ..Default::default()
    })
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let profile = tmp.path().join("profile");
    let downloads = tmp.path().join("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let _browser = Browser(
        Command::new(common::chromium())
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-proxy-server",
                // No name resolves: the page is on 127.0.0.1 and needs nothing else.
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                "--remote-debugging-port=0",
                &format!("--user-data-dir={}", profile.display()),
                "about:blank",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("starting Chromium"),
    );
    let mut cdp = Cdp::connect(&profile);
    cdp.call(
        "Browser.setDownloadBehavior",
        json!({"behavior": "allow", "downloadPath": downloads.display().to_string()}),
    );
    let target = cdp.call("Target.createTarget", json!({"url": "about:blank"}));
    let attached = cdp.call(
        "Target.attachToTarget",
        json!({"targetId": target["targetId"], "flatten": true}),
    );
    cdp.session = Some(attached["sessionId"].as_str().unwrap().to_string());
    cdp.call("Runtime.enable", json!({}));
    cdp.call("Page.enable", json!({}));
    cdp.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1400, "height": 1150, "deviceScaleFactor": 1, "mobile": false}),
    );
    cdp.call("Page.navigate", json!({"url": explorer.url()}));
    cdp.wait_for(
        "document.body && document.body.dataset.ready === '1' && !!window.Plotly",
        "the page and plotly.js",
        Duration::from_secs(30),
    );

    // Type a prompt and run it.
    let prompt = "The Eiffel Tower is located in the city of";
    cdp.eval("(() => { const t = document.getElementById('prompt-a'); t.focus(); t.select(); return true; })()");
    cdp.call("Input.insertText", json!({"text": prompt}));
    cdp.eval(
        "(() => { const g = document.getElementById('generate'); g.value = '6'; return true; })()",
    );
    cdp.click_element("#run");
    cdp.wait_for(
        "document.querySelectorAll('.pane[data-state=done] .heatmap .heatmaplayer').length === 1",
        "the heatmap",
        Duration::from_secs(120),
    );
    let output = cdp.eval("document.querySelector('.pane .output').textContent");
    assert!(output.as_str().unwrap().starts_with(prompt), "{output}");

    // Hover the last block at the last prompt position: the tooltip lists the top-5 tokens.
    let n_prompt = cdp
        .eval("document.querySelectorAll('.heatmap')[0].data[0].x.length")
        .as_u64()
        .unwrap() as usize;
    let (x, y) = cdp.cell(0, 29, 9.min(n_prompt - 1));
    cdp.mouse("mouseMoved", x - 2.0, y - 2.0);
    cdp.mouse("mouseMoved", x, y);
    cdp.wait_for(
        "!!document.querySelector('.heatmap .hoverlayer .hovertext')",
        "the tooltip",
        Duration::from_secs(10),
    );
    let tip = cdp.eval("document.querySelector('.heatmap .hoverlayer .hovertext').textContent");
    let tip = tip.as_str().unwrap();
    println!("tooltip: {tip}");
    assert!(
        tip.contains("top-p count") && tip.contains("top-5"),
        "{tip}"
    );
    assert!(
        tip.contains("Paris"),
        "the last block's top tokens after \"{prompt}\" include Paris: {tip}"
    );

    // Click it: the ΔH bars and the chosen token's trace of that position.
    cdp.click(x, y);
    cdp.wait_for("document.querySelectorAll('.detail .delta .main-svg, .detail .target .main-svg').length >= 2", "the ΔH bars", Duration::from_secs(30));

    // Skip blocks 1 and 2: the output changes.
    cdp.click_element("#skip-box summary");
    for b in [1, 2] {
        cdp.click_element(&format!("input[name=skip][value='{b}']"));
    }
    assert_eq!(
        cdp.eval("document.querySelectorAll('input[name=skip]:checked').length"),
        json!(2)
    );
    cdp.click_element("#run");
    cdp.wait_for(
        "document.querySelectorAll('.pane[data-state=done] .heatmaplayer').length === 2",
        "both heatmaps",
        Duration::from_secs(120),
    );
    let outputs =
        cdp.eval("[...document.querySelectorAll('.pane .output')].map(o => o.textContent)");
    println!("outputs: {outputs}");
    assert_ne!(
        outputs[0], outputs[1],
        "skipping blocks 1 and 2 changed nothing"
    );
    let status = cdp.eval("document.getElementById('status').textContent");
    assert!(
        status.as_str().unwrap().contains("output changed"),
        "{status}"
    );

    // The screenshot for the docs: both panes, a tooltip showing.
    let (x, y) = cdp.cell(0, 20, 9.min(n_prompt - 1));
    cdp.mouse("mouseMoved", x, y);
    cdp.wait_for(
        "!!document.querySelector('.heatmap .hoverlayer .hovertext')",
        "the tooltip",
        Duration::from_secs(10),
    );
    cdp.eval("window.scrollTo(0, 0)");
    let shot = cdp.call("Page.captureScreenshot", json!({"format": "png"}));
    let png = base64_decode(shot["data"].as_str().unwrap());
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    std::fs::create_dir_all(&target_dir).unwrap();
    std::fs::write(target_dir.join("explorer.png"), &png).unwrap();
    if let Some(p) = std::env::var_os("EXPLORER_SCREENSHOT") {
        std::fs::write(p, &png).unwrap();
    }

    // Download the report: one offline page with both profiles' charts.
    cdp.click_element("#download-report");
    let t0 = Instant::now();
    let report = loop {
        let done: Vec<PathBuf> = std::fs::read_dir(&downloads)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "html"))
            .collect();
        if let Some(p) = done.first() {
            break p.clone();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the report was not downloaded"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(300));
    let html = std::fs::read_to_string(&report).unwrap();
    assert_eq!(
        html.matches("* plotly.js v3").count(),
        1,
        "plotly.js embedded once"
    );
    assert_eq!(html.matches("class=\"entropy-lens-chart\"").count(), 6);
    assert!(html.contains(prompt));
    assert!(cdp.errors.is_empty(), "the page threw: {:?}", cdp.errors);
    explorer.stop();
}

fn base64_decode(s: &str) -> Vec<u8> {
    let table = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for v in s.bytes().filter_map(table) {
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

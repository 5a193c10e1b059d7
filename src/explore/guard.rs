//! Who may talk to an explorer.
//!
//! * **Host**: a server on a loopback address answers only requests addressed to `localhost`,
//!   `127.0.0.1` or `[::1]` at its port. A page elsewhere that points its own name at 127.0.0.1
//!   (DNS rebinding) sends its own name as `Host` and is refused.
//! * **Origin**: a request a browser sends from a page carries that page's origin; only the
//!   server's own is accepted, so another site's page cannot post requests to it.
//! * **Token**: a server listening beyond this machine (`--host 0.0.0.0`) requires its access
//!   token (the `token` query parameter, which the page then sends as the `x-entropy-lens-token`
//!   header) on the page and on every API call; the static assets are public.

use std::net::IpAddr;

use axum::http::{header, HeaderMap, StatusCode, Uri};
use rand::RngCore;

use crate::error::{Error, Result};

/// The header the page sends its token in.
pub const TOKEN_HEADER: &str = "x-entropy-lens-token";

/// The server's rules.
pub struct Access {
    loopback: bool,
    /// The bound address as a `Host` names it (`127.0.0.2`, `[::1]`).
    own: String,
    port: u16,
    token: Option<String>,
}

/// `n` random bytes as hex (from the thread's cryptographically secure generator, seeded by the
/// operating system).
pub fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A token a classroom cannot guess: 16 characters or more, URL-safe.
pub fn check_token_strength(token: &str) -> Result<()> {
    if token.len() < 16 {
        return Err(Error::invalid(
            "--token must be at least 16 characters (leave it out on a network address and one is generated)",
        ));
    }
    if !token
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(Error::invalid(
            "--token may hold only letters, digits, '-' and '_' (it goes into the URL)",
        ));
    }
    Ok(())
}

/// Equal strings, in a time that does not depend on where they first differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl Access {
    pub fn new(ip: IpAddr, port: u16, token: Option<String>) -> Self {
        let own = match ip {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        };
        Self {
            loopback: ip.is_loopback(),
            own,
            port,
            token,
        }
    }

    /// Whether the server requires a token.
    pub fn needs_token(&self) -> bool {
        self.token.is_some()
    }

    fn host_allowed(&self, host: &str) -> bool {
        if !self.loopback {
            // Any name reaches a server on the network; the token is what protects it.
            return true;
        }
        let (name, port) = match host.rsplit_once(':') {
            Some((n, p)) if !n.is_empty() && !p.contains(']') => (n, p.parse::<u16>().ok()),
            _ => (host, Some(80)),
        };
        let name = name.to_ascii_lowercase();
        port == Some(self.port)
            && (matches!(name.as_str(), "localhost" | "127.0.0.1" | "[::1]") || name == self.own)
    }

    /// Checks a request; `Err` holds the status and the message to answer with.
    pub fn check(
        &self,
        headers: &HeaderMap,
        uri: &Uri,
    ) -> std::result::Result<(), (StatusCode, String)> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !self.host_allowed(host) {
            return Err((
                StatusCode::FORBIDDEN,
                format!(
                    "this explorer answers only requests addressed to localhost:{p} or 127.0.0.1:{p} (Host was {host:?}); to serve a classroom, start it with --host 0.0.0.0",
                    p = self.port
                ),
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let expected = format!("http://{host}");
            if origin.to_str().map(|o| o != expected).unwrap_or(true) {
                return Err((
                    StatusCode::FORBIDDEN,
                    "requests from other sites' pages are refused: open the explorer's own page"
                        .into(),
                ));
            }
        }
        if uri.path().starts_with("/assets/") {
            return Ok(());
        }
        if let Some(token) = &self.token {
            let given = headers
                .get(TOKEN_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
                .or_else(|| query_token(uri));
            if !given.is_some_and(|g| same(&g, token)) {
                return Err((
                    StatusCode::UNAUTHORIZED,
                    "this explorer needs its access token: open the URL its terminal printed (it ends in ?token=…)".into(),
                ));
            }
        }
        Ok(())
    }
}

fn query_token(uri: &Uri) -> Option<String> {
    uri.query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix("token="))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, host.parse().unwrap());
        if let Some(o) = origin {
            h.insert(header::ORIGIN, o.parse().unwrap());
        }
        h
    }

    #[test]
    fn loopback_accepts_its_own_names_only() {
        let a = Access::new(IpAddr::from([127, 0, 0, 1]), 8080, None);
        let uri: Uri = "/api/models".parse().unwrap();
        for ok in [
            "localhost:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
            "LOCALHOST:8080",
        ] {
            assert!(a.check(&headers(ok, None), &uri).is_ok(), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "localhost:8081",
            "127.0.0.1",
            "",
            "[::1]",
        ] {
            assert_eq!(
                a.check(&headers(bad, None), &uri).unwrap_err().0,
                StatusCode::FORBIDDEN,
                "{bad}"
            );
        }
        assert!(a
            .check(
                &headers("localhost:8080", Some("http://localhost:8080")),
                &uri
            )
            .is_ok());
        assert_eq!(
            a.check(
                &headers("localhost:8080", Some("http://evil.example")),
                &uri
            )
            .unwrap_err()
            .0,
            StatusCode::FORBIDDEN
        );
    }

    #[test]
    fn another_loopback_address_accepts_itself() {
        let a = Access::new(IpAddr::from([127, 0, 0, 2]), 9000, None);
        let uri: Uri = "/".parse().unwrap();
        assert!(a.check(&headers("127.0.0.2:9000", None), &uri).is_ok());
        assert!(a.check(&headers("localhost:9000", None), &uri).is_ok());
        assert!(a.check(&headers("127.0.0.3:9000", None), &uri).is_err());
    }

    #[test]
    fn network_server_needs_the_token() {
        let t = "abcdefghijklmnop0123";
        let a = Access::new(IpAddr::from([0, 0, 0, 0]), 80, Some(t.into()));
        let h = headers("192.168.1.5", None);
        let api: Uri = "/api/models".parse().unwrap();
        assert_eq!(a.check(&h, &api).unwrap_err().0, StatusCode::UNAUTHORIZED);
        let with: Uri = format!("/api/models?token={t}").parse().unwrap();
        assert!(a.check(&h, &with).is_ok());
        let wrong: Uri = "/api/models?token=abcdefghijklmnop0124".parse().unwrap();
        assert_eq!(a.check(&h, &wrong).unwrap_err().0, StatusCode::UNAUTHORIZED);
        let mut hh = h.clone();
        hh.insert(TOKEN_HEADER, t.parse().unwrap());
        assert!(a.check(&hh, &api).is_ok());
        let asset: Uri = "/assets/app.js".parse().unwrap();
        assert!(a.check(&h, &asset).is_ok());
    }

    #[test]
    fn weak_tokens_are_refused() {
        assert!(check_token_strength("short").is_err());
        assert!(check_token_strength("has spaces in it, long").is_err());
        assert!(check_token_strength("abcdefghijklmnop").is_ok());
        assert_eq!(random_hex(24).len(), 48);
    }
}

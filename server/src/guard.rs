//! What stands between the network and the routes, for every request whatever its route: the
//! Host check (a request must name this service, as it listens or as `--public-url` names it,
//! so a page on another site that resolves its own name to this address — DNS rebinding — is
//! refused), and the headers every response carries (`X-Content-Type-Options: nosniff`, and
//! `Cache-Control: no-store` unless the route chose its own caching, as the UI's files do).
//! Also the warning `seed serve` prints when it listens off loopback over plain HTTP.
//!
//! The decisions are pure functions of the Host, the bound addresses and the public URL; the
//! middleware ([`guard`]) only reads them from the request and carries them out.

use std::net::{IpAddr, SocketAddr};
use std::sync::OnceLock;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Next;
use actix_web::web;

use crate::error::ApiError;

/// The URL clients reach the service at when it is not the listen address: the one a reverse
/// proxy in front of it (with TLS) serves, `--public-url https://seed.example.com`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    /// `http` or `https`.
    pub scheme: String,
    /// The host, lowercase (an IPv6 address without its brackets).
    pub host: String,
    /// The port, the scheme's own when the URL names none.
    pub port: u16,
}

impl std::str::FromStr for PublicUrl {
    type Err = String;

    /// Parses `http(s)://HOST[:PORT][/…]`; a path is allowed (and not used), credentials are
    /// not.
    fn from_str(text: &str) -> Result<PublicUrl, String> {
        let (scheme, rest) = text
            .split_once("://")
            .ok_or_else(|| format!("{text:?} is not a URL: it has no scheme (https://…)"))?;
        let scheme = scheme.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "https" => 443,
            "http" => 80,
            _ => return Err(format!("the scheme {scheme:?} is neither http nor https")),
        };
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if authority.contains('@') {
            return Err("a public URL names no user or password".to_owned());
        }
        let (host, port) = split_authority(authority)
            .ok_or_else(|| format!("{text:?} has no host, or a port that is not a number"))?;
        Ok(PublicUrl {
            scheme,
            host,
            port: port.unwrap_or(default_port),
        })
    }
}

impl std::fmt::Display for PublicUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        write!(f, "{}://{host}:{}", self.scheme, self.port)
    }
}

/// A Host field (or URL authority) as a lowercase host, without an IPv6 address's brackets or a
/// trailing dot, and its port if it names one. `None` when it is empty or malformed.
pub fn split_authority(authority: &str) -> Option<(String, Option<u16>)> {
    let authority = authority.trim();
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            after => Some(after.strip_prefix(':')?),
        };
        (host, port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) if !host.contains(':') => (host, Some(port)),
            Some(_) => return None,
            None => (authority, None),
        }
    };
    let port = port.map(str::parse::<u16>).transpose().ok()?;
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c == '/') {
        return None;
    }
    Some((host, port))
}

/// Whether a request whose Host is `host` is for this service: the service listening on
/// `bound` (plain HTTP), and reached at `public` when that is set.
///
/// - The public URL's host and port (a Host without a port means the URL's scheme's port).
/// - A bound address's port (a Host without a port means 80) with its address: on loopback,
///   any loopback address or `localhost`; on every interface (`0.0.0.0`, `::`), any address
///   or `localhost`; otherwise that address alone. A name other than `localhost` is only ever
///   accepted as the public URL's, since a name is what a rebinding page controls.
pub fn host_allowed(host: &str, bound: &[SocketAddr], public: Option<&PublicUrl>) -> bool {
    let Some((name, port)) = split_authority(host) else {
        return false;
    };
    if let Some(public) = public
        && name == public.host
        && port.unwrap_or(public.port) == public.port
    {
        return true;
    }
    let address: Option<IpAddr> = name.parse().ok();
    bound.iter().any(|bound| {
        if port.unwrap_or(80) != bound.port() {
            return false;
        }
        let ip = bound.ip();
        match address {
            None => name == "localhost" && (ip.is_loopback() || ip.is_unspecified()),
            Some(_) if ip.is_unspecified() => true,
            Some(address) if ip.is_loopback() => address.is_loopback(),
            Some(address) => address == ip,
        }
    })
}

/// What a refused Host is told: which names this service answers to.
pub fn misdirected(host: Option<&str>, bound: &[SocketAddr], public: Option<&PublicUrl>) -> String {
    let mut names: Vec<String> = bound.iter().map(ToString::to_string).collect();
    if let Some(public) = public {
        names.push(public.to_string());
    }
    let names = names.join(" or ");
    match host {
        Some(host) => format!(
            "this service does not answer for the host {host:?}: it answers for {names} \
             (set --public-url to the URL clients use to reach it)"
        ),
        None => format!("the request names no host: this service answers for {names}"),
    }
}

/// The warning for listening off loopback over plain HTTP, `None` on loopback alone: what can
/// be read and taken on the way, and how to put TLS in front.
pub fn plain_http_warning(bound: &[SocketAddr]) -> Option<String> {
    let exposed: Vec<String> = bound
        .iter()
        .filter(|address| !address.ip().is_loopback())
        .map(ToString::to_string)
        .collect();
    if exposed.is_empty() {
        return None;
    }
    Some(format!(
        "listening on {} over plain HTTP, off loopback: anyone on the network between a client \
         and this service can read the messages and answers, and take a browser's bearer \
         token or the login link and act as its account. Put TLS in front: listen on \
         127.0.0.1 and serve it through a reverse proxy that terminates TLS (for example \
         `caddy reverse-proxy --from seed.example.com --to 127.0.0.1:4747`), with \
         --public-url https://seed.example.com",
        exposed.join(", ")
    ))
}

/// The names a running service answers to: its bound addresses, known once it listens, and
/// its public URL.
#[derive(Debug, Default)]
pub struct Hosts {
    pub public: Option<PublicUrl>,
    /// Set once the listener is bound (the real port when the listen address asked for 0).
    pub bound: OnceLock<Vec<SocketAddr>>,
}

impl Hosts {
    fn bound(&self) -> &[SocketAddr] {
        self.bound.get().map_or(&[], Vec::as_slice)
    }
}

/// The middleware: refuses a request whose Host is not this service's with 421 and a JSON
/// error, and adds the headers every response carries.
pub async fn guard(
    request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    if let Some(hosts) = request.app_data::<web::Data<Hosts>>() {
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .or_else(|| request.uri().authority().map(ToString::to_string));
        let allowed = host
            .as_deref()
            .is_some_and(|host| host_allowed(host, hosts.bound(), hosts.public.as_ref()));
        if !allowed {
            let error = ApiError::Misdirected(misdirected(
                host.as_deref(),
                hosts.bound(),
                hosts.public.as_ref(),
            ));
            return Ok(with_headers(request.error_response(error)));
        }
    }
    let response = next.call(request).await?;
    Ok(with_headers(response.map_into_boxed_body()))
}

/// Adds `X-Content-Type-Options: nosniff`, and `Cache-Control: no-store` unless the response
/// set its own caching.
fn with_headers(mut response: ServiceResponse<BoxBody>) -> ServiceResponse<BoxBody> {
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addresses(list: &[&str]) -> Vec<SocketAddr> {
        list.iter()
            .map(|address| address.parse().expect("a socket address"))
            .collect()
    }

    #[test]
    fn authorities_split_into_host_and_port() {
        for (authority, expected) in [
            ("127.0.0.1:4747", Some(("127.0.0.1", Some(4747)))),
            ("LocalHost:80", Some(("localhost", Some(80)))),
            ("seed.example.com", Some(("seed.example.com", None))),
            (
                "seed.example.com.:443",
                Some(("seed.example.com", Some(443))),
            ),
            ("[::1]:4747", Some(("::1", Some(4747)))),
            ("[::1]", Some(("::1", None))),
            ("::1", None),
            ("", None),
            (":80", None),
            ("host:port", None),
            ("host:99999", None),
            ("[::1]x", None),
            ("a b:80", None),
        ] {
            let expected = expected.map(|(host, port)| (host.to_owned(), port));
            assert_eq!(split_authority(authority), expected, "{authority:?}");
        }
    }

    #[test]
    fn public_urls_parse_with_their_schemes_port() {
        let url = |host: &str, port| PublicUrl {
            scheme: if port == 80 { "http" } else { "https" }.to_owned(),
            host: host.to_owned(),
            port,
        };
        for (text, expected) in [
            ("https://seed.example.com", Ok(url("seed.example.com", 443))),
            (
                "https://Seed.Example.com/",
                Ok(url("seed.example.com", 443)),
            ),
            (
                "http://seed.example.com/app?x",
                Ok(url("seed.example.com", 80)),
            ),
            ("https://[2001:db8::1]:8443", Ok(url("2001:db8::1", 8443))),
        ] {
            assert_eq!(text.parse::<PublicUrl>(), expected, "{text}");
        }
        for text in [
            "seed.example.com",
            "ftp://seed.example.com",
            "https://",
            "https://user:pw@seed.example.com",
            "https://seed.example.com:https",
        ] {
            assert!(text.parse::<PublicUrl>().is_err(), "{text}");
        }
    }

    #[test]
    fn a_host_is_allowed_when_it_names_this_service() {
        let public: PublicUrl = "https://seed.example.com".parse().expect("a URL");
        let loopback = addresses(&["127.0.0.1:4747"]);
        let loopback6 = addresses(&["[::1]:4747"]);
        let everywhere = addresses(&["0.0.0.0:4747"]);
        let one = addresses(&["192.0.2.7:4747"]);
        for (host, bound, public, expected) in [
            // Loopback: any loopback address or localhost, at the bound port.
            ("127.0.0.1:4747", &loopback, None, true),
            ("localhost:4747", &loopback, None, true),
            ("LOCALHOST:4747", &loopback, None, true),
            ("[::1]:4747", &loopback, None, true),
            ("127.0.0.2:4747", &loopback, None, true),
            ("localhost:4747", &loopback6, None, true),
            ("127.0.0.1:4748", &loopback, None, false),
            ("127.0.0.1", &loopback, None, false),
            ("evil.example:4747", &loopback, None, false),
            ("192.0.2.7:4747", &loopback, None, false),
            ("", &loopback, None, false),
            // The public URL, with or without its scheme's port.
            ("seed.example.com", &loopback, Some(&public), true),
            ("seed.example.com:443", &loopback, Some(&public), true),
            ("SEED.example.com", &loopback, Some(&public), true),
            ("seed.example.com:80", &loopback, Some(&public), false),
            ("seed.example.com", &loopback, None, false),
            ("other.example.com", &loopback, Some(&public), false),
            ("127.0.0.1:4747", &loopback, Some(&public), true),
            // Every interface: any address at the port, but no name other than localhost.
            ("192.0.2.7:4747", &everywhere, None, true),
            ("localhost:4747", &everywhere, None, true),
            ("evil.example:4747", &everywhere, None, false),
            ("192.0.2.7:80", &everywhere, None, false),
            // One address: that address alone.
            ("192.0.2.7:4747", &one, None, true),
            ("192.0.2.8:4747", &one, None, false),
            ("localhost:4747", &one, None, false),
        ] {
            assert_eq!(
                host_allowed(host, bound, public),
                expected,
                "{host:?} on {bound:?} with {public:?}"
            );
        }
        let port_80 = addresses(&["127.0.0.1:80"]);
        assert!(host_allowed("localhost", &port_80, None));
    }

    #[test]
    fn a_refusal_says_which_names_the_service_answers_for() {
        let public: PublicUrl = "https://seed.example.com".parse().expect("a URL");
        assert_eq!(
            misdirected(
                Some("evil.example"),
                &addresses(&["127.0.0.1:4747"]),
                Some(&public)
            ),
            "this service does not answer for the host \"evil.example\": it answers for \
             127.0.0.1:4747 or https://seed.example.com:443 (set --public-url to the URL \
             clients use to reach it)"
        );
    }

    #[test]
    fn listening_off_loopback_warns_and_names_tls() {
        for loopback in [
            &["127.0.0.1:4747"][..],
            &["[::1]:0"],
            &["127.0.0.1:1", "[::1]:1"],
        ] {
            assert_eq!(
                plain_http_warning(&addresses(loopback)),
                None,
                "{loopback:?}"
            );
        }
        for exposed in [&["0.0.0.0:4747"][..], &["[::]:4747"], &["192.0.2.7:4747"]] {
            let warning = plain_http_warning(&addresses(exposed)).expect("a warning");
            assert!(warning.contains(exposed[0]), "{warning}");
            assert!(warning.contains("plain HTTP"), "{warning}");
            assert!(warning.contains("TLS"), "{warning}");
            assert!(warning.contains("reverse proxy"), "{warning}");
            assert!(warning.contains("--public-url"), "{warning}");
        }
    }
}

//! What every request meets at a real `seed serve`: the Host check (the listen address, its
//! loopback aliases and `--public-url` are this service; another name is refused with 421), the
//! headers of API responses, the login link's expiry and where it is printed, and the warning
//! for listening off loopback over plain HTTP.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{SEED, Server, new_session};

/// An answer read off the wire: status, headers (lowercase names), body.
#[derive(Debug)]
struct Wire {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Wire {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// `GET path` to the service at `url`, with `host` as its Host field.
fn get(url: &str, host: &str, path: &str) -> Wire {
    let address = url.strip_prefix("http://").expect("an http URL");
    let mut stream = TcpStream::connect(address).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("a read timeout, as a hang guard");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .expect("sends");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("reads the answer");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Wire {
        status,
        headers,
        body: body.to_owned(),
    }
}

fn port(url: &str) -> String {
    url.rsplit_once(':')
        .map(|(_, port)| port.to_owned())
        .expect("a port")
}

#[actix_web::test]
async fn a_request_for_another_host_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &["--public-url", "https://seed.example.com"]);
    let port = port(&server.url);
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "seed.example.com".to_owned(),
        "seed.example.com:443".to_owned(),
    ] {
        let answer = get(&server.url, &host, "/healthz");
        assert_eq!(answer.status, 200, "{host}: {answer:?}");
    }
    for host in [
        format!("evil.example:{port}"),
        "evil.example".to_owned(),
        format!("127.0.0.1:{}", port.parse::<u16>().expect("a port") ^ 1),
        "seed.example.com:8443".to_owned(),
    ] {
        for path in ["/healthz", "/v1/sessions", "/", "/login?code=x"] {
            let answer = get(&server.url, &host, path);
            assert_eq!(answer.status, 421, "{host}{path}: {answer:?}");
            assert_eq!(
                answer.header("content-type"),
                Some("application/json"),
                "{answer:?}"
            );
            let body: serde_json::Value = serde_json::from_str(&answer.body).expect("a JSON error");
            let error = body["error"].as_str().unwrap_or_default();
            assert!(error.contains(&format!("{host:?}")), "{error}");
            assert!(error.contains("--public-url"), "{error}");
        }
    }
    // The signing client, which names the listen address, is answered as before.
    new_session(&server.client()).await;
}

#[actix_web::test]
async fn api_responses_are_neither_sniffed_nor_stored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &[]);
    let host = format!("127.0.0.1:{}", port(&server.url));
    for path in [
        "/healthz",
        "/v1/openapi.json",
        "/v1/sessions",
        "/v1/no-such-route",
        "/login?code=x",
    ] {
        let answer = get(&server.url, &host, path);
        assert_eq!(
            answer.header("x-content-type-options"),
            Some("nosniff"),
            "{path}: {answer:?}"
        );
        assert_eq!(
            answer.header("cache-control"),
            Some("no-store"),
            "{path}: {answer:?}"
        );
    }
    // The UI's files keep their own caching (revalidated on each load).
    let asset = get(&server.url, &host, "/ui/app.js");
    assert_eq!(asset.status, 200);
    assert_eq!(asset.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(asset.header("cache-control"), Some("no-cache"));
}

#[test]
fn the_login_link_expires_and_is_never_logged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("serve.log");
    let data_dir = dir.path().join("data");
    let server = Server::start(&data_dir, &["--login-code-ttl-secs", "1"]);
    let host = format!("127.0.0.1:{}", port(&server.url));
    let login_path = server
        .login_url
        .strip_prefix(&server.url)
        .expect("a link to this server")
        .to_owned();
    // The link's lifetime is what is tested: it passes.
    std::thread::sleep(Duration::from_millis(1_500));
    let expired = get(&server.url, &host, &login_path);
    assert_eq!(expired.status, 401, "{expired:?}");
    assert!(expired.body.contains("expired"), "{expired:?}");
    assert!(!expired.body.contains("seed.token"), "{expired:?}");
    drop(server);

    // With the debug log on, the link is printed to stdout and nowhere in the log.
    let mut child = Command::new(SEED)
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path().join("data2"))
        .args(["--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "debug")
        .env("SEED_PROVIDER", "scripted")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(&log).expect("the log file"),
        ))
        .spawn()
        .expect("seed serve starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let login_url = loop {
        let line = lines
            .next()
            .expect("seed serve printed its login link")
            .expect("stdout");
        if let Some(login) = line.strip_prefix("sign in a browser (one time): ") {
            break login.to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let (url, code) = login_url.split_once("/login?code=").expect("a login link");
    let signed_in = get(
        url,
        &url.replace("http://", ""),
        &format!("/login?code={code}"),
    );
    assert_eq!(signed_in.status, 200, "{signed_in:?}");
    let _ = child.kill();
    let _ = child.wait();
    let logged = std::fs::read_to_string(&log).expect("the log");
    assert!(logged.contains("request"), "the debug log is on: {logged}");
    assert!(!logged.contains(code), "the login code is in the log");
}

#[test]
fn listening_off_loopback_warns_about_plain_http() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(SEED)
        .arg("serve")
        .arg("--data-dir")
        .arg(dir.path())
        .args(["--listen", "0.0.0.0:0"])
        .env("RUST_LOG", "warn")
        .env("SEED_PROVIDER", "scripted")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("seed serve starts");
    let stderr = child.stderr.take().expect("stderr");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    let warning = loop {
        let line = receiver
            .recv_timeout(Duration::from_secs(60))
            .expect("seed serve warns before a minute is out");
        if line.contains("plain HTTP") {
            break line;
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(warning.contains("0.0.0.0:"), "{warning}");
    assert!(warning.contains("TLS"), "{warning}");
    assert!(warning.contains("reverse proxy"), "{warning}");
}

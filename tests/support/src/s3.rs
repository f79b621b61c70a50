//! A local S3 server for the object-storage tests: moto behind a fault-injecting
//! proxy (`tests/python/s3_server.py`), started per test and stopped when dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use crate::python::{repo_root, venv_python};

/// The bucket every server has.
pub const BUCKET: &str = "bcd-test";

/// A running moto server and its proxy.
pub struct S3Server {
    child: Child,
    stdin: Option<ChildStdin>,
    /// moto's own port (requests that should not pass the proxy).
    pub moto_port: u16,
    /// The proxy's port: the endpoint the code under test uses.
    pub proxy_port: u16,
}

impl S3Server {
    /// Starts a server with [`BUCKET`]; fails the test if it cannot.
    #[track_caller]
    pub fn start() -> S3Server {
        let mut child = Command::new(venv_python())
            .arg(repo_root().join("tests/python/s3_server.py"))
            .arg(BUCKET)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start tests/python/s3_server.py");
        let stdin = child.stdin.take();
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("read the server's ports");
        let ports: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!("tests/python/s3_server.py did not start ({e}): {line:?}; is moto installed (bash tests/python/setup-env.sh)?")
        });
        S3Server {
            child,
            stdin,
            moto_port: ports["moto"].as_u64().expect("moto port") as u16,
            proxy_port: ports["proxy"].as_u64().expect("proxy port") as u16,
        }
    }

    /// The endpoint URL the code under test uses (the proxy).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.proxy_port)
    }

    /// The environment that points an S3 client at this server, with static test
    /// credentials (so no client ever asks an instance-metadata service), plain
    /// HTTP allowed, and retries short enough for fault tests.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
            ("BCD_REMOTE_MAX_RETRIES", "4".into()),
            ("BCD_REMOTE_RETRY_TIMEOUT", "20".into()),
        ]
    }

    /// Sends a control request (`fail?status=503&count=2`, `down?after=3`, `up`,
    /// `reset`, `log`) to the proxy and returns its JSON answer.
    pub fn control(&self, request: &str) -> serde_json::Value {
        self.control_with_body(request, b"")
    }

    /// [`S3Server::control`] with a request body (`race?path=...` takes the bytes
    /// the other writer puts).
    pub fn control_with_body(&self, request: &str, body: &[u8]) -> serde_json::Value {
        let method = if request == "log" { "GET" } else { "POST" };
        let (status, answer) = self.raw_control(method, request, body);
        assert_eq!(status, 200, "proxy control {request}");
        serde_json::from_slice(&answer)
            .unwrap_or_else(|e| panic!("proxy answer {:?}: {e}", String::from_utf8_lossy(&answer)))
    }

    /// Puts `body` as object `key` of [`BUCKET`] (with moto's credentials, not
    /// through the faults).
    pub fn put_object(&self, key: &str, body: &[u8]) {
        let request = format!("object?bucket={BUCKET}&key={}", encode(key));
        let (status, _) = self.raw_control("POST", &request, body);
        assert_eq!(status, 200, "PUT {key}");
    }

    /// Replaces the bytes of object `key` of [`BUCKET`] with `body`, keeping its
    /// user metadata (the checksum it was uploaded with): damage in the store.
    pub fn tamper_object(&self, key: &str, body: &[u8]) {
        let request = format!("object?bucket={BUCKET}&key={}&keep_metadata=1", encode(key));
        let (status, _) = self.raw_control("POST", &request, body);
        assert_eq!(status, 200, "PUT {key}");
    }

    /// Object `key` of [`BUCKET`], `None` if absent.
    pub fn get_object(&self, key: &str) -> Option<Vec<u8>> {
        let request = format!("object?bucket={BUCKET}&key={}", encode(key));
        match self.raw_control("GET", &request, b"") {
            (200, body) => Some(body),
            (404, _) => None,
            (status, body) => panic!("GET {key}: {status} {}", String::from_utf8_lossy(&body)),
        }
    }

    /// The keys of the multipart uploads in progress in [`BUCKET`].
    pub fn multipart_uploads(&self) -> Vec<String> {
        let (status, body) = self.raw_control("GET", &format!("uploads?bucket={BUCKET}"), b"");
        assert_eq!(status, 200);
        serde_json::from_slice(&body).expect("a JSON list")
    }

    /// The requests the proxy saw since the last `reset`: (method, path, status).
    pub fn log(&self) -> Vec<(String, String, u16)> {
        self.control("log")
            .as_array()
            .expect("a list")
            .iter()
            .map(|entry| {
                (
                    entry[0].as_str().unwrap().to_owned(),
                    entry[1].as_str().unwrap().to_owned(),
                    entry[2].as_u64().unwrap() as u16,
                )
            })
            .collect()
    }

    /// One control request: (status, body).
    fn raw_control(&self, method: &str, request: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.proxy_port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        write!(
            stream,
            "{method} /__proxy__/{request} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .unwrap();
        stream.write_all(body).unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).unwrap();
        let split = answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a complete answer");
        let head = String::from_utf8_lossy(&answer[..split]).into_owned();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("a status");
        (status, answer[split + 4..].to_vec())
    }
}

/// `text` %-encoded for a query string.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Drop for S3Server {
    fn drop(&mut self) {
        // Closing its stdin stops it.
        drop(self.stdin.take());
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

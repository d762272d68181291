//! Where the agent gets its desired config.
//!
//! A config source yields "the desired rendered config" and nothing else, so that the transport
//! can change (a file, a URL, a watched directory today; hearth-server's long-poll and a
//! Kubernetes API server later) without touching the apply logic.

use crate::journal::NamedConfig;
use crate::limits;
use hearth_config::diag::Diagnostic;
use hearth_config::manifest::read_machine_config;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why no desired config could be had.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Reading failed.
    #[error("{source_name}: {message}")]
    Read {
        /// The file or URL.
        source_name: String,
        /// Why.
        message: String,
    },
    /// The content is not one valid MachineConfig.
    #[error("{source_name}: not a valid MachineConfig:\n{}", .problems.iter().map(|d| format!("  {d}")).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// The file or URL.
        source_name: String,
        /// Every problem.
        problems: Vec<Diagnostic>,
    },
}

/// Parses one MachineConfig (rendered or not) from `text`.
pub fn parse(source_name: &str, text: &str) -> Result<NamedConfig, SourceError> {
    match read_machine_config(source_name, text) {
        Ok((mc, warnings)) => {
            for w in warnings {
                tracing::warn!(source = source_name, "{w}");
            }
            // The Ignition version a config was written in does not matter once it is read:
            // drop it so that the same config compares equal however it was written.
            let mut spec = mc.spec;
            spec.source_version = None;
            Ok(NamedConfig {
                name: mc.metadata.name,
                spec,
            })
        }
        Err(problems) => Err(SourceError::Invalid {
            source_name: source_name.to_string(),
            problems,
        }),
    }
}

/// Reads the desired config from a file or an `http(s)://` URL (the MCO daemon's `--once-from`),
/// within the limits of [`crate::limits`]: at most [`limits::MAX_CONFIG_BYTES`], connected
/// within [`limits::CONNECT_TIMEOUT`] and read in all within [`limits::FETCH_TIMEOUT`].
pub async fn fetch(location: &str) -> Result<NamedConfig, SourceError> {
    fetch_within(location, limits::MAX_CONFIG_BYTES, limits::FETCH_TIMEOUT).await
}

/// [`fetch`] with a size limit `max` (URLs and files) and a total time limit `total` (URLs).
pub async fn fetch_within(
    location: &str,
    max: u64,
    total: Duration,
) -> Result<NamedConfig, SourceError> {
    let bytes = fetch_bytes_within(location, max, total).await?;
    parse_bytes(location, bytes)
}

/// The bytes of the desired config at `location`, within the limits of [`fetch`], not parsed.
pub async fn fetch_bytes(location: &str) -> Result<Vec<u8>, SourceError> {
    fetch_bytes_within(location, limits::MAX_CONFIG_BYTES, limits::FETCH_TIMEOUT).await
}

/// The local file a location names (a path or `file://`), or `None` for a URL.
pub fn local_path(location: &str) -> Option<&Path> {
    if location.starts_with("http://") || location.starts_with("https://") {
        return None;
    }
    Some(Path::new(
        location.strip_prefix("file://").unwrap_or(location),
    ))
}

/// The content of a local config file already open (`location` names it in errors), bounded as
/// [`fetch_bytes`] bounds it.
pub fn read_open(location: &str, file: std::fs::File) -> Result<Vec<u8>, SourceError> {
    read_open_within(location, file, limits::MAX_CONFIG_BYTES)
}

fn read_open_within(location: &str, file: std::fs::File, max: u64) -> Result<Vec<u8>, SourceError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| SourceError::Read {
            source_name: location.to_string(),
            message: e.to_string(),
        })?;
    if bytes.len() as u64 > max {
        return Err(SourceError::Read {
            source_name: location.to_string(),
            message: limits::BodyError::TooLarge {
                what: "a MachineConfig",
                limit: limits::human(max),
                declared: None,
            }
            .to_string(),
        });
    }
    Ok(bytes)
}

/// Parses fetched bytes (UTF-8 text, one MachineConfig).
pub fn parse_bytes(location: &str, bytes: Vec<u8>) -> Result<NamedConfig, SourceError> {
    let text = String::from_utf8(bytes).map_err(|e| SourceError::Read {
        source_name: location.to_string(),
        message: format!("not UTF-8 text (at byte {})", e.utf8_error().valid_up_to()),
    })?;
    parse(location, &text)
}

async fn fetch_bytes_within(
    location: &str,
    max: u64,
    total: Duration,
) -> Result<Vec<u8>, SourceError> {
    let read_err = |message: String| SourceError::Read {
        source_name: location.to_string(),
        message,
    };
    let bytes = if location.starts_with("http://") || location.starts_with("https://") {
        let client = reqwest::Client::builder()
            .connect_timeout(limits::CONNECT_TIMEOUT)
            .timeout(total)
            .build()
            .map_err(|e| read_err(e.to_string()))?;
        let resp = client
            .get(location)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| read_err(limits::describe(&e, total)))?;
        limits::read_body(resp, max, "a MachineConfig", total)
            .await
            .map_err(|e| read_err(e.to_string()))?
    } else {
        // A local file, read on a blocking thread (the daemon's other tasks go on meanwhile).
        let path = local_path(location).unwrap_or(Path::new(location));
        let file = std::fs::File::open(path).map_err(|e| read_err(e.to_string()))?;
        let owned = location.to_string();
        tokio::task::spawn_blocking(move || read_open_within(&owned, file, max))
            .await
            .map_err(|e| read_err(e.to_string()))??
    };
    Ok(bytes)
}

/// The file a watched location currently names: the location itself if it is a file, else the
/// newest `*.yaml`/`*.yml`/`*.json` file in the directory (by modification time, then name).
pub fn watched_file(location: &Path) -> Result<Option<PathBuf>, SourceError> {
    let meta = match std::fs::metadata(location) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(SourceError::Read {
                source_name: location.display().to_string(),
                message: e.to_string(),
            })
        }
    };
    if !meta.is_dir() {
        return Ok(Some(location.to_path_buf()));
    }
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    let entries = std::fs::read_dir(location).map_err(|e| SourceError::Read {
        source_name: location.display().to_string(),
        message: e.to_string(),
    })?;
    for entry in entries.flatten() {
        let p = entry.path();
        let ok = p
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"));
        if !ok {
            continue;
        }
        let Ok(m) = entry.metadata() else { continue };
        let t = m.modified().unwrap_or(std::time::UNIX_EPOCH);
        if best.as_ref().is_none_or(|(bt, bp)| (t, &p) > (*bt, bp)) {
            best = Some((t, p));
        }
    }
    Ok(best.map(|(_, p)| p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_configs_list_every_problem() {
        let e = parse(
            "x.yaml",
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: x}\nspec:\n  kernelType: rt\n",
        )
        .unwrap_err();
        let s = e.to_string();
        assert!(s.contains("spec.kernelType"), "{s}");
    }

    /// `--once-from https://...`-style fetches, against a real HTTP server on loopback (plain
    /// HTTP; TLS to hearth-server is tested with the server).
    #[tokio::test]
    async fn fetches_a_config_over_http_and_reports_http_errors() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let body = "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: from-url}\nspec: {kernelArguments: [nosmt]}\n";
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            for _ in 0..2 {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 1024];
                let n = s.read(&mut buf).await.unwrap();
                let req = String::from_utf8_lossy(&buf[..n]).to_string();
                let resp = if req.starts_with("GET /config.yaml") {
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                } else {
                    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .to_string()
                };
                s.write_all(resp.as_bytes()).await.unwrap();
            }
        });
        let got = fetch(&format!("http://{addr}/config.yaml")).await.unwrap();
        assert_eq!(got.name, "from-url");
        assert_eq!(got.spec.kernel_arguments, ["nosmt"]);
        let err = fetch(&format!("http://{addr}/missing.yaml"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("404"), "{err}");
    }

    /// A server that sends its headers and then a body that never ends, one byte at a time:
    /// refused at the size limit, or at the time limit, whichever comes first.
    #[tokio::test]
    async fn an_endless_or_stalled_body_is_refused() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let _ = s.read(&mut buf).await;
                    let stall = String::from_utf8_lossy(&buf).contains("/stall");
                    let _ = s
                        .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                        .await;
                    loop {
                        if stall {
                            tokio::time::sleep(Duration::from_secs(3600)).await;
                        }
                        if s.write_all(b"1000\r\n").await.is_err()
                            || s.write_all(&[b'#'; 0x1000]).await.is_err()
                            || s.write_all(b"\r\n").await.is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        let err = fetch_within(
            &format!("http://{addr}/endless"),
            1 << 20,
            Duration::from_secs(600),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("larger than 1 MiB"), "{err}");
        let err = fetch_within(
            &format!("http://{addr}/stall"),
            1 << 20,
            Duration::from_secs(1),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("no complete answer within 1 s"), "{err}");
    }

    #[test]
    fn newest_file_of_a_directory() {
        let d = tempfile::tempdir().unwrap();
        assert!(watched_file(&d.path().join("none")).unwrap().is_none());
        std::fs::write(d.path().join("a.yaml"), "x").unwrap();
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(d.path().join("b.yaml"), "x").unwrap();
        std::fs::write(d.path().join("c.txt"), "x").unwrap();
        assert_eq!(
            watched_file(d.path()).unwrap().unwrap(),
            d.path().join("b.yaml")
        );
    }
}

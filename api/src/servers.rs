//! The list of hearth-server URLs the agent and the CLI take (`--server`, `HEARTH_SERVER`, the
//! CLI's login file): the one rule both read it by. Not a wire type.
//!
//! A list is given as repeated flags, each of which may itself be a comma-separated list (the
//! form `HEARTH_SERVER` and `/etc/hearth/agent.env` use). Every entry is an `https` URL with a
//! host; a trailing `/` is dropped; a URL given twice counts once. At most [`MAX_SERVERS`].

/// How many server URLs one agent or one CLI invocation takes (the replicas of one site; a
/// longer list is a mistake, and each URL may cost a connect timeout per round).
pub const MAX_SERVERS: usize = 16;

/// Why a server list was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerListError {
    /// No URL at all.
    Empty {
        /// Where the list came from (`--server`, `HEARTH_SERVER`, ...).
        from: String,
    },
    /// More than [`MAX_SERVERS`] URLs.
    TooMany {
        /// Where the list came from.
        from: String,
        /// How many it held.
        count: usize,
    },
    /// An entry that is not an `https` URL with a host.
    Bad {
        /// Where the list came from.
        from: String,
        /// The entry, as given.
        entry: String,
        /// What is wrong with it.
        why: String,
    },
}

impl std::fmt::Display for ServerListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerListError::Empty { from } => {
                write!(f, "{from}: no server URL (give https://host:port)")
            }
            ServerListError::TooMany { from, count } => write!(
                f,
                "{from}: {count} server URLs; at most {MAX_SERVERS} are taken (list the replicas of one site)"
            ),
            ServerListError::Bad { from, entry, why } => write!(
                f,
                "{from}: \"{}\" is not a server URL: {why} (give https://host:port, several separated by commas)",
                crate::text::escape(entry)
            ),
        }
    }
}

impl std::error::Error for ServerListError {}

/// The server URLs in `values` (each a URL or a comma-separated list), in order, without
/// duplicates and without a trailing `/`; `from` names the flag or variable in a refusal.
pub fn parse<S: AsRef<str>>(from: &str, values: &[S]) -> Result<Vec<String>, ServerListError> {
    let mut out: Vec<String> = Vec::new();
    let mut count = 0usize;
    for entry in values
        .iter()
        .flat_map(|v| v.as_ref().split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        count += 1;
        if count > MAX_SERVERS {
            // Counted to the end (cheap: a split), so the refusal says how many there were.
            continue;
        }
        let url = check(from, entry)?;
        if !out.contains(&url) {
            out.push(url);
        }
    }
    if count > MAX_SERVERS {
        return Err(ServerListError::TooMany {
            from: from.to_string(),
            count,
        });
    }
    if out.is_empty() {
        return Err(ServerListError::Empty {
            from: from.to_string(),
        });
    }
    Ok(out)
}

/// One entry: an `https` URL with a host, nothing after its path.
fn check(from: &str, entry: &str) -> Result<String, ServerListError> {
    let bad = |why: String| ServerListError::Bad {
        from: from.to_string(),
        entry: entry.to_string(),
        why,
    };
    let url = url::Url::parse(entry).map_err(|e| bad(e.to_string()))?;
    if url.scheme() != "https" {
        return Err(bad(format!(
            "the scheme is {:?}; hearth-server speaks https only",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host".into()));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("a server URL has no query or fragment".into()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad(
            "a server URL carries no user or password (the token is given apart)".into(),
        ));
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_and_comma_separated_lists_are_one_list() {
        let got = parse(
            "--server",
            &[
                "https://a:22623/, https://b:22623",
                "https://c:22623,https://a:22623",
            ],
        )
        .unwrap();
        assert_eq!(
            got,
            ["https://a:22623", "https://b:22623", "https://c:22623"]
        );
    }

    #[test]
    fn refusals_name_the_flag_and_the_entry() {
        let e = parse("--server", &["https://a:1,http://b:2"])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--server: \"http://b:2\""), "{e}");
        assert!(e.contains("https only"), "{e}");
        let e = parse("HEARTH_SERVER", &["a.example:22623"])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("HEARTH_SERVER: \"a.example:22623\""), "{e}");
        let e = parse("--server", &[" , "]).unwrap_err().to_string();
        assert!(e.contains("no server URL"), "{e}");
        let e = parse("--server", &["https://u:p@a:1"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no user or password"), "{e}");
    }

    #[test]
    fn at_most_sixteen() {
        let list: Vec<String> = (0..MAX_SERVERS)
            .map(|i| format!("https://h{i}:1"))
            .collect();
        assert_eq!(parse("--server", &list).unwrap().len(), MAX_SERVERS);
        let joined = format!("{},https://one-more:1", list.join(","));
        let e = parse("--server", &[joined]).unwrap_err().to_string();
        assert!(e.contains("17 server URLs; at most 16"), "{e}");
    }
}

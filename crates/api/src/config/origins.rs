//! `CORS_ALLOWED_ORIGINS`: the origins whose pages may call the public API.

/// Origins allowed to call the public API across origins, each
/// `scheme://host[:port]` as a browser sends it in `Origin`; empty means
/// same-origin only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedOrigins(pub Vec<String>);

/// Parses a comma-separated list of origins. An origin is `http` or
/// `https`, a host and an optional port, nothing after: a browser's
/// `Origin` never carries a path, so an entry with one (or a trailing
/// slash) would silently never match. `*` is refused: list the origins.
pub fn parse(value: &str) -> Result<AllowedOrigins, String> {
    let mut origins = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        origins.push(origin(entry)?);
    }
    Ok(AllowedOrigins(origins))
}

fn origin(entry: &str) -> Result<String, String> {
    if entry == "*" {
        return Err("`*` is not accepted: list the origins".to_owned());
    }
    let (scheme, rest) = entry
        .split_once("://")
        .ok_or_else(|| format!("{entry:?} is not scheme://host[:port]"))?;
    if scheme != "http" && scheme != "https" {
        return Err(format!("{entry:?}: the scheme must be http or https"));
    }
    if rest.is_empty() || rest.contains(['/', '?', '#', '@', ' ']) {
        return Err(format!(
            "{entry:?}: an origin is scheme://host[:port], with no path, query or user"
        ));
    }
    if let Some((_, port)) = rest.rsplit_once(':')
        && !rest.ends_with(']')
        && port.parse::<u16>().is_err()
    {
        return Err(format!("{entry:?}: the port is not a number below 65536"));
    }
    Ok(entry.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_listed_exactly() {
        assert_eq!(parse("").unwrap(), AllowedOrigins(vec![]));
        assert_eq!(
            parse(" https://Chat.Example , http://127.0.0.1:5173").unwrap(),
            AllowedOrigins(vec![
                "https://chat.example".to_owned(),
                "http://127.0.0.1:5173".to_owned()
            ])
        );
        assert_eq!(parse("http://[::1]:8080").unwrap().0, ["http://[::1]:8080"]);
    }

    #[test]
    fn anything_a_browser_would_never_send_as_an_origin_is_refused() {
        for bad in [
            "*",
            "chat.example",
            "ftp://chat.example",
            "https://chat.example/",
            "https://chat.example/app",
            "https://user@chat.example",
            "https://chat.example:http",
            "https://",
        ] {
            assert!(parse(bad).is_err(), "{bad} was accepted");
        }
    }
}

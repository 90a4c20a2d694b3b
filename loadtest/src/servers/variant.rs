//! A server configuration an experiment compares: a name and the env its
//! spawned servers get (`--variant blocking:DB_DRIVER=blocking`).

/// A server configuration the matrix compares: a name and the env it adds
/// to spawned servers (`async:DB_DRIVER=async`, `unpooled:DB_POOL=off`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerVariant {
    /// Its name in tables and charts (`-`: the servers as they are).
    pub name: String,
    /// Extra env of its servers.
    pub env: Vec<(String, String)>,
}

impl std::str::FromStr for ServerVariant {
    type Err = String;

    /// `NAME` or `NAME:KEY=VALUE+KEY=VALUE`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, env) = s.split_once(':').unwrap_or((s, ""));
        if name.is_empty() {
            return Err(format!(
                "{s:?}: a variant needs a name, e.g. blocking:DB_DRIVER=blocking"
            ));
        }
        let env = env
            .split('+')
            .filter(|kv| !kv.is_empty())
            .map(parse_kv)
            .collect::<Result<_, _>>()?;
        Ok(Self {
            name: name.to_owned(),
            env,
        })
    }
}

/// `KEY=VALUE` as a pair.
pub fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("{s:?} is not KEY=VALUE"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_variants_parse_name_and_env() {
        let v: ServerVariant = "unpooled:DB_POOL=off+DB_DRIVER=blocking".parse().unwrap();
        assert_eq!(v.name, "unpooled");
        assert_eq!(
            v.env,
            vec![
                ("DB_POOL".to_owned(), "off".to_owned()),
                ("DB_DRIVER".to_owned(), "blocking".to_owned())
            ]
        );
        let bare: ServerVariant = "pooled".parse().unwrap();
        assert!(bare.env.is_empty());
        assert!(":DB_POOL=off".parse::<ServerVariant>().is_err());
        assert!("x:DB_POOL".parse::<ServerVariant>().is_err());
    }
}

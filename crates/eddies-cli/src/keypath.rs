//! Dotted key paths into a scene (`domain.resolution`, `region[0].density`), as `--set` takes them and as
//! error messages name them.

use std::fmt;

/// One step of a [`KeyPath`]: a table key or an index into an array (of tables).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    /// A key of a table.
    Key(String),
    /// A zero-based index into an array or an array of tables.
    Index(usize),
}

/// A path from the root of a scene document to one of its keys or values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyPath(pub Vec<Seg>);

impl KeyPath {
    /// The path of the document itself.
    pub fn root() -> Self {
        Self(Vec::new())
    }

    /// This path extended by the table key `k`.
    pub fn key(&self, k: &str) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Key(k.to_string()));
        p
    }

    /// This path extended by the array index `i`.
    pub fn index(&self, i: usize) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Index(i));
        p
    }

    /// Whether `self` is a prefix of (or equal to) `other`.
    pub fn is_prefix_of(&self, other: &KeyPath) -> bool {
        other.0.len() >= self.0.len() && other.0[..self.0.len()] == self.0[..]
    }

    /// Parses a path as `--set` takes it: keys separated by dots, array indices either as their own dotted
    /// component (`region.0.density`) or in brackets (`region[0].density`). Keys are bare TOML keys
    /// (letters, digits, `_` and `-`).
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.is_empty() {
            return Err("the key is empty".to_string());
        }
        let mut segs = Vec::new();
        for part in s.split('.') {
            let (name, mut rest) = match part.find('[') {
                Some(i) => (&part[..i], &part[i..]),
                None => (part, ""),
            };
            if name.is_empty() && rest.is_empty() {
                return Err(format!("empty component in `{s}`"));
            }
            if !name.is_empty() {
                if name.bytes().all(|b| b.is_ascii_digit()) && !segs.is_empty() {
                    let i = name
                        .parse()
                        .map_err(|_| format!("index `{name}` is too large"))?;
                    segs.push(Seg::Index(i));
                } else if name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                {
                    segs.push(Seg::Key(name.to_string()));
                } else {
                    return Err(format!(
                        "`{name}` is not a valid key (keys use letters, digits, `_` and `-`)"
                    ));
                }
            } else if segs.is_empty() {
                return Err(format!(
                    "`{s}` starts with an index; it must start with a key"
                ));
            }
            while !rest.is_empty() {
                let close = rest
                    .find(']')
                    .ok_or_else(|| format!("unclosed `[` in `{s}`"))?;
                let idx = &rest[1..close];
                let i = idx
                    .parse()
                    .map_err(|_| format!("`{idx}` in `{s}` is not an array index"))?;
                segs.push(Seg::Index(i));
                rest = &rest[close + 1..];
                if !rest.is_empty() && !rest.starts_with('[') {
                    return Err(format!("unexpected `{rest}` after `]` in `{s}`"));
                }
            }
        }
        Ok(Self(segs))
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) if i == 0 => write!(f, "{k}")?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Index(j) => write!(f, "[{j}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dotted_and_bracketed_indices() {
        let a = KeyPath::parse("region.0.density").unwrap();
        let b = KeyPath::parse("region[0].density").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.to_string(), "region[0].density");
        assert_eq!(
            KeyPath::parse("domain.resolution[1]").unwrap(),
            KeyPath::root().key("domain").key("resolution").index(1)
        );
    }

    #[test]
    fn rejects_malformed_paths() {
        for bad in ["", "a..b", "[0].a", "a[x]", "a[1", "a b", "a[1]x"] {
            assert!(KeyPath::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn prefix() {
        let d = KeyPath::root().key("domain");
        assert!(d.is_prefix_of(&d.key("size")));
        assert!(d.is_prefix_of(&d));
        assert!(!d.key("size").is_prefix_of(&d));
    }
}

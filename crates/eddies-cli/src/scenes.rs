//! Built-in scenes: the TOML files of the workspace's `scenes/` folder, embedded in the binary. Each file's
//! first line is `# <one-line description>`, which `eddies scenes` lists.

/// An embedded scene file.
#[derive(Clone, Copy, Debug)]
pub struct BuiltinScene {
    /// Name on the command line (`eddies run NAME`); the file is `scenes/NAME.toml`.
    pub name: &'static str,
    /// The TOML text.
    pub source: &'static str,
}

impl BuiltinScene {
    /// The description: the first line of the file without its `# `.
    pub fn description(&self) -> &'static str {
        self.source
            .lines()
            .next()
            .and_then(|l| l.strip_prefix('#'))
            .map(str::trim)
            .unwrap_or("")
    }

    /// How error messages name the scene.
    pub fn label(&self) -> String {
        format!("builtin:{}.toml", self.name)
    }
}

/// The scene `eddies run` runs without arguments.
pub const SHOWCASE: &str = "paint-stream";

macro_rules! builtin {
    ($name:literal) => {
        BuiltinScene {
            name: $name,
            source: include_str!(concat!("../../../scenes/", $name, ".toml")),
        }
    };
}

/// Every built-in scene, the showcase first.
pub const BUILTIN: &[BuiltinScene] = &[
    builtin!("paint-stream"),
    builtin!("dam-break-reint"),
    builtin!("dam-break-reint-3d"),
    builtin!("droplet-splash"),
    builtin!("gas-expansion"),
    builtin!("vortex-ring"),
    builtin!("leapfrog-rings"),
    builtin!("colliding-rings"),
    builtin!("jet"),
    builtin!("vortex-tube"),
    builtin!("dye-drop"),
    builtin!("two-drops"),
    builtin!("rayleigh-taylor"),
    builtin!("hot-plume"),
    builtin!("velocity-methods"),
    builtin!("dam-break"),
    builtin!("dam-break-3d"),
    builtin!("double-dam-break-3d"),
    builtin!("drop-into-pool-3d"),
    builtin!("obstacle-stream-3d"),
    builtin!("paddle-3d"),
    builtin!("sloshing-2d"),
];

/// The built-in scene called `name`.
pub fn find(name: &str) -> Option<&'static BuiltinScene> {
    BUILTIN.iter().find(|s| s.name == name)
}

/// The names of the built-in scenes, comma-separated, for messages.
pub fn names() -> String {
    BUILTIN
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_has_a_description_and_the_showcase_exists() {
        assert!(find(SHOWCASE).is_some());
        for s in BUILTIN {
            assert!(
                !s.description().is_empty(),
                "{} has no description line",
                s.name
            );
            assert!(
                s.source.starts_with("# "),
                "{} must start with `# <description>`",
                s.name
            );
        }
    }

    #[test]
    fn every_builtin_parses_and_validates() {
        for s in BUILTIN {
            let src = crate::load::SceneSource {
                label: s.label(),
                name: s.name.into(),
                text: s.source.into(),
            };
            if let Err(e) = crate::load::load(&src, &[]) {
                panic!("{}: {e}", s.name);
            }
        }
    }
}
